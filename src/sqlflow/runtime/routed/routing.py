"""Run a `RoutedPlan` (docs/design.md §2.4, §3): ONE read of the parent writes every target.

Stream (`run_routed_stream` / `start`): one Structured Streaming query over the parent with one
checkpoint (`.sqlflow/checkpoints/route__<group>`). Each micro-batch `b`:
1. caches the new rows, splits them by the quarantine rule and appends the quarantine rows to
   `<group>__quarantine` (idempotent per batch id);
2. for each target in order: counts its rows per partition, shapes them to the file budget
   (`sqlflow.runtime.routed.filebudget`) and appends them, idempotent per target (app
   `<group>@<query id>::<model>`, batch id `b`, through the query's exactly-once journal,
   `sqlflow.runtime.delta.once`). A crash between target k and k+1 replays `b` with the same rows:
   targets up to k skip their append, the others write it. Then it appends the commit log's
   `write` rows of that target (idempotent the same way);
3. records the batch's ingest frontier and the hours it touched in
   `<schema>.__sqlflow_route__<group>` (idempotent per batch id);
4. commits every hour the watermark has closed (`sqlflow.runtime.routed.partition_commit`).
A row written into an hour that is already committed (possible only after a bounded run closed
the hour early, or a backfill committed it) marks that hour dirty for each target it reached:
commit log `dirty` rows, `sqlflow status` / `repair`, the report's DIRTY note. The hour is not
committed or notified again.

End of input (`--trigger available-now`, the default): when the query stops because its input
is exhausted, `RouteBatch.flush` commits every hour written and not yet committed, as if the
watermark had passed (docs/design.md §2.6). A continuous (interval) query commits only on the watermark.

Batch (`run_routed_batch`): the parent is read once at one Delta version, cached and
quarantined once; each target's SQL runs over the cached clean rows and overwrites its
partitions (a `--start/--end` range with `replaceWhere`), then every hour written is committed.
"""

from __future__ import annotations

import dataclasses
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.types import ArrayType, LongType, StringType, StructField, StructType

from sqlflow.engine.context import Context
from sqlflow.errors import Location, SqlflowError
from sqlflow.identifiers import quote_table as quote
from sqlflow.planning.plan import COMMIT_LOG, RoutedPlan, RouteTarget, Sink
from sqlflow.rendering.sourcemap import SourceMap
from sqlflow.runtime import fault_points, input_rows, literal_rows, offsets
from sqlflow.runtime import quarantine as Q
from sqlflow.runtime.analysis_errors import model_errors
from sqlflow.runtime.batchfn import BatchFunction, query_failed
from sqlflow.runtime.delta import commitlog, once, sink_truth
from sqlflow.runtime.delta.deltalog import latest_version
from sqlflow.runtime.delta.sinks import BatchId, WriteResult, write
from sqlflow.runtime.env_errors import written_paths
from sqlflow.runtime.incremental import remote
from sqlflow.runtime.inputs import count_quarantine, range_predicate, read, write_quarantine
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
from sqlflow.runtime.results import DateRange, InputRead, RunResult
from sqlflow.runtime.routed import filebudget as FB
from sqlflow.runtime.routed import partition_commit as PC
from sqlflow.runtime.routed import partition_quarantine as PQ
from sqlflow.runtime.small_plan import small_plan


@dataclass(frozen=True)
class PartitionFiles:
    """One written partition: its budget and what Delta committed (files, bytes)."""

    spec: str
    rows: int
    budget: int
    files: int
    bytes: int


@dataclass(frozen=True)
class TargetWrite:
    """What one target got in one micro-batch or backfill."""

    model: str
    table: str
    rows: int
    partitions: tuple[PartitionFiles, ...]
    skipped: bool = False

    @property
    def files(self) -> int:
        return sum(p.files for p in self.partitions)

    @property
    def bytes(self) -> int:
        return sum(p.bytes for p in self.partitions)


