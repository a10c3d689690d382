"""What every stream query of the three runtimes (`incremental`, `stateful`, `routed`) shares:
where its checkpoint lives, its id, the refusal of a new checkpoint over a table that already
has rows, and the one place a `foreachBatch` query is started (docs/design.md, "Runtime").

A query's sink and its checkpoint belong together: a new checkpoint over a sink that has rows
would write every row again, so a query with no `offsets/` yet refuses to start over rows
(`refuse_new_checkpoint`); `sqlflow run --mode stream --full-refresh` removes both
(`sqlflow.runtime.refresh`). Idempotent writes name a query `<model>@<query id>`: Spark keeps
the id in the checkpoint, so a restart continues it and a new checkpoint is a new query.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from sqlflow.errors import Location, SqlflowError
from sqlflow.planning.plan import RoutedPlan, StreamPlan
from sqlflow.project.runmode import AVAILABLE_NOW, STATE_DIR


def checkpoint_dir(project_dir: Path | str, plan: StreamPlan | RoutedPlan) -> Path:
    """The checkpoint folder of the plan's query: the configured one, else
    `.sqlflow/checkpoints/<model>` (`route__<group>` for a routed group), under the project."""
    configured, default = plan.checkpoint_setting
    return Path(project_dir) / (configured or f"{STATE_DIR}/checkpoints/{default}")


def is_new(checkpoint: Path) -> bool:
    """No micro-batch was ever planned in `checkpoint`: the query starts from scratch."""
    return not (checkpoint / "offsets").is_dir()


def rebuild_command(plan: StreamPlan | RoutedPlan) -> str:
    """The command that rebuilds the plan's tables from a new query (a routed group: every
    member selected, so the group runs as one plan)."""
    return "sqlflow run --mode stream " + " ".join(f"--select {m}" for m in plan.members) + \
        " --full-refresh"


def query_id(checkpoint: Path) -> str:
    """The query id Spark keeps in `<checkpoint>/metadata` (written before the first batch)."""
    return json.loads((checkpoint / "metadata").read_text().splitlines()[0])["id"]


def app_id(model: str, checkpoint: Path) -> Callable[[], str]:
    """`<model>@<query id>`, read when the first micro-batch needs it (after Spark wrote it)."""
    return lambda: f"{model}@{query_id(checkpoint)}"


def refuse_new_checkpoint(spark: SparkSession, plan: StreamPlan | RoutedPlan,
                          checkpoint: Path, tables: Iterable[tuple[str, str]]) -> None:
    """A new checkpoint over an output that has rows would write every row again: refuse it.
    `tables`: (table, the model file that declares it) for each output the query writes."""
    for table, path in tables:
        if spark.catalog.tableExists(table) and spark.table(table).take(1):
            routed = plan.kind == "routed"
            what, who = ("target", "routed group") if routed else ("sink", "model")
            drops = "drops every target" if routed else "drops the table and its quarantine"
            raise SqlflowError(
                f"{who} `{plan.model}`: {what} `{table}` already has rows but its checkpoint "
                f"`{checkpoint}` is new: a new stream query would write every row again",
                location=Location(path),
                hint=f"rebuild it from the stream with `{rebuild_command(plan)}` ({drops}), "
                     "or restore the checkpoint folder")


def start_query(rows: DataFrame, fn: Any, *, name: str, checkpoint: Path,
                trigger: str) -> StreamingQuery:
    """Start `rows.writeStream.foreachBatch(fn)` as query `name` with its checkpoint and
    trigger (`available-now`, or a processing-time interval such as `10 seconds`)."""
    writer = (rows.writeStream.foreachBatch(fn).queryName(name)
              .option("checkpointLocation", str(checkpoint)))
    if trigger == AVAILABLE_NOW:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=trigger)
    return writer.start()


IDLE_POLL_S = 5.0


def wait(running: list[tuple[StreamingQuery, Any]]) -> None:
    """Wait for `running` [(query, batch function)] to end; meanwhile, every `IDLE_POLL_S`
    seconds (or half the shortest idle timeout), let each `incremental` model pad what its
    idle inputs closed (`MicroBatch.idle_check`). Raises the first query's failure, as
    `awaitTermination` does."""
    def idle_us(fn: Any) -> int | None:
        return getattr(fn.plan, "idle_timeout_us", None) if hasattr(fn, "idle_check") else None

    timeouts = [t / 2e6 for _, fn in running if (t := idle_us(fn))]
    poll = max(0.2, min([IDLE_POLL_S, *timeouts]))
    while True:
        for query, _ in running:
            if not query.isActive:
                query.awaitTermination()  # raises the query's failure
        if not any(q.isActive for q, _ in running):
            return
        for query, fn in running:
            if query.isActive and idle_us(fn) is not None:
                fn.idle_check(lambda fn=fn: settled(fn.checkpoint))
        active = [q for q, _ in running if q.isActive]  # one may stop meanwhile
        if active:
            # pyspark takes float seconds (`int(timeout * 1000)`); its annotation says int
            active[0].awaitTermination(poll)  # type: ignore[arg-type]


def committed(checkpoint: Path) -> int:
    """The newest batch id the checkpoint has a commit file for (-1: none)."""
    folder = checkpoint / "commits"
    return max((int(p.name) for p in folder.iterdir() if p.name.isdigit()), default=-1) \
        if folder.is_dir() else -1


def settled(checkpoint: Path | None) -> bool:
    """No micro-batch in flight or waiting for its replay: the checkpoint's last offsets
    file has its commit file."""
    if checkpoint is None:
        return False
    ids = [[int(p.name) for p in (checkpoint / d).iterdir() if p.name.isdigit()]
           if (checkpoint / d).is_dir() else [] for d in ("offsets", "commits")]
    return max(ids[0], default=-1) == max(ids[1], default=-1)
