"""The `incremental` stream runtime (DESIGN 2.9): one Structured Streaming query per model.

Every stream input is read with `spark.readStream.format("delta").table(...)` and projected
into one envelope (`__side` = the input's index, `__s<k>` = the row of input k as a struct,
NULL for the others); the inputs are `unionByName`-ed into ONE query with ONE checkpoint
(`plan.sink.checkpoint`, under the project folder). `foreachBatch` runs
`sqlflow.runtime.microbatch.MicroBatch`, which splits the envelope back into per-input rows.

Idempotent writes name the query by `<model>@<query id>`: Spark keeps the query id in the
checkpoint, so a restart continues the same id (its replayed batch ids are skipped where
already written), while a new checkpoint is a new query whose batch ids start again at 0
(and whose state tables start empty).

Triggers: `available-now` processes everything there is, then flushes (an outer join's
pending rows are emitted padded: `MicroBatch.flush`, recorded so a restart pads nothing
twice) and stops; an interval (`10 seconds`) runs until stopped, and the run loop wakes up
every `IDLE_POLL_S` seconds (at most) to emit the padded rows an idle input's `idle_timeout`
closes (`MicroBatch.idle_check`): Spark calls `foreachBatch` only when new rows arrive.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass
from functools import reduce
from pathlib import Path
from typing import Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sqlflow.errors import Location, SqlflowError
from sqlflow.plan import COMMIT_LOG, RoutedPlan, StreamPlan
from sqlflow.runtime import older, once, padding, sink_truth, state
from sqlflow.runtime.batchfn import query_failed
from sqlflow.runtime.microbatch import SIDE, BatchReport, MicroBatch, side_column
from sqlflow.runtime.refresh import checkpoint_dir, rebuild_command
from sqlflow.runtime.refresh import full_refresh as full_refresh_plan

AVAILABLE_NOW = "available-now"
IDLE_POLL_S = 5.0


@dataclass(frozen=True)
class StreamResult:
    """What one model's bounded stream run did, batch by batch."""

    model: str
    batches: tuple[BatchReport, ...]
    seconds: float

    @property
    def rows_out(self) -> int:
        return sum(b.rows_out for b in self.batches)

    @property
    def quarantined(self) -> int:
        return sum(b.quarantined for b in self.batches)

    @property
    def padded(self) -> int:
        return sum(b.padded for b in self.batches)

    @property
    def dirty(self) -> tuple[tuple[str, str], ...]:
        """(partition, reason) of every partition a micro-batch found dirty (DESIGN 2.7)."""
        return tuple(d for b in self.batches for d in b.dirty)


def check_plan(spark: SparkSession, plan: StreamPlan) -> None:
    """Refuse what this runtime cannot run yet, before a query starts."""
    where = Location(plan.path)
    if plan.strategy == "stateful":
        from sqlflow.runtime import stateful
        return stateful.check(spark, plan)
    if plan.strategy != "incremental":
        raise SqlflowError(f"model `{plan.model}`: stream_strategy `{plan.strategy}` has no runtime yet",
                           location=where, hint="use the default stream_strategy `incremental`")
    for b in plan.sources:
        if not spark.catalog.tableExists(b.relation):
            raise SqlflowError(f"model `{plan.model}`: input table `{b.relation}` does not exist",
                               location=where, hint="create or load the input first")
    if not any(b.read == "stream" for b in plan.sources):
        raise SqlflowError(f"model `{plan.model}` has no stream input", location=where)