@dataclass(frozen=True)
class RouteReport:
    """One micro-batch (or one backfill) of a routed group."""

    group: str
    batch_id: int | None
    rows_in: int | None  # None: not counted (a batch a Spark Connect server's worker ran)
    quarantined: int
    targets: tuple[TargetWrite, ...]
    committed: tuple[str, ...]
    notified: tuple[str, ...]
    seconds: float
    kind: str = "batch"  # batch | flush (the end-of-input commit of a bounded run)
    dirty: tuple[tuple[str, str], ...] = ()  # (hour, reason): rows written into committed hours
    reasons: tuple[tuple[str, int], ...] = ()  # quarantined rows per reason (the service's metrics)
    newest_ingest_us: int | None = None  # newest ingest time of its clean rows (the service's lag)

    @property
    def rows_out(self) -> int:
        return sum(t.rows for t in self.targets)

    def line(self) -> str:
        note = f"; committed {_hour_list(self.committed)}" if self.committed else ""
        if self.kind == "flush":
            return (f"{self.group} end of input after batch {self.batch_id}: "
                    f"{note.removeprefix('; ') or 'nothing left to commit'} ({self.seconds:.1f}s)")
        files = sum(t.files for t in self.targets)
        parts = sum(len(t.partitions) for t in self.targets)
        head = f"{self.group} " + (f"batch {self.batch_id}" if self.batch_id is not None else "backfill")
        dirty = "".join(f"; DIRTY {p}: {r}" for p, r in self.dirty)
        seen = "(not counted)" if self.rows_in is None else f"{self.rows_in:,}"
        return (f"{head}: in {seen}; out {self.rows_out:,} to {len(self.targets)} "
                f"targets, {files} files in {parts} partitions; quarantined {self.quarantined:,}"
                f"{note}{dirty} ({self.seconds:.1f}s)")


def _hour_list(hours: tuple[str, ...], listed: int = 4) -> str:
    """The committed hours of a progress line: each when few, else how many and the range.

    >>> _hour_list(("dt=d/hour=01", "dt=d/hour=02"))
    'dt=d/hour=01, dt=d/hour=02'
    >>> _hour_list(tuple(f"dt=d/hour={h:02d}" for h in range(24)))
    '24 hours, dt=d/hour=00 .. dt=d/hour=23'
    """
    if len(hours) <= listed:
        return ", ".join(hours)
    ordered = sorted(hours)
    return f"{len(hours)} hours, {ordered[0]} .. {ordered[-1]}"


# --- shared: write one target ---------------------------------------------------------------------

@dataclass(frozen=True)
class _TargetSql:
    """What `analysis_errors` needs of a routed target to name its model line."""

    model: str
    sql: str
    mode: str
    group: str  # the group's plan file holds the target's SQL
    source_map: SourceMap | None


def target_rows(spark: SparkSession, plan: RoutedPlan, t: RouteTarget) -> DataFrame:
    """The target's rows over the group's input view (`input_view`): its SQL that reads the
    shared calls' columns where it has one. Spark's analysis error is reported at the target
    model's line, from its SQL as written (the other one is tried first and, if Spark refuses
    it, set aside: the SQL as written names the model's own text)."""
    if t.shared_sql:
        try:
            return spark.sql(t.shared_sql)
        except AnalysisException:
            pass
    with model_errors(_TargetSql(t.model, t.sql, plan.mode, plan.model, t.source_map)):
        return spark.sql(t.sql)


def input_view(plan: RoutedPlan, clean: DataFrame) -> DataFrame:
    """Register the group's input view: the clean rows plus the group's shared calls
    (`sqlflow.planning.shared_calls`), computed once per row. With shared calls the view is cached:
    otherwise every target's query would call them again. Returns what to unpersist."""
    if plan.shared:
        clean = clean.select("*", *[F.expr(sql).alias(name) for name, sql in plan.shared]).persist()
    assert plan.sources[0].view is not None  # the group's input view
    clean.createOrReplaceTempView(plan.sources[0].view)
    return clean


