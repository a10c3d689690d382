"""The `stateful` stream runtime (docs/design.md §2.6, §2.7, §2.9): Spark's own stream-stream operators.

One Structured Streaming query per model, one checkpoint (`plan.sink.checkpoint`). Each stream
input is read with `readStream.format("delta")`, split by the quarantine rule
(`sqlflow.runtime.quarantine.split`, the rule every mode uses), and its clean rows get Spark's
watermark (`allowed_lateness + skew_margin`, from the plan) and become the streaming view the
plan's SQL reads. The model SQL runs unchanged, so an
interval join is Spark's stream-stream join with watermarks on both sides.

The query's output is one envelope, `unionByName` of three kinds of rows (`__kind`; the
heartbeat stream adds none):
`out` (a model output row in `__o`), `quarantine` (a quarantine row in `__q`) and `input`
(the event time `__t`, in µs, of every clean input row, `__side` = the input's index).
`foreachBatch` (`StatefulBatch`) splits it and, for batch id `b`:

1. appends the quarantine rows (origin `batch <b>`) and the output rows, each idempotent per
   batch id through the query's exactly-once journal (`sqlflow.runtime.delta.once`, as the
   `incremental` runtime; a checkpoint from before the journal keeps Delta's `txn` for the
   batch ids it may have attempted);
2. counts the input rows behind the watermark Spark drops in this batch (event time at or before
   the watermark of batch `b - 1`, the one Spark's join filters late rows with; the test
   compares this count with Spark's `numRowsDroppedByWatermark`), and when there are any, marks
   a sound superset of the output partitions they affect dirty (`dirty_partitions`);
3. appends one `write` entry per written partition and the `dirty` entries to the commit log,
   in one append, idempotent per batch id.

Heartbeats (docs/design.md §2.6). Spark never moves a watermark at the end of bounded input, and an idle
input would hold the global watermark back under Spark's default (minimum) policy. The query
runs with `multipleWatermarkPolicy = max` (the watermark follows the most advanced input; a row
more than `allowed_lateness + skew_margin` behind it is dropped, detected and marked dirty) and
reads one more stream: the model's heartbeat table `<sink schema>.__sqlflow_heartbeat__<model>`
(`reason`, `event_time`, `written_at`), under its own watermark, then filtered out by a
predicate on its event-time column. Spark pushes filters that do not read the event-time
column below a watermark (we saw a heartbeat unioned into an input dropped by the model's WHERE
and by the IS NOT NULL Spark infers for join keys, non-deterministic barrier or not), but not
this one: a heartbeat moves event time and never reaches the model's SQL, a join, or a sink;
it is never emitted, not even on the preserved side of an outer join.

- End of input: a bounded run (`available-now`) processes every committed row, then writes a
  heartbeat at `newest clean event time + flush_margin (+1 s)` and runs again;
  Spark runs a no-data micro-batch once the watermark moved, evicting every join state row and
  emitting every padded row. A later row older than that watermark is dropped by Spark (and its
  partitions marked dirty): a bounded run is an end of input.
- Idle inputs (interval triggers, `idle_timeout`): when no input brought rows for the
  timeout, `IdleWatch` writes the same heartbeat, closing everything as if the watermark had
  passed, so padded rows do not wait for the next row forever. The heartbeat is an append to
  an input of the query, never a write of what the batches write, so the watch runs beside
  the batches without a lock; over Spark Connect, where the server's Python worker runs the
  batches, it reads when the inputs last brought rows from the query's offset log
  (`runtime.input_activity`) instead of the batch function's memory (docs/deploy.md).
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import TimestampType

from sqlflow.engine.context import Context
from sqlflow.errors import Location, SqlflowError
from sqlflow.identifiers import quote as quote_ident
from sqlflow.identifiers import quote_table as quote
from sqlflow.planning.plan import COMMIT_LOG, Sink, SourceBinding, StreamPlan
from sqlflow.runtime import offsets
from sqlflow.runtime import quarantine as Q
from sqlflow.runtime.analysis_errors import model_errors
from sqlflow.runtime.batchfn import BatchFunction, query_failed
from sqlflow.runtime.delta import commitlog, once, sink_truth
from sqlflow.runtime.delta.sinks import BatchId, PartitionWrite, WriteResult, write
from sqlflow.runtime.env_errors import written_paths
from sqlflow.runtime.incremental import remote
from sqlflow.runtime.incremental.microbatch import SIDE, BatchReport
from sqlflow.runtime.input_activity import InputActivity, table_ids
from sqlflow.runtime.ownership import quarantine_sink
from sqlflow.runtime.query import (
    AVAILABLE_NOW,
    app_id,
    checkpoint_dir,
    is_new,
    query_id,
    rebuild_command,
    refuse_new_checkpoint,
    start_query,
)
from sqlflow.runtime.results import StreamResult

KIND, OUT, QROW, TIME = "__kind", "__o", "__q", "__t"
POLICY = "spark.sql.streaming.multipleWatermarkPolicy"
HEARTBEAT_SCHEMA = "reason STRING, event_time TIMESTAMP, written_at TIMESTAMP"
FLUSH_SLACK_US = 1_000_000  # Spark keeps watermarks in ms; a second more covers every rounding
DIRTY_REASON = "dropped_by_watermark"


@dataclass(frozen=True)
class StatefulReport(BatchReport):
    """A micro-batch of the stateful runtime: also the input rows Spark dropped behind its
    watermark (`dropped`, our count; `spark_dropped`, Spark's `numRowsDroppedByWatermark`
    when the run could read it) and the partitions marked dirty for them."""

    dropped: int = 0
    spark_dropped: int | None = None

    def line(self) -> str:  # the base line names the dirty partitions (`DIRTY dt=...: reason`)
        text = super().line()
        if self.dropped:
            text += f"; {self.dropped:,} input rows behind the watermark dropped by Spark"
        return text


def heartbeat_table(sink_table: str, model: str) -> str:
    """`dw.__sqlflow_heartbeat__samples`: next to the sink, one per model."""
    schema = sink_table.rsplit(".", 1)[0] + "." if "." in sink_table else ""
    return f"{schema}__sqlflow_heartbeat__{model}"


def check(spark: SparkSession, plan: StreamPlan) -> None:
    """Refuse what this runtime cannot run, before a query starts."""
    where = Location(plan.path)
    sides = [b for b in plan.sources if b.read == "stream"]
    if not sides:
        raise SqlflowError(f"model `{plan.model}` has no stream input", location=where)
    for b in plan.sources:
        if not spark.catalog.tableExists(b.relation):
            raise SqlflowError(f"model `{plan.model}`: input table `{b.relation}` does not exist",
                               location=where, hint="create or load the input first")
    for b in sides:
        field = next((f for f in spark.table(b.relation).schema.fields
                      if b.watermark and f.name.lower() == b.watermark.column.lower()), None)
        if field is None or not isinstance(field.dataType, TimestampType):
            raise SqlflowError(
                f"model `{plan.model}`: stream_strategy `stateful` needs a TIMESTAMP event-time "
                f"column on input `{b.relation}` for Spark's watermark"
                + (f"; `{field.name}` is {field.dataType.simpleString()}" if field else ""),
                location=where,
                hint="declare a TIMESTAMP `event_time` for the input, or use the default "
                     "stream_strategy `incremental`")


# --- the query -------------------------------------------------------------------------------------

def start(ctx: Context, plan: StreamPlan, *, trigger: str = AVAILABLE_NOW,
          on_batch: Callable[[BatchReport], None] | None = None,
          after_sink: Callable[[int], None] | None = None, **_ignored):
    """Start the model's query; returns `(query, batch function)` like `stream.start`.
    `after_state` (an incremental-runtime hook) has no meaning here and is ignored."""
    spark = ctx.spark
    check(spark, plan)
    sides = [b for b in plan.sources if b.read == "stream"]
    checkpoint = checkpoint_dir(ctx.project_dir, plan)
    beats = heartbeat_table(plan.sink.table, plan.model)
    if is_new(checkpoint):
        refuse_new_checkpoint(spark, plan, checkpoint, plan.outputs)
        spark.sql(f"DROP TABLE IF EXISTS {quote(beats)}")  # a new query: old heartbeats are stale
        shutil.rmtree(checkpoint / once.FOLDER, ignore_errors=True)  # and so is its journal
    else:  # the tables, not the journal, say which batches are written (docs/semantics.md)
        sink_truth.reconcile(spark, checkpoint, [plan.sink.table, plan.quarantine, COMMIT_LOG],
                             (f"{plan.model}@{query_id(checkpoint)}",), what=f"model `{plan.model}`",
                             path=plan.path, rebuild=rebuild_command(plan))
    if not spark.catalog.tableExists(beats):
        write(spark, Sink(beats, "append_once", owner=plan.model, role="state"),
              spark.createDataFrame([], HEARTBEAT_SCHEMA),
              batch=BatchId(beats, 0))
    branches: list[DataFrame] = []
    try:
        for k, b in enumerate(sides):
            reader = spark.readStream.format("delta")
            if b.max_files_per_trigger:
                reader = reader.option("maxFilesPerTrigger", b.max_files_per_trigger)
            split = Q.split(reader.table(b.relation), b, model=plan.model, origin="stream")
            assert b.watermark is not None and b.view is not None
            split.clean.withWatermark(_column(split.clean, b.watermark.column),
                                      b.watermark.delay).createOrReplaceTempView(b.view)
            event = Q.event_times(split.clean, b, model=plan.model).event
            branches.append(split.clean.select(F.lit("input").alias(KIND), F.lit(k).alias(SIDE),
                                               F.unix_micros(event).alias(TIME)))
            branches.append(split.quarantine.select(
                F.lit("quarantine").alias(KIND), F.lit(k).alias(SIDE),
                F.struct(*[F.col(quote_ident(c)) for c in split.quarantine.columns]).alias(QROW)))
        with model_errors(plan):  # Spark's analysis error at the model's line
            model = spark.sql(plan.sql)
        out = model.select(F.lit("out").alias(KIND),
                           F.struct(*[model[quote_ident(c)] for c in model.columns]).alias(OUT))
        envelope = out.unionByName(heartbeat_branch(spark, beats), allowMissingColumns=True)
        for branch in branches:
            envelope = envelope.unionByName(branch, allowMissingColumns=True)
        fn = StatefulBatch(plan, sides, checkpoint, app_id(plan.model, checkpoint),
                           on_batch=on_batch, after_sink=after_sink)
        # over Spark Connect the server runs the batches with a picklable function (see
        # `RemoteStatefulBatch`), and resolves the model's SQL when the query starts: the
        # views are dropped after it (docs/deploy.md, "Spark Connect")
        batches = (RemoteStatefulBatch(plan, sides, str(checkpoint.resolve()))
                   if remote.is_remote(spark) else fn)
        watched = trigger != AVAILABLE_NOW and bool(plan.idle_timeout_us)
        # over Connect the idle watch reads the offset log from before the first batch on
        activity = (InputActivity(checkpoint, table_ids(spark, [b.relation for b in sides]))
                    if watched and remote.is_remote(spark) else None)
        before = spark.conf.get(POLICY, None)
        spark.conf.set(POLICY, "max")  # captured by the query at start (and kept in its checkpoint)
        try:
            query = start_query(envelope, batches, name=f"sqlflow_{plan.model}",
                                checkpoint=checkpoint, trigger=trigger)
        finally:
            if before is None:
                spark.conf.unset(POLICY)
            else:
                spark.conf.set(POLICY, before)
    finally:
        for b in sides:
            spark.catalog.dropTempView(b.view)
    if watched:
        IdleWatch(ctx.spark, plan, fn, query, activity).start()
    return query, fn


def heartbeat_branch(spark: SparkSession, table: str) -> DataFrame:
    """The heartbeat stream: its own watermark (no delay) over the heartbeat rows' event time,
    then no rows at all. The filter reads the event-time column, so Spark cannot push it below
    the watermark, and a heartbeat moves event time without reaching any output."""
    beats = spark.readStream.format("delta").table(table).withWatermark("event_time", "0 seconds")
    return beats.where(F.col("event_time").isNull()).select(F.lit("heartbeat").alias(KIND))


def _column(df: DataFrame, name: str) -> str:
    return next(f.name for f in df.schema.fields if f.name.lower() == name.lower())


# --- one micro-batch ----------------------------------------------------------------------------------

class StatefulBatch(BatchFunction):
    """The `foreachBatch` function of one stateful query (see the module docstring).

    Also keeps, per input, when it last brought rows and its newest event time: the idle
    watch reads them.
    """

    def __init__(self, plan: StreamPlan, sides: list[SourceBinding], checkpoint: Path,
                 app_id: Callable[[], str], on_batch: Callable[[BatchReport], None] | None = None,
                 after_sink: Callable[[int], None] | None = None):
        self.plan, self.sides, self.checkpoint, self.app_id = plan, sides, checkpoint, app_id
        self.on_batch, self.after_sink = on_batch, after_sink
        self.reports: list[StatefulReport] = []
        now = time.monotonic()
        self.last_rows_at = [now] * len(sides)
        self.newest_us: list[int | None] = [None] * len(sides)
        # exactly-once appends: the query's journal, opened before the query plans a batch
        self.journal = once.Journal.open(checkpoint, offsets.next_batch(checkpoint))

    def _id(self, app: str, batch_id: int) -> BatchId:
        """The identity of an exactly-once append of `batch_id`, with the query's journal when
        it decides that batch (an older checkpoint's earlier batch ids: Delta's `txn`)."""
        return BatchId(app, batch_id, self.journal if self.journal.decides(batch_id) else None)

    def _run(self, df: DataFrame, batch_id: int) -> None:
        began = time.monotonic()
        spark, plan = df.sparkSession, self.plan
        late_us = batch_watermark_ms(self.checkpoint, batch_id - 1) * 1000
        df = df.persist()
        try:
            stats = (df.where(F.col(KIND) == "input").groupBy(SIDE)
                     .agg(F.count("*").alias("n"), F.max(TIME).alias("newest"),
                          F.count_if(F.col(TIME) <= F.lit(late_us)).alias("late")).collect())
            counts = {r[SIDE]: r["n"] for r in stats}
            dropped = sum(r["late"] for r in stats)
            for r in stats:
                self.last_rows_at[r[SIDE]] = time.monotonic()
                self.newest_us[r[SIDE]] = max(self.newest_us[r[SIDE]] or r["newest"], r["newest"])
            app = self.app_id()
            bad = (df.where(F.col(KIND) == "quarantine").select(f"{QROW}.*")
                   .withColumn("origin", F.lit(f"batch {batch_id}")))
            reasons = {r["reason"]: r["count"] for r in bad.groupBy("reason").count().collect()}
            quarantined = sum(reasons.values())
            if quarantined:
                write(spark, quarantine_sink(plan, "append_once", Q.PARTITION_BY), bad,
                      batch=self._id(f"{app}__quarantine", batch_id))
            rows = df.where(F.col(KIND) == "out").select(f"{OUT}.*")
            out = write(spark, plan.sink, rows, batch=self._id(app, batch_id))
            if self.after_sink:
                self.after_sink(batch_id)
            dirty: tuple[str, ...] = ()
            if dropped:
                late = df.where((F.col(KIND) == "input") & (F.col(TIME) <= F.lit(late_us)))
                dirty = dirty_partitions(spark, plan, self.sides, late.select(SIDE, TIME))
            written = out if not out.skipped else _from_rows(plan.sink, rows)
            entries = [] if written.rows == 0 else commitlog.write_entries(
                written, mode="stream", model=plan.model, run_id=app, batch_id=batch_id,
                quarantined=quarantined, dropped=dropped)
            entries += [commitlog.Entry(plan.sink.table, spec, "dirty", "stream", plan.model,
                                        run_id=app, batch_id=batch_id, dropped=dropped,
                                        reason=DIRTY_REASON) for spec in dirty]
            commitlog.append(spark, entries, batch=self._id(app, batch_id))
        finally:
            df.unpersist()
        report = StatefulReport(
            plan.model, batch_id, tuple((b.relation, counts.get(k, 0)) for k, b in enumerate(self.sides)),
            out.rows, quarantined, out.skipped, time.monotonic() - began, dropped=dropped,
            dirty=tuple((spec, DIRTY_REASON) for spec in dirty),
            reasons=tuple(sorted((k, n) for k, n in reasons.items() if n)))
        self.reports.append(report)
        if self.on_batch:
            self.on_batch(report)


class RemoteStatefulBatch(remote.RemoteBatch):
    """The picklable `foreachBatch` function of a stateful query over Spark Connect: plain data
    only, it builds its `StatefulBatch` in the server's Python worker at the first batch (as
    `sqlflow.runtime.incremental.remote.RemoteMicroBatch` does for the incremental runtime).

    >>> import pickle
    >>> pickle.loads(pickle.dumps(RemoteStatefulBatch(None, [], "/tmp/ck"))).checkpoint
    '/tmp/ck'
    """

    def __init__(self, plan: StreamPlan | None, sides: list[SourceBinding], checkpoint: str):
        self.plan, self.sides, self.checkpoint = plan, sides, checkpoint

    def build(self, df: DataFrame) -> StatefulBatch:
        assert self.plan is not None  # a query's function carries its plan
        checkpoint = Path(self.checkpoint)
        return StatefulBatch(self.plan, self.sides, checkpoint, app_id(self.plan.model, checkpoint))


def batch_watermark_ms(checkpoint: Path, batch_id: int) -> int:
    """The event-time watermark (ms) batch `batch_id` ran with, from Spark's offset log
    (`offsets/<id>`, second line: `batchWatermarkMs`); 0 before the first batch."""
    path = checkpoint / "offsets" / str(batch_id)
    if batch_id < 0 or not path.exists():
        return 0
    return int(json.loads(path.read_text().splitlines()[1]).get("batchWatermarkMs", 0))


def next_watermark_ms(checkpoint: Path) -> int:
    """The watermark the next batch will run with: Spark's commit log keeps it per batch
    (`commits/<id>`: `nextBatchWatermarkMs`); 0 before any batch."""
    folder = checkpoint / "commits"
    done = sorted((int(p.name) for p in folder.iterdir() if p.name.isdigit()), reverse=True) \
        if folder.is_dir() else []
    if not done:
        return 0
    return int(json.loads((folder / str(done[0])).read_text().splitlines()[1]).get("nextBatchWatermarkMs", 0))


def _from_rows(sink: Sink, rows: DataFrame) -> WriteResult:
    """What a replayed batch had written (the sink skipped it): partitions and rows counted
    from the batch's own rows, so the commit log gets the same entries on a replay."""
    keys = [F.col(quote_ident(c)).cast("string").alias(c) for c in sink.partition_by]
    found: Sequence[Row | dict[str, Any]] = ([{"count": rows.count()}] if not keys
                                             else rows.groupBy(*keys).count().collect())
    parts = tuple(PartitionWrite(tuple((c, r[c]) for c in sink.partition_by), r["count"], 0)
                  for r in found) if keys else ()
    return WriteResult(sink.table, sink.write, rows=sum(r["count"] for r in found), partitions=parts,
                       skipped=True)


