"""One micro-batch of an `incremental` stream plan (DESIGN 2.9), run inside `foreachBatch`.

The query's rows arrive in one envelope (`__side` = the input's index, `__s<k>` = the row of
input k as a struct, NULL for the others: see `sqlflow.runtime.stream`). For batch id `b`:

1. split each input's new rows by the quarantine rule (origin `batch <b>`) and append the
   quarantine rows to `<model>__quarantine`, idempotent per batch id;
2. register the clean new rows as the input's delta view;
3. for each joined input, register its old view: the state table's rows of batches `< b`,
   pruned to the event-time range the other side's new rows can match;
4. run the plan's SQL and append the result to the sink, idempotent per batch id;
5. append the clean new rows of each joined input to its state table, idempotent per batch id.

Sink before state, and the old view reads batches `< b` only: whichever write a crash
interrupted, a replay of `b` (same rows, Spark replays an uncommitted batch with the same
offsets) skips what was committed and redoes the rest, and never sees its own rows as old.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import reduce
from typing import Callable

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType, TimestampType

from sqlflow.plan import Sink, SourceBinding, StreamPlan
from sqlflow.runtime import quarantine as Q
from sqlflow.runtime import snapshot, state
from sqlflow.runtime.sinks import BatchId, write

SIDE = "__side"


def side_column(k: int) -> str:
    return f"__s{k}"


@dataclass(frozen=True)
class BatchReport:
    """What one micro-batch did: new rows per input, rows appended, rows quarantined."""

    model: str
    batch_id: int
    rows_in: tuple[tuple[str, int], ...]
    rows_out: int
    quarantined: int
    replayed: bool  # the sink already had this batch id (a restart after a crash)
    seconds: float

    def line(self) -> str:
        ins = ", ".join(f"{r} +{n:,}" for r, n in self.rows_in)
        note = " (replay: sink already written)" if self.replayed else ""
        return (f"{self.model} batch {self.batch_id}: in {ins}; out {self.rows_out:,}; "
                f"quarantined {self.quarantined:,}{note} ({self.seconds:.1f}s)")


class MicroBatch:
    """The `foreachBatch` function of one model's query.

    `app_id` names the query in every idempotent write (the sink's `txnAppId`); `after_sink`
    and `after_state` are called with the batch id right after the sink write and after the
    state appends (hooks for progress and crash tests).
    """

    def __init__(self, plan: StreamPlan, sides: list[SourceBinding], schemas: dict[str, StructType],
                 state_tables: dict[str, str], app_id: Callable[[], str],
                 on_batch: Callable[[BatchReport], None] | None = None,
                 after_sink: Callable[[int], None] | None = None,
                 after_state: Callable[[int], None] | None = None):
        self.plan, self.sides, self.schemas = plan, sides, schemas
        self.state_tables, self.app_id = state_tables, app_id
        self.on_batch, self.after_sink, self.after_state = on_batch, after_sink, after_state
        self.reports: list[BatchReport] = []
        self.error: BaseException | None = None

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        try:
            self._run(df, batch_id)
        except BaseException as exc:  # kept: Spark wraps it in a StreamingQueryException
            self.error = exc
            raise

    def _run(self, df: DataFrame, batch_id: int) -> None:
        began = time.monotonic()
        spark, plan = df.sparkSession, self.plan
        df = df.persist()
        try:
            counts = {r[SIDE]: r["count"] for r in df.groupBy(SIDE).count().collect()}
            clean, parts = {}, []
            for k, b in enumerate(self.sides):
                rows = df.where(F.col(SIDE) == k).select(f"{side_column(k)}.*")
                split = Q.split(rows, b, model=plan.model, origin=f"batch {batch_id}")
                clean[b.relation] = split.clean
                split.clean.createOrReplaceTempView(b.view)
                parts.append(split.quarantine)
            app = self.app_id()
            dims = snapshot.begin(spark, plan, BatchId(app, batch_id))  # pinned dimensions (2.3)
            bad = reduce(DataFrame.unionByName, parts)
            quarantined = bad.count()  # over the cached batch: cheaper than an empty commit
            if quarantined:
                q_sink = Sink(plan.quarantine, "append_once", Q.PARTITION_BY)
                write(spark, q_sink, bad, batch=BatchId(f"{app}__quarantine", batch_id))
            for b in self.sides:
                if b.old_view:
                    keep = self._prune(b, clean) if len(self.state_tables) == 2 else None
                    old = state.older(spark, self.state_tables[b.relation],
                                      self.schemas[b.relation], batch_id, keep)
                    old.createOrReplaceTempView(b.old_view)
            out = write(spark, plan.sink, spark.sql(plan.sql), batch=BatchId(app, batch_id))
            snapshot.end(spark, plan, out, dims)  # commit log rows, provisional flags (2.3, 2.5)
            if self.after_sink:
                self.after_sink(batch_id)
            for k, b in enumerate(self.sides):
                if b.relation in self.state_tables and counts.get(k):
                    state.append(spark, self.state_tables[b.relation], clean[b.relation], batch_id)
            if self.after_state:
                self.after_state(batch_id)
        finally:
            df.unpersist()
            for b in self.sides:
                for view in (b.view, b.old_view):
                    if view:
                        spark.catalog.dropTempView(view)
        report = BatchReport(
            plan.model, batch_id, tuple((b.relation, counts.get(k, 0)) for k, b in enumerate(self.sides)),
            out.rows, quarantined, out.skipped, time.monotonic() - began)
        self.reports.append(report)
        if self.on_batch:
            self.on_batch(report)

    def _prune(self, b: SourceBinding, clean: dict[str, DataFrame]) -> Column | None:
        """Old rows of `b` that the other side's new rows can match: the OR of its prune
        ranges (only used for a model with one join of two streams; with more, a range
        against one side would hide old rows another side's new rows need)."""
        if not b.prune:
            return None
        keep = F.lit(False)
        for r in b.prune:
            other = clean[r.other]
            t = _micros(other, r.other_column)
            low, high = other.agg(F.min(t), F.max(t)).collect()[0]
            if low is None:
                continue  # no new rows on the other side: nothing to match
            column = _as_timestamp(self.schemas[b.relation], r.column)
            keep = keep | column.between(F.timestamp_micros(F.lit(low + r.lower_us)),
                                         F.timestamp_micros(F.lit(high + r.upper_us)))
        return keep


def _micros(df: DataFrame, name: str) -> Column:
    return F.unix_micros(_as_timestamp(df.schema, name))


def _as_timestamp(schema: StructType, name: str) -> Column:
    field = next(f for f in schema.fields if f.name.lower() == name.lower())
    column = F.col(f"`{field.name}`")
    return column if isinstance(field.dataType, TimestampType) else column.cast("timestamp")