class _Targets:
    """Per-target size models (learned once from Delta, then from each commit) and writes."""

    def __init__(self, spark: SparkSession, plan: RoutedPlan):
        self.plan = plan
        shuffle = str(spark.conf.get("spark.sql.shuffle.partitions", "200") or "")
        self.parallelism = int(shuffle) if shuffle.isdigit() else 200  # (some platforms say "auto")
        skip = (plan.commit.date_column, plan.commit.hour_column)
        self.sizes = {}
        for t in plan.targets:
            self.sizes[t.model] = FB.SizeModel(float(plan.bytes_per_row), skip,
                                               presets={k: float(v) for k, v in plan.row_bytes})
            FB.learn_from_log(spark, t.sink.table, t.sink.partition_by, self.sizes[t.model])

    def write(self, spark: SparkSession, t: RouteTarget, rows: DataFrame, *, sink: Sink | None = None,
              batch: BatchId | None = None, replace_where: str | None = None,
              poisoned: Callable[[DataFrame], None] | None = None) -> tuple[WriteResult, TargetWrite, dict]:
        """Write target `t`'s `rows`; rows whose partition values cannot be directories
        (`partition_quarantine`) are left out and, when there are any, passed to `poisoned`
        (as checked rows) before the write. One aggregation counts both."""
        sink = sink or t.sink
        checked = PQ.check(self.plan, t, rows)
        got = checked.groupBy(FB.partition_key(sink.partition_by).alias("k"), PQ.REASON).count().collect()
        counts = {r["k"]: r["count"] for r in got if r[PQ.REASON] is None}
        rows = checked.where(F.col(PQ.REASON).isNull()).drop(PQ.REASON)
        if poisoned is not None and any(r[PQ.REASON] is not None for r in got):
            poisoned(checked)
        plan = FB.budgets(counts, self.sizes[t.model], t.target_file_size, t.max_files)
        shaped = FB.shape(rows, sink.partition_by, plan, FB.tasks(plan, t.target_file_size, self.parallelism))
        result = write(spark, sink, shaped, batch=batch, replace_where=replace_where,
                       optimize_write=False)  # `shaped` is already binned by the file budget
        written = {p.spec: p for p in result.partitions}  # what the commit added, per partition
        for p in written.values() if not result.skipped else ():  # a replay: learned already
            self.sizes[t.model].learn(p.spec, p.bytes, p.rows)
        parts = tuple(PartitionFiles(spec, b.rows, b.files, written[spec].files if spec in written else 0,
                                     written[spec].bytes if spec in written else 0)
                      for spec, b in sorted(plan.items()))
        return result, TargetWrite(t.model, sink.table, sum(counts.values()), parts,
                                   result.skipped), counts


def _hours(plan: RoutedPlan, t: RouteTarget, specs) -> set[str]:
    """The (date, hour) commit specs of full partition specs of target `t`."""
    out = set()
    for spec in specs:
        values = commitlog.parse_partition(spec)
        day, hour = values[plan.commit.date_column], values[plan.commit.hour_column]
        assert day is not None and hour is not None  # NULL levels were quarantined (partition_quarantine)
        out.add(PC.hour_spec(plan, day, hour))
    return out


# --- stream ---------------------------------------------------------------------------------------

def progress_table(plan: RoutedPlan) -> str:
    """`<schema>.__sqlflow_route__<group>`: per micro-batch, the ingest frontier and hours seen."""
    table = plan.targets[0].sink.table
    schema = table.rsplit(".", 1)[0] + "." if "." in table else ""
    return f"{schema}__sqlflow_route__{plan.model}"