def dirty_partitions(spark: SparkSession, plan: StreamPlan, sides: list[SourceBinding],
                     late: DataFrame) -> tuple[str, ...]:
    """A sound superset of the output partitions that input rows Spark dropped can change.

    Spark reports how many rows it dropped, not which. We know their event times (`late`:
    `__side`, `__t`). An output row that involves a dropped row only involves input rows within
    `flush_margin` (the sum of the join bounds) of its event time. So the model SQL is run,
    as a batch, over every input's clean rows in `[min(t) - margin, max(t) + margin]`: once
    with them (the partitions of the rows the stream missed) and once without the rows at those
    exact times (the partitions of padded rows the stream emitted instead of a match). The
    union of the partitions of both results is returned (`dt=2026-11-01/...`; `""` for an
    unpartitioned sink). Extra rows near the range's edges only add partitions.
    """
    low, high = late.agg(F.min(TIME), F.max(TIME)).collect()[0]
    if low is None:
        return ()
    low, high = low - plan.flush_margin_us, high + plan.flush_margin_us
    keys = [F.col(quote_ident(c)).cast("string").alias(c) for c in plan.sink.partition_by]
    specs: set[str] = set()
    try:
        for without in (False, True):
            for k, b in enumerate(sides):
                rows = Q.split(spark.table(b.relation), b, model=plan.model, origin="dirty").clean
                t = F.unix_micros(Q.event_times(rows, b, model=plan.model).event)
                rows = rows.withColumn(TIME, t).where(F.col(TIME).between(low, high))
                if without:
                    times = late.where(F.col(SIDE) == k).select(TIME).distinct()
                    rows = rows.join(times, TIME, "left_anti")
                assert b.view is not None  # a stream side is read through its view
                rows.drop(TIME).createOrReplaceTempView(b.view)
            out = spark.sql(plan.sql)
            if not keys:
                if out.take(1):
                    specs.add("")
                continue
            for r in out.select(*keys).distinct().collect():
                specs.add(commitlog.partition_spec({c: r[c] for c in plan.sink.partition_by}))
    finally:
        for b in sides:
            assert b.view is not None  # a stream side is read through its view
            spark.catalog.dropTempView(b.view)
    return tuple(sorted(specs))


