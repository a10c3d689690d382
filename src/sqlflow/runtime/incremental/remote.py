"""An `incremental` model's micro-batch function as a Spark Connect server runs it
(docs/deploy.md, "Spark Connect").

Over Connect, `foreachBatch` pickles its function (cloudpickle) and the SERVER runs it in a
Python worker of its own, whose session is bound to the client's session id
(pyspark `sql/connect/streaming/worker/foreach_batch_worker.py`). `MicroBatch` cannot go there:
it holds a lock, the client's session and the client's callbacks. `RemoteMicroBatch` carries
plain data only (the compiled plan, its inputs' names and schemas, the state tables, the
checkpoint path) and builds its `MicroBatch` in the worker, at the first batch, on the batch
DataFrame's session. Everything exactly-once lives where it lives locally: the journal and the
older-rows ledger in the checkpoint folder, the rest in Delta tables (docs/design.md §2.9).
So the checkpoint folder must be one path the client and the server both see.

The worker's memory is nobody's: this process reads what the batches did from the streaming
query's progress (`recentProgress`: the batch ids and input rows) and the commit log (rows
written and quarantined per batch), `reports`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.types import StructType

from sqlflow.planning.plan import COMMIT_LOG, SourceBinding, StreamPlan
from sqlflow.runtime.incremental import worker_exit
from sqlflow.runtime.incremental.microbatch import BatchReport, MicroBatch
from sqlflow.runtime.query import app_id


def is_remote(spark: SparkSession) -> bool:
    """A Spark Connect session: no JVM in this process (docs/design.md §3)."""
    return getattr(spark, "_jvm", None) is None


class RemoteBatch:
    """What every picklable `foreachBatch` function over Spark Connect shares: it pickles as
    plain data (its plan, paths), never the function it builds, and builds that function in
    the server's Python worker at the first batch (`build`), then calls it for every batch."""

    _fn: Any = None  # built in the server's worker, never pickled

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_fn": None}

    def build(self, df: DataFrame) -> Any:
        raise NotImplementedError

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        if self._fn is None:
            self._fn = self.build(df)
        self._fn(df, batch_id)


class RemoteMicroBatch(RemoteBatch):
    """The picklable `foreachBatch` function of one model's query over Spark Connect.

    >>> import pickle
    >>> fn = RemoteMicroBatch(None, [], {}, {}, "m", "/tmp/ck")
    >>> pickle.loads(pickle.dumps(fn)).checkpoint
    '/tmp/ck'
    """

    def __init__(self, plan: StreamPlan | None, sides: list[SourceBinding],
                 schemas: dict[str, StructType], state_tables: dict[str, str], model: str,
                 checkpoint: str):
        self.plan, self.sides, self.schemas, self.state_tables = plan, sides, schemas, state_tables
        self.model, self.checkpoint = model, checkpoint

    def build(self, df: DataFrame) -> MicroBatch:
        assert self.plan is not None  # a query's function carries its plan
        checkpoint = Path(self.checkpoint)
        fn = MicroBatch(self.plan, self.sides, self.schemas, self.state_tables,
                        app_id(self.model, checkpoint), checkpoint=checkpoint, spark=df.sparkSession)
        worker_exit.release_at_exit(fn.release)  # the server's cache outlives this worker
        return fn


def logged(spark: SparkSession, app: str, ids: list[int]) -> dict[int, tuple[int, int, int]]:
    """Per batch id of query `app`: rows written, rows quarantined and input rows dropped
    behind the watermark, from the commit log's `write` rows (none: the batch wrote nothing,
    or was a replay Delta skipped)."""
    if not ids or not spark.catalog.tableExists(COMMIT_LOG):
        return {}
    log = (spark.table(COMMIT_LOG)
           .where((F.col("run_id") == app) & (F.col("kind") == "write") & F.col("batch_id").isin(ids))
           .groupBy("batch_id").agg(F.sum("rows").alias("rows"), F.max("quarantined").alias("q"),
                                    F.max("dropped").alias("dropped")))
    return {r["batch_id"]: (r["rows"] or 0, r["q"] or 0, r["dropped"] or 0) for r in log.collect()}


def progress(query: StreamingQuery) -> list[Any]:
    """The query's recent progress, one per batch id (the last 100 batches,
    `spark.sql.streaming.numRecentProgressUpdates`)."""
    return list({p.batchId: p for p in query.recentProgress}.values())


def reports(spark: SparkSession, query: StreamingQuery, plan: StreamPlan,
            sides: list[SourceBinding], app: str) -> list[BatchReport]:
    """What the server's micro-batches did, one report per batch of this run: the batch ids,
    input rows per input (when Spark counted them) and seconds from the query's progress, the
    rows written and quarantined from the commit log (`logged`)."""
    batches = progress(query)
    written = logged(spark, app, [p.batchId for p in batches])
    out = []
    for p in batches:
        rows, quarantined, _ = written.get(p.batchId, (0, 0, 0))
        out.append(BatchReport(plan.model, p.batchId, rows_in(p, sides), rows, quarantined, False,
                               p.durationMs.get("triggerExecution", 0) / 1000))
    return out


def rows_in(p: Any, sides: list[SourceBinding]) -> tuple[tuple[str, int], ...]:
    """Input rows per input of the progress `p`. pyspark 4.2 reports 0 input rows for a batch
    a Connect worker reads (its DataFrame is run by other executions than the query's): then
    none are shown."""
    counts = [s.numInputRows for s in p.sources][:len(sides)]
    if len(counts) < len(sides) or not any(counts):
        return ()
    return tuple((b.relation, n) for b, n in zip(sides, counts, strict=True))