class RouteBatch(BatchFunction):
    """The `foreachBatch` function of a routed group's query.

    `between_targets(k, batch_id)` is called after target k's write (hook for progress and
    crash tests); `on_batch` gets each RouteReport. `ctx` is None in a Spark Connect server's
    Python worker (`RemoteRouteBatch`), which runs batches only, never the flush."""

    def __init__(self, ctx: Context | None, plan: RoutedPlan, app_id: Callable[[], str],
                 on_batch: Callable[[RouteReport], None] | None = None,
                 between_targets: Callable[[int, int], None] | None = None,
                 checkpoint: Path | None = None):
        self.ctx, self.plan, self.app_id = ctx, plan, app_id
        self.on_batch, self.between_targets = on_batch, between_targets
        self.reports: list[RouteReport] = []
        self._targets: _Targets | None = None
        self._state: tuple[int | None, set[str], set[str]] | None = None  # watermark, hours, committed
        # exactly-once appends: the query's journal, opened before the query plans a batch
        self.journal = once.Journal.open(checkpoint, offsets.next_batch(checkpoint)) if checkpoint else None

    def _id(self, app: str, batch_id: int) -> BatchId:
        """The identity of an exactly-once append of `batch_id`, with the query's journal when
        it decides that batch (an older checkpoint's earlier batch ids: Delta's `txn`)."""
        journal = self.journal if self.journal is not None and self.journal.decides(batch_id) else None
        return BatchId(app, batch_id, journal)

    def _run(self, df: DataFrame, batch_id: int) -> None:
        fault_points.reached("spark_commit", batch_id - 1)  # Spark committed the batch before
        began = time.monotonic()
        spark, plan, b = df.sparkSession, self.plan, self.plan.sources[0]
        if self._targets is None:
            self._targets = _Targets(spark, plan)
        app = self.app_id()
        df, view = df.persist(), None
        try:
            split = Q.split(df, b, model=plan.model, origin=f"batch {batch_id}")
            view = input_view(plan, split.clean)
            rows_in, reasons, frontier = _measure(df, b)
            quarantined = sum(reasons.values())
            if quarantined:
                write(spark, quarantine_sink(plan, "append_once", Q.PARTITION_BY), split.quarantine,
                      batch=self._id(f"{app}__quarantine", batch_id))
            writes, hours, reached, poisoned = [], set(), [], []
            for k, t in enumerate(plan.targets):
                target_batch = self._id(f"{app}::{t.model}", batch_id)
                def poisoned_rows(checked: DataFrame, t: RouteTarget = t) -> None:
                    for r in checked.where(F.col(PQ.REASON).isNotNull()).groupBy(PQ.REASON).count().collect():
                        reasons[r[0]] = reasons.get(r[0], 0) + r[1]
                    poisoned.append(write(
                        spark, quarantine_sink(plan, "append_once", Q.PARTITION_BY),
                        PQ.quarantine_rows(plan, t, checked, origin=f"batch {batch_id}"),
                        batch=self._id(f"{app}__quarantine::{t.model}", batch_id)))

                _, tw, counts = self._targets.write(
                    spark, t, target_rows(spark, plan, t), batch=target_batch, poisoned=poisoned_rows)
                commitlog.append(spark, [
                    commitlog.Entry(t.sink.table, spec, "write", "stream", t.model, run_id=app,
                                    batch_id=batch_id, rows=n) for spec, n in sorted(counts.items())],
                    batch=target_batch)
                reached += [(t, h) for h in sorted(_hours(plan, t, counts))]
                hours |= _hours(plan, t, counts)
                writes.append(tw)
                fault_points.reached("sink", batch_id)
                if self.between_targets:
                    self.between_targets(k, batch_id)
            _record_progress(spark, plan, self._id(f"{app}::progress", batch_id), frontier, hours)
            if self._state is None:  # read once per query start, then kept up to date here
                self._state = (*_progress(spark, plan),
                               PC.committed_hours(spark, plan, before=(app, batch_id)))
            watermark, seen, done = self._state
            dirty = _mark_dirty(spark, plan, [(t, h) for t, h in reached if h in done], app,
                                self._id(f"{app}::dirty", batch_id))
            if frontier is not None:
                watermark = frontier if watermark is None else max(watermark, frontier)
            seen = seen | hours
            todo = PC.closed(plan, seen - done, watermark, _zone(spark))
            fired = PC.commit(spark, plan, todo, mode="stream", run_id=app,
                              batch=self._id(app, batch_id), inputs={"watermark_us": watermark})
            self._state = (watermark, seen, done | set(todo))
            fault_points.reached("commit_log", batch_id)
        finally:
            if view is not None:
                view.unpersist()
            df.unpersist()
            assert b.view is not None  # the group's input view
            spark.catalog.dropTempView(b.view)
        quarantined += sum(w.rows for w in poisoned)
        report = RouteReport(plan.model, batch_id, rows_in, quarantined, tuple(writes),
                             tuple(todo), tuple(fired), time.monotonic() - began, dirty=dirty,
                             reasons=tuple(sorted((k, n) for k, n in reasons.items() if n)),
                             newest_ingest_us=frontier if b.ingest_time else None)
        self._report(report)

    def flush(self) -> RouteReport | None:
        """End of input of a bounded run (docs/design.md §2.6): commit every hour any batch wrote that
        is not committed yet, as if the watermark had passed; None when the query never ran a
        batch. Called by `run_routed_stream` (and `sqlflow run --mode stream`) after an
        `available-now` query stopped by itself, never for a continuous one."""
        assert self.ctx is not None  # the flush runs in the process that started the query
        spark, plan = self.ctx.spark, self.plan
        if not spark.catalog.tableExists(progress_table(plan)):
            return None
        began = time.monotonic()
        watermark, seen = _progress(spark, plan)
        last = spark.table(progress_table(plan)).agg(F.max("batch_id")).collect()[0][0]
        todo = sorted(seen - PC.committed_hours(spark, plan))
        fired = PC.commit(spark, plan, todo, mode="stream", run_id=self.app_id(),
                          inputs={"watermark_us": watermark, "end_of_input": True})
        report = RouteReport(plan.model, last, 0, 0, (), tuple(todo), tuple(fired),
                             time.monotonic() - began, kind="flush")
        self._report(report)
        return report

    def _report(self, report: RouteReport) -> None:
        self.reports.append(report)
        if self.on_batch:
            self.on_batch(report)