# --- end of input and idle inputs -------------------------------------------------------------------

def write_heartbeat(spark: SparkSession, plan: StreamPlan, event_us: int, reason: str) -> None:
    """Append one heartbeat row (its own Delta commit): event time moves to `event_us`."""
    (spark.range(1).select(F.lit(reason).alias("reason"),
                           F.timestamp_micros(F.lit(event_us)).alias("event_time"),
                           F.current_timestamp().alias("written_at"))
     .write.format("delta").mode("append").saveAsTable(heartbeat_table(plan.sink.table, plan.model)))


def flush_target(spark: SparkSession, plan: StreamPlan, checkpoint: Path) -> int | None:
    """Where the end-of-input heartbeat puts the watermark (µs; the heartbeat stream has no
    delay) so every interval of the rows read so far closes: the newest clean event time of
    all inputs plus `flush_margin`, plus a second for Spark's ms rounding. None: no rows, or
    the watermark is there already."""
    newest = None
    for b in (b for b in plan.sources if b.read == "stream"):
        clean = Q.split(spark.table(b.relation), b, model=plan.model, origin="flush").clean
        value = clean.agg(F.max(F.unix_micros(Q.event_times(clean, b, model=plan.model).event))).collect()[0][0]
        newest = value if newest is None or (value is not None and value > newest) else newest
    if newest is None:
        return None
    target = newest + plan.flush_margin_us + FLUSH_SLACK_US
    return None if next_watermark_ms(checkpoint) * 1000 >= target else target