def start(ctx, plan: StreamPlan, *, trigger: str = AVAILABLE_NOW,
          on_batch: Callable[[BatchReport], None] | None = None,
          after_sink: Callable[[int], None] | None = None,
          after_state: Callable[[int], None] | None = None):
    """Start the model's query; returns `(query, microbatch)`."""
    if isinstance(plan, RoutedPlan):  # fan-out fusion: one query for a routed group
        from sqlflow.runtime.routing import start as start_routed
        return start_routed(ctx, plan, trigger=trigger, on_batch=on_batch)
    if plan.strategy == "stateful":
        from sqlflow.runtime import stateful
        return stateful.start(ctx, plan, trigger=trigger, on_batch=on_batch, after_sink=after_sink)
    spark = ctx.spark
    check_plan(spark, plan)
    sides = [b for b in plan.sources if b.read == "stream"]
    schemas = {b.relation: spark.table(b.relation).schema for b in sides}
    tables = {b.relation: state.state_table(plan.sink.table, plan.model, b.relation)
              for b in sides if b.old_view}
    checkpoint = checkpoint_dir(ctx.project_dir, plan)
    if not (checkpoint / "offsets").is_dir():  # a new query: older rows of another query are stale
        state.refuse_rewrite(spark, plan, checkpoint)
        for table in (*tables.values(), padding.progress_table(plan.sink.table, plan.model)):
            state.drop(spark, table)
        for folder in (older.FOLDER, once.FOLDER):
            shutil.rmtree(checkpoint / folder, ignore_errors=True)
        fresh = True
    else:
        fresh = False
        # the tables, not the journal, say which batches are written (docs/semantics.md)
        sink_truth.reconcile(spark, checkpoint, [plan.sink.table, plan.quarantine, COMMIT_LOG,
                                                 *tables.values()],
                             (f"{plan.model}@{_query_id(checkpoint)}", *tables.values()),
                             what=f"model `{plan.model}`", path=plan.path, rebuild=rebuild_command(plan))
    frames = []
    for k, b in enumerate(sides):
        reader = spark.readStream.format("delta")
        if b.max_files_per_trigger:
            reader = reader.option("maxFilesPerTrigger", b.max_files_per_trigger)
        rows = reader.table(b.relation)
        frames.append(rows.select(F.lit(k).alias(SIDE), *[
            F.struct(*[rows[f"`{c}`"] for c in rows.columns]).alias(side_column(j)) if j == k
            else F.lit(None).cast(schemas[o.relation]).alias(side_column(j))
            for j, o in enumerate(sides)]))
    envelope: DataFrame = reduce(DataFrame.unionByName, frames)
    fn = MicroBatch(plan, sides, schemas, tables, lambda: f"{plan.model}@{_query_id(checkpoint)}",
                    on_batch=on_batch, after_sink=after_sink, after_state=after_state,
                    checkpoint=checkpoint, spark=spark)
    if not fresh:
        fn.redo()  # a flush/idle step a crash interrupted
    writer = (envelope.writeStream.foreachBatch(fn).queryName(f"sqlflow_{plan.model}")
              .option("checkpointLocation", str(checkpoint)))
    if trigger == AVAILABLE_NOW:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=trigger)
    return writer.start(), fn


def run_stream(ctx, plan: StreamPlan, *, trigger: str = AVAILABLE_NOW,
               on_batch: Callable[[BatchReport], None] | None = None,
               after_sink: Callable[[int], None] | None = None,
               after_state: Callable[[int], None] | None = None) -> StreamResult:
    """Run one model's query until it stops (available-now: when every input row is processed;
    an interval trigger: until interrupted). A failure inside a micro-batch is re-raised as
    it was raised (a SqlflowError stays one); the checkpoint lets the next run resume.
    A bounded run ends with the flush of an outer join's pending rows (`MicroBatch.flush`)."""
    if plan.strategy == "stateful":
        from sqlflow.runtime.stateful import run_stateful
        return run_stateful(ctx, plan, trigger=trigger, on_batch=on_batch, after_sink=after_sink)
    began = time.monotonic()
    query, fn = start(ctx, plan, trigger=trigger, on_batch=on_batch, after_sink=after_sink,
                      after_state=after_state)
    try:
        _wait([(query, fn)])
        if trigger == AVAILABLE_NOW and query.exception() is None:
            fn.flush()
    except KeyboardInterrupt:
        query.stop()
    except Exception as exc:
        raise query_failed(f"model `{plan.model}`", plan.path, fn.error, exc,
                           rebuild=rebuild_command(plan)) from exc
    return StreamResult(plan.model, tuple(fn.reports), time.monotonic() - began)


def _wait(running) -> None:
    """Wait for `running` [(query, MicroBatch)] to end; meanwhile, every `IDLE_POLL_S`
    seconds (or half the shortest idle timeout), let each model pad what its idle inputs
    closed. Raises the first query's failure, as `awaitTermination` does."""
    timeouts = [fn.plan.idle_timeout_us / 2e6 for _, fn in running if fn.plan.idle_timeout_us]
    poll = max(0.2, min([IDLE_POLL_S, *timeouts]))
    while True:
        for query, _ in running:
            if not query.isActive:
                query.awaitTermination()  # raises the query's failure
        if not any(q.isActive for q, _ in running):
            return
        for query, fn in running:
            if query.isActive and fn.plan.idle_timeout_us is not None:
                fn.idle_check(lambda fn=fn: _settled(fn.checkpoint))
        active = [q for q, _ in running if q.isActive]  # one may stop meanwhile
        if active:
            active[0].awaitTermination(poll)


def _settled(checkpoint: Path | None) -> bool:
    """No micro-batch in flight or waiting for its replay: the checkpoint's last offsets
    file has its commit file."""
    if checkpoint is None:
        return False
    ids = [[int(p.name) for p in (checkpoint / d).iterdir() if p.name.isdigit()]
           if (checkpoint / d).is_dir() else [] for d in ("offsets", "commits")]
    return max(ids[0], default=-1) == max(ids[1], default=-1)