class RemoteRouteBatch(remote.RemoteBatch):
    """The picklable `foreachBatch` function of a routed group's query over Spark Connect:
    plain data only (the plan, the checkpoint path); it builds its `RouteBatch` in the
    server's Python worker at the first batch, on the batch's session (as
    `sqlflow.runtime.incremental.remote.RemoteMicroBatch` does for a model). The query's
    journal was opened by the client's `RouteBatch` before the query started; the worker's
    opens the same folder (docs/deploy.md, "Spark Connect").

    >>> import pickle
    >>> pickle.loads(pickle.dumps(RemoteRouteBatch(None, "/tmp/ck"))).checkpoint
    '/tmp/ck'
    """

    def __init__(self, plan: RoutedPlan | None, checkpoint: str):
        self.plan, self.checkpoint = plan, checkpoint

    def build(self, df: DataFrame) -> RouteBatch:
        assert self.plan is not None  # a query's function carries its plan
        checkpoint = Path(self.checkpoint)
        return RouteBatch(None, self.plan, app_id(self.plan.model, checkpoint), checkpoint=checkpoint)


def remote_reports(spark: SparkSession, query: StreamingQuery, plan: RoutedPlan,
                   app: str) -> list[RouteReport]:
    """What a Connect server's micro-batches of the group did, one report per batch of this
    run: batch ids and seconds from the query's progress; rows per target, committed, notified
    and dirty hours from the commit log; quarantined rows from the group's quarantine table
    (its `origin` names the batch). Input rows are not counted (pyspark 4.2 reports 0 for
    a batch a Connect worker reads: `remote.rows_in`)."""
    batches = remote.progress(query)
    ids = [p.batchId for p in batches]
    if not ids or not spark.catalog.tableExists(COMMIT_LOG):
        return []
    tables = {t.sink.table.lower(): t for t in plan.targets}
    log = (spark.table(COMMIT_LOG).where((F.col("run_id") == app) & F.col("batch_id").isin(ids))
           .select("table", "partition", "kind", "batch_id", "rows", "reason").collect())
    notified = {r["partition"] for r in spark.table(COMMIT_LOG).where(
        (F.col("table") == PC.notify_table(plan)) & (F.col("run_id") == app)
        & (F.col("reason") == PC.NOTIFIED)).select("partition").collect()}
    quarantined: dict[int, int] = {}
    if spark.catalog.tableExists(plan.quarantine):
        origins = {f"batch {i}": i for i in ids}
        for r in (spark.table(plan.quarantine).where(F.col("origin").isin(list(origins)))
                  .groupBy("origin").count().collect()):
            quarantined[origins[r["origin"]]] = r["count"]
    out = []
    for p in batches:
        mine = [r for r in log if r["batch_id"] == p.batchId]
        targets = tuple(TargetWrite(t.model, t.sink.table,
                                    sum(r["rows"] or 0 for r in mine if r["kind"] == "write"
                                        and r["table"].lower() == name), ())
                        for name, t in tables.items())
        committed = tuple(sorted({r["partition"] for r in mine if r["kind"] == "commit"
                                  and r["table"].lower() in tables}))
        dirty = tuple(sorted({(r["partition"], r["reason"]) for r in mine if r["kind"] == "dirty"}))
        out.append(RouteReport(plan.model, p.batchId, None, quarantined.get(p.batchId, 0), targets,
                               committed, tuple(h for h in committed if h in notified),
                               p.durationMs.get("triggerExecution", 0) / 1000, dirty=dirty))
    return out