class IdleWatch(threading.Thread):
    """For interval triggers: when no input brought rows for `idle_timeout`, close everything
    as if the watermark had passed (docs/design.md §2.6): the same heartbeat as the end of a bounded run.
    (One input idle while others bring rows never holds the watermark back: the query's
    watermark is the maximum over inputs.) `activity`: over Spark Connect, when the inputs
    last brought rows, read from the offset log (the batch function `fn` runs on the server)."""

    def __init__(self, spark: SparkSession, plan: StreamPlan, fn: StatefulBatch, query,
                 activity: InputActivity | None = None):
        super().__init__(name=f"sqlflow-idle-{plan.model}", daemon=True)
        self.spark, self.plan, self.fn, self.query = spark, plan, fn, query
        self.activity = activity
        self.timeout = (plan.idle_timeout_us or 0) / 1e6
        self.sent = 0
        self.scanned: float | None = None  # `last` when the inputs were last scanned

    def run(self) -> None:
        while self._active():
            time.sleep(min(max(self.timeout / 4, 0.2), 5.0))
            try:
                self.check()
            except Exception:  # the query may have stopped under us; the loop condition sees it
                if self._active():
                    raise

    def _active(self) -> bool:
        """The query runs; False once its session is gone (over Spark Connect `isActive` asks
        the server, which fails while the process exits)."""
        try:
            return bool(self.query.isActive)
        except Exception:
            return False

    def check(self) -> None:
        if self.activity is not None:
            self.activity.refresh()
            read, last = bool(self.activity.brought), max(self.activity.last.values(), default=0.0)
        else:
            read, last = any(t is not None for t in self.fn.newest_us), max(self.fn.last_rows_at)
        if not read:
            return  # nothing read in this run: nothing pending here
        if time.monotonic() - last < self.timeout or last == self.scanned:
            return  # not idle, or no rows since the last scan: the target has not moved
        target = flush_target(self.spark, self.plan, self.fn.checkpoint)
        if target is not None and target > self.sent:
            write_heartbeat(self.spark, self.plan, target, "idle")
            self.sent = target
        self.scanned = last