def _query_id(checkpoint: Path) -> str:
    """The query id Spark keeps in `<checkpoint>/metadata` (written before the first batch)."""
    return json.loads((checkpoint / "metadata").read_text().splitlines()[0])["id"]


# --- many models: `sqlflow run --mode stream` -----------------------------------------------------

def run_streams(ctx, plans, *, trigger: str | None, print_line: Callable[[str], None],
                print_table: Callable[[object], None], full_refresh: bool = False) -> None:
    """Run `plans` (compile order). `available-now`: one model after the other, each until
    its inputs are processed. An interval (or None: each model's configured trigger): models
    without a stream plan run their batch plan once, then every stream query runs at once
    until one fails or the user interrupts (Ctrl-C stops them all; the checkpoints resume).
    `full_refresh`: first remove every stream plan's tables and checkpoint (`refresh`)."""
    from sqlflow.runtime.batch import run_batch
    from sqlflow.runtime.summary import progress_line

    rows: list[tuple[str, str, int, int, int, float, int]] = []
    if full_refresh:
        for plan in plans:
            if isinstance(plan, (StreamPlan, RoutedPlan)):
                gone = full_refresh_plan(ctx.spark, ctx.project_dir, plan)
                print_line(f"{plan.model}: full refresh, removed " + (", ".join(gone) or "nothing"))

    def report(r: BatchReport) -> None:
        print_line(r.line())

    def batch(plan) -> None:
        r = run_batch(ctx, plan)
        print_line(progress_line(r))
        rows.append((r.model, "batch", 0, r.sink.rows, sum(q.rows for q in r.quarantined), r.seconds, 0))

    def add(model: str, reports, seconds: float) -> None:
        rows.append((model, "stream", sum(b.kind == "batch" for b in reports),
                     sum(b.rows_out for b in reports), sum(b.quarantined for b in reports), seconds,
                     len({p for b in reports for p, _ in b.dirty})))

    try:
        if trigger == AVAILABLE_NOW:
            for plan in plans:
                if isinstance(plan, RoutedPlan):
                    from sqlflow.runtime.routing import run_routed_stream
                    began = time.monotonic()
                    add(plan.model, run_routed_stream(ctx, plan, on_batch=report), time.monotonic() - began)
                elif isinstance(plan, StreamPlan):
                    res = run_stream(ctx, plan, trigger=AVAILABLE_NOW, on_batch=report)
                    add(plan.model, res.batches, res.seconds)
                else:
                    batch(plan)
            return
        for plan in plans:
            if not isinstance(plan, (StreamPlan, RoutedPlan)):
                batch(plan)
        _run_together(ctx, [p for p in plans if isinstance(p, (StreamPlan, RoutedPlan))], trigger,
                      report, add)
    finally:
        if rows:  # a run refused before any model ran has nothing to sum up
            print_table(summary_table(rows, trigger))


def _run_together(ctx, plans: list[StreamPlan], trigger: str | None, report, add) -> None:
    began = time.monotonic()
    started = []
    try:
        for plan in plans:
            started.append((plan, *start(ctx, plan, trigger=trigger or plan.trigger, on_batch=report)))
        _wait([(q, f) for _, q, f in started])
        for plan, _, fn in started:  # a model configured `available-now` ends with its flush
            if (trigger or plan.trigger) == AVAILABLE_NOW:
                fn.flush()
    except KeyboardInterrupt:
        pass
    except Exception as exc:
        plan, _, fn = next(((p, q, f) for p, q, f in started if f.error), (plans[0], None, None))
        raise query_failed(f"model `{plan.model}`", plan.path, fn.error if fn else None, exc,
                           rebuild=rebuild_command(plan)) from exc
    finally:
        for _, query, _ in started:
            query.stop()
        for plan, _, fn in started:
            add(plan.model, fn.reports, time.monotonic() - began)


def summary_table(rows, trigger: str | None):
    """One row per model: kind, micro-batches, rows written, rows quarantined, seconds, and
    the output partitions found dirty (DESIGN 2.7: `sqlflow repair` rewrites them)."""
    from rich import box
    from rich.table import Table

    table = Table(title=f"Stream run ({trigger or 'configured triggers'})", title_justify="left",
                  box=box.SIMPLE_HEAD)
    for name, justify in (("model", "left"), ("plan", "left"), ("batches", "right"),
                          ("rows", "right"), ("quarantined", "right"), ("seconds", "right"),
                          ("dirty", "right")):
        table.add_column(name, justify=justify, no_wrap=name == "model")
    for model, kind, batches, out, quarantined, seconds, dirty in rows:
        table.add_row(model, kind, str(batches) if kind == "stream" else "-", f"{out:,}",
                      f"{quarantined:,}", f"{seconds:.1f}", f"[bold red]{dirty}[/]" if dirty else "0")
    return table