DIRTY_REASON = "row written after the hour was committed"


def _mark_dirty(spark: SparkSession, plan: RoutedPlan, reached: list[tuple[RouteTarget, str]],
                run_id: str, batch: BatchId) -> tuple[tuple[str, str], ...]:
    """`dirty` commit-log rows (idempotent per `batch`) for each target that wrote into an
    hour committed before this batch: readers may already have consumed the hour without these
    rows. Returns the (hour, reason) pairs for the report."""
    commitlog.append(spark, [commitlog.Entry(t.sink.table, h, "dirty", "stream", t.model, run_id=run_id,
                                             batch_id=batch.batch_id, reason=DIRTY_REASON)
                             for t, h in reached], batch=batch)
    return tuple((h, DIRTY_REASON) for h in sorted({h for _, h in reached}))


def _measure(df: DataFrame, b) -> tuple[int, dict[str, int], int | None]:
    """Rows, quarantined rows per reason and this batch's contribution to the watermark (see
    partition_commit: the largest clean ingest time, or without an ingest column the largest
    clean event time minus allowed lateness), in one pass over the cached batch."""
    times = Q.event_times(df, b, model="")
    reason = Q.reason_of(times, b)
    clean = reason.isNull()
    has_ingest = bool(b.ingest_time) and b.ingest_time.lower() in {c.lower() for c in df.columns}
    edge = F.unix_micros(times.ingest) if has_ingest else \
        F.unix_micros(times.event) - F.lit(b.allowed_lateness_us)
    row = df.agg(F.count(F.lit(1)), F.max(F.when(clean, edge)),
                 *[F.count_if(reason == F.lit(r)) for r in Q.REASONS]).collect()[0]
    return row[0], dict(zip(Q.REASONS, row[2:], strict=True)), row[1]


_PROGRESS = StructType([StructField("batch_id", LongType()), StructField("frontier_us", LongType()),
                        StructField("hours", ArrayType(StringType()))])


def _record_progress(spark: SparkSession, plan: RoutedPlan, batch: BatchId,
                     frontier: int | None, hours: set[str]) -> None:
    rows = literal_rows.frame(spark, [(batch.batch_id, frontier, sorted(hours))], _PROGRESS)
    write(spark, Sink(progress_table(plan), "append_once", owner=plan.model, role="state"), rows,
          batch=batch)


def _progress(spark: SparkSession, plan: RoutedPlan) -> tuple[int | None, set[str]]:
    """The watermark (largest frontier so far) and every hour any batch wrote."""
    row = (spark.table(progress_table(plan))
           .agg(F.max("frontier_us").alias("w"),
                F.array_distinct(F.flatten(F.collect_list("hours"))).alias("h")).collect()[0])
    return row["w"], set(row["h"] or [])