# --- a bounded or endless run -----------------------------------------------------------------------

def run_stateful(ctx: Context, plan: StreamPlan, *, trigger: str = AVAILABLE_NOW,
                 on_batch: Callable[[BatchReport], None] | None = None,
                 after_sink: Callable[[int], None] | None = None, **_ignored) -> StreamResult:
    """Run one stateful model until it stops, like `stream.run_stream`.

    `available-now`: process every committed input row, then flush (heartbeats past the
    newest event time; a second run evicts every state row and emits every padded row), so
    the sink ends equal to the batch plan's output. An interval runs until interrupted.
    """
    began = time.monotonic()
    reports = _run(ctx, plan, trigger, on_batch, after_sink)
    if trigger == AVAILABLE_NOW:
        checkpoint = checkpoint_dir(ctx.project_dir, plan)
        target = flush_target(ctx.spark, plan, checkpoint)
        if target is not None:
            write_heartbeat(ctx.spark, plan, target, "flush")
            reports += _run(ctx, plan, trigger, on_batch, after_sink)
    return StreamResult(plan.model, tuple(reports), time.monotonic() - began)


def _run(ctx: Context, plan: StreamPlan, trigger: str, on_batch: Callable[[BatchReport], None] | None,
         after_sink: Callable[[int], None] | None) -> list[StatefulReport]:
    query, fn = start(ctx, plan, trigger=trigger, on_batch=on_batch, after_sink=after_sink)
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
    except Exception as exc:
        raise query_failed(f"model `{plan.model}`", plan.path, fn.error, exc,
                           rebuild=rebuild_command(plan),
                           written=written_paths(ctx, plan)) from exc
    spark_dropped = {p["batchId"]: sum(s.get("numRowsDroppedByWatermark", 0) for s in p["stateOperators"])
                     for p in query.recentProgress}
    if remote.is_remote(ctx.spark):  # the server's batches: read from the query and the commit log
        return _remote_reports(ctx.spark, query, plan, fn, on_batch, spark_dropped)
    return [replace(r, spark_dropped=spark_dropped.get(r.batch_id)) for r in fn.reports]