def _zone(spark: SparkSession) -> str:
    return spark.conf.get("spark.sql.session.timeZone") or "UTC"


def check_stream_plan(spark: SparkSession, plan: RoutedPlan) -> None:
    b = plan.sources[0]
    if plan.strategy != "incremental" or b.read != "stream":
        raise SqlflowError(f"routed group `{plan.model}` has no incremental stream input",
                           location=Location(plan.path))
    if not spark.catalog.tableExists(b.relation):
        raise SqlflowError(f"routed group `{plan.model}`: input table `{b.relation}` does not exist",
                           location=Location(plan.path), hint="create or load the input first")


def start(ctx: Context, plan: RoutedPlan, *, trigger: str = AVAILABLE_NOW,
          on_batch: Callable[[RouteReport], None] | None = None,
          between_targets: Callable[[int, int], None] | None = None):
    """Start the group's one query; returns `(query, RouteBatch)`."""
    spark = ctx.spark
    check_stream_plan(spark, plan)
    checkpoint = checkpoint_dir(ctx.project_dir, plan)
    if is_new(checkpoint):
        refuse_new_checkpoint(spark, plan, checkpoint, plan.outputs)
        spark.sql(f"DROP TABLE IF EXISTS {quote(progress_table(plan))}")
        shutil.rmtree(checkpoint / once.FOLDER, ignore_errors=True)  # an old query's journal
    else:  # the tables, not the journal, say which batches are written (docs/semantics.md)
        sink_truth.reconcile(spark, checkpoint, [*(t.sink.table for t in plan.targets), plan.quarantine,
                                                 progress_table(plan), COMMIT_LOG],
                             (f"{plan.model}@{query_id(checkpoint)}",), what=f"routed group `{plan.model}`",
                             path=plan.path, rebuild=rebuild_command(plan))
    b = plan.sources[0]
    reader = spark.readStream.format("delta")
    if b.max_files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", b.max_files_per_trigger)
    fn = RouteBatch(ctx, plan, app_id(plan.model, checkpoint),
                    on_batch=on_batch, between_targets=between_targets, checkpoint=checkpoint)
    # over Spark Connect the server runs the batches: it gets a picklable function, and `fn`
    # (here) keeps the flush (docs/deploy.md, "Spark Connect")
    batches = RemoteRouteBatch(plan, str(checkpoint.resolve())) if remote.is_remote(spark) else fn
    query = start_query(reader.table(b.relation), batches, name=f"sqlflow_route_{plan.model}",
                        checkpoint=checkpoint, trigger=trigger)
    return query, fn


def run_routed_stream(ctx: Context, plan: RoutedPlan, *, trigger: str = AVAILABLE_NOW,
                      on_batch: Callable[[RouteReport], None] | None = None,
                      between_targets: Callable[[int, int], None] | None = None,
                      end_of_input: bool = True) -> list[RouteReport]:
    """Run the group's query until it stops; a failure in a micro-batch is raised as a
    SqlflowError (a SqlflowError as it was raised, anything else naming the group and its first
    line: `batchfn.query_failed`; the checkpoint resumes it). An `available-now` run that ends by itself commits
    every open hour (`RouteBatch.flush`) unless `end_of_input` is False: a caller that feeds
    more input after this run (verify's rounds before the last, tests of the watermark rule)
    says so, and the run commits only what the watermark closed, like a continuous query."""
    query, fn = start(ctx, plan, trigger=trigger, on_batch=on_batch, between_targets=between_targets)
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
        return fn.reports
    except Exception as exc:
        raise query_failed(f"routed group `{plan.model}`", plan.path, fn.error, exc,
                           rebuild=rebuild_command(plan),
                           written=written_paths(ctx, plan)) from exc
    if remote.is_remote(ctx.spark):  # the server's batches: read from the query and the commit log
        for report in remote_reports(ctx.spark, query, plan, fn.app_id()):
            fn._report(report)
    if trigger == AVAILABLE_NOW and end_of_input:
        fn.flush()
    return fn.reports


# --- batch ----------------------------------------------------------------------------------------

def run_routed_batch(ctx: Context, plan: RoutedPlan, *, start: date | None = None, end: date | None = None,
                     inspect: Callable[[str, DataFrame], None] | None = None,
                     versions: dict[str, int] | None = None) -> Iterator:
    """Backfill every target from one read; yields one `RunResult` per target, then leaves the
    group's RouteReport on the last one (`RunResult.route`). `inspect(model, rows)` sees each
    target's rows before its write (tests check they read the cache, not the input).
    `versions` pins the input's Delta version (`sqlflow audit`: what the stream processed)."""
    spark, b = ctx.spark, plan.sources[0]
    dates = DateRange.of(start, end)
    began = time.monotonic()
    if not spark.catalog.tableExists(b.relation):
        raise SqlflowError(f"routed group `{plan.model}`: input table `{b.relation}` does not exist",
                           location=Location(plan.path), hint="run its parent first")
    small = input_rows.small(spark, [b.relation])  # few rows: no adaptive plan, no code generated
    with small_plan(spark, small, interpreted=small):
        results = _backfill(ctx, plan, dates, began, inspect, versions)
    yield from results


def _backfill(ctx: Context, plan: RoutedPlan, dates: DateRange | None, began: float,
              inspect: Callable[[str, DataFrame], None] | None,
              versions: dict[str, int] | None) -> list[RunResult]:
    """`run_routed_batch`'s work: every target written, the group's quarantine, the commit."""
    spark, b = ctx.spark, plan.sources[0]
    version = (versions or {}).get(b.relation)
    if version is None:
        version = latest_version(spark, b.relation)
    rows, view = read(spark, b.relation, version).persist(), None
    run_id = f"batch-{uuid.uuid4().hex[:12]}"
    results, writes, hours = [], [], set()
    try:
        origin = f"{b.relation}@v{version}"
        split = Q.split(rows, b, model=plan.model, origin=origin)
        view = input_view(plan, split.clean)
        targets, quarantine, last = _Targets(spark, plan), [split.quarantine], began
        done: list[tuple[RouteTarget, WriteResult, float]] = []
        for t in plan.targets:
            out = target_rows(spark, plan, t)
            where = None
            if dates is not None:
                where = range_predicate(out, t.sink.partition_by[0], dates, model=t.model)
                out = out.where(F.expr(where))
            if inspect:
                inspect(t.model, out)
            def poisoned_rows(checked: DataFrame, t: RouteTarget = t) -> None:
                quarantine.append(PQ.quarantine_rows(plan, t, checked, origin=origin))

            result, tw, _ = targets.write(spark, t, out, replace_where=where, poisoned=poisoned_rows)
            commitlog.append(spark, commitlog.write_entries(result, mode="batch", model=t.model,
                                                            run_id=run_id,
                                                            inputs={b.relation: version}))
            hours |= _hours(plan, t, [p.spec for p in result.partitions])
            writes.append(tw)
            # each target's own seconds (the first's include the group's read and split): the
            # run summary adds them up, so they must not be the time since the group began
            now = time.monotonic()
            done.append((t, result, now - last))
            last = now
        # after the targets: their rows whose partition values cannot be directories join the
        # input's quarantine rows, in the one write that replaces the group's quarantine
        q_result = write_quarantine(spark, plan, quarantine, dates)
        counts_q = count_quarantine(spark, plan.quarantine, dates)
        results = [RunResult(t.model, dates, (InputRead(b.relation, version, b.view),), result, q_result,
                             counts_q, seconds) for t, result, seconds in done]
    finally:
        if view is not None:
            view.unpersist()
        rows.unpersist()
        spark.catalog.dropTempView(b.view)
    fired = PC.commit(spark, plan, sorted(hours), mode="batch", run_id=run_id,
                      inputs={b.relation: version})
    report = RouteReport(plan.model, None, 0, sum(q.rows for q in counts_q), tuple(writes),
                         tuple(sorted(hours)), tuple(fired), time.monotonic() - began)
    results[-1] = dataclasses.replace(results[-1], route=report)
    return results