def remote_batches(spark: SparkSession, query, plan: StreamPlan, fn: StatefulBatch) -> list[StatefulReport]:
    """The reports of the batches a Connect server ran so far for the running `query` (the
    stream service reads them while it runs: `dispatch.remote_reports`)."""
    spark_dropped = {p["batchId"]: sum(s.get("numRowsDroppedByWatermark", 0) for s in p["stateOperators"])
                     for p in query.recentProgress}
    return _remote_reports(spark, query, plan, fn, None, spark_dropped)


def _remote_reports(spark: SparkSession, query, plan: StreamPlan, fn: StatefulBatch,
                    on_batch: Callable[[BatchReport], None] | None,
                    spark_dropped: dict[int, int]) -> list[StatefulReport]:
    """The reports of batches a Connect server ran: progress and commit log (`remote.reports`)."""
    batches = remote.progress(query)
    written = remote.logged(spark, fn.app_id(), [p.batchId for p in batches])
    out = []
    for p in batches:
        rows, quarantined, dropped = written.get(p.batchId, (0, 0, 0))
        report = StatefulReport(plan.model, p.batchId, remote.rows_in(p, fn.sides), rows, quarantined,
                                False, p.durationMs.get("triggerExecution", 0) / 1000,
                                dropped=dropped, spark_dropped=spark_dropped.get(p.batchId))
        out.append(report)
        if on_batch:
            on_batch(report)
    return out
