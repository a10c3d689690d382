"""One micro-batch of an `incremental` stream plan (docs/design.md §2.9), run inside `foreachBatch`.

The query's rows arrive in one envelope (`__side` = the input's index, `__s<k>` = the row of
input k as a struct, NULL for the others: see `sqlflow.runtime.incremental.stream`). Each input's rows
are cached flat (or read from the input table, when they are one whole version of it), and ONE
aggregation over them gives what the step needs to know of its new
rows (rows per input, quarantine reasons, prune ranges, ingest frontiers). For batch id `b`:

1. split each input's new rows by the quarantine rule (origin `batch <b>`) and append the
   quarantine rows to `<model>__quarantine`, idempotent per batch id;
2. register the clean new rows as the input's delta view;
3. for each joined input, register its old view: its clean rows of batches `< b` (read from
   the input table at the version the batch starts on, plus the state table's copies of
   batches that ended inside a commit: `sqlflow.runtime.incremental.older`; a running query
   holds the table as of that version plus the batches after it:
   `sqlflow.runtime.incremental.held`), pruned to the event-time range the other side's new
   rows can match;
4. run the plan's SQL; for an outer join of two streams add the preserved rows this step
   closes that match nothing, padded (`sqlflow.runtime.incremental.padding`), and find the padded rows
   a new row would have matched (dirty partitions); append it all to the sink in one write,
   idempotent per batch id;
5. append the clean new rows of each joined input to its state table if the batch ends inside
   a commit of it (outer joins: always), idempotent per batch id; record which older rows the
   next batch reads, and the step's ingest frontiers and cutoffs (outer joins);
6. append the commit-log rows of the batch (`write` per partition, `dirty` per diverged
   partition), idempotent per batch id.

A batch of at most `LOCAL_ROWS` new rows (and padded rows) makes its sink, state and
quarantine appends from the driver: Spark hands the rows over as Arrow, delta-rs commits them with
the same marker (`sqlflow.runtime.delta.local_append.append_frame`), and its join is planned
without adaptive execution (`small_plan`: each held batch a query stage of its own made the
join cost more with every batch), and run without code generation when it reads at most
`INTERPRETED_ROWS` rows in all (its classes were compiled again at every batch). A batch of
more new rows, up to `COUNTED_ROWS`, counts its output rows first (cached for the write) and
appends them from the driver too when they are at most `LOCAL_ROWS` (a catch-up's one batch
of a million rows makes tens of thousands; `_few_out`), creating the sink empty first if
there is none. Such a batch whose joined inputs have no older rows yet (a catch-up's first)
counts its stats in the join's own job (`_watched`) and writes its quarantine after it.

Sink before state, and the old view reads batches `< b` only: whichever write a crash
interrupted, a replay of `b` (same rows, Spark replays an uncommitted batch with the same
offsets) skips what was committed and redoes the rest, and never sees its own rows as old.
"Idempotent per batch id" is the query's journal (`sqlflow.runtime.delta.once`, in the checkpoint):
a write records its attempt first, and only a write that finds its record searches the
table's newest commits for its marker; no write asks Delta for its last `txn` (that look-up
rebuilds the table's state, about a second per write).

Between micro-batches the run loop calls `flush` (end of a bounded run) and `idle_check`
(interval triggers): steps that pad without new rows (`sqlflow.runtime.incremental.padding`). A lock
keeps them and `foreachBatch` apart (they share temp views and the sink).
"""

from __future__ import annotations

import dataclasses
import functools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import reduce
from pathlib import Path

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType, TimestampType

from sqlflow.errors import Location, SqlflowError
from sqlflow.identifiers import quote as quote_ident
from sqlflow.planning.plan import PruneRange, Sink, SourceBinding, StreamPlan
from sqlflow.runtime import fault_points, offsets, sink_partitions, snapshot
from sqlflow.runtime import quarantine as Q
from sqlflow.runtime.analysis_errors import model_errors
from sqlflow.runtime.batchfn import BatchFunction, Phases
from sqlflow.runtime.delta import commitlog, deltalog, once, source_files
from sqlflow.runtime.delta.no_runtime_filter import no_runtime_filter
from sqlflow.runtime.delta.sinks import BatchId, WriteResult, committed, write
from sqlflow.runtime.incremental import (
    arrow_stats,
    copies,
    held,
    input_logs,
    keyed,
    log_stats,
    older,
    own_files,
    padding,
    side_jobs,
    state,
    views,
    watched,
    window,
)
from sqlflow.runtime.incremental.key_index import Store
from sqlflow.runtime.ownership import quarantine_sink
from sqlflow.runtime.small_plan import INTERPRETED_ROWS, small_plan, unadaptive

SIDE = "__side"
# a micro-batch of at most this many new rows (all inputs) hands its output and its state
# rows to the driver, which appends them with delta-rs (`local_append.append_frame`): at
# 100 bytes a row, some tens of MB of Arrow for an interval join's output
LOCAL_ROWS = 200_000
# a batch of more new rows than LOCAL_ROWS, up to this many, counts its output rows (cached
# for the write) to append them from the driver when they are few (`_few_out`); a larger
# one is written by Spark without a cache of its output
COUNTED_ROWS = 4_000_000
# `_arrow_stats`' columns beside an input's own: the quarantine reason, the stats' values
_REASON, _VALUE = "__sqlflow_stat_reason", "__sqlflow_stat_"


def side_column(k: int) -> str:
    return f"__s{k}"


@dataclass(frozen=True)
class BatchReport:
    """What one micro-batch (or a flush/idle step between them) did: new rows per input, rows
    appended (padded ones among them), rows quarantined, partitions found dirty."""

    model: str
    batch_id: int
    rows_in: tuple[tuple[str, int], ...]
    rows_out: int
    quarantined: int
    replayed: bool  # the sink already had this batch id (a restart after a crash)
    seconds: float
    kind: str = "batch"  # batch | flush | idle
    padded: int = 0
    dirty: tuple[tuple[str, str], ...] = ()  # (partition, reason)
    phases: tuple[tuple[str, float], ...] = ()  # wall seconds per phase (`batchfn.Phases`)
    reasons: tuple[tuple[str, int], ...] = ()  # quarantined rows per reason (the service's metrics)
    newest_ingest_us: int | None = None  # newest ingest time of its clean rows (the service's lag)

    def line(self) -> str:
        note = " (replay: sink already written)" if self.replayed else ""
        dirty = "".join(f"; DIRTY {p or '(table)'}: {r}" for p, r in self.dirty)
        if self.kind != "batch":
            what = "end-of-input flush" if self.kind == "flush" else "idle timeout"
            return (f"{self.model} {what} after batch {self.batch_id}: padded {self.padded:,}"
                    f"{note} ({self.seconds:.1f}s)")
        ins = ", ".join(f"{r} +{n:,}" for r, n in self.rows_in) or "(not counted)"
        pad = f" ({self.padded:,} padded)" if self.padded else ""
        return (f"{self.model} batch {self.batch_id}: in {ins}; out {self.rows_out:,}{pad}; "
                f"quarantined {self.quarantined:,}{note}{dirty} ({self.seconds:.1f}s)")


class MicroBatch(BatchFunction):
    """The `foreachBatch` function of one model's query.

    `app_id` names the query in every exactly-once append; `after_sink`
    and `after_state` are called with the batch id right after the sink write and after the
    state appends (hooks for progress and crash tests). `checkpoint` (the query's folder)
    gives each batch's input offsets for the commit log; `spark` is needed for the steps
    between micro-batches.
    """

    def __init__(self, plan: StreamPlan, sides: list[SourceBinding], schemas: dict[str, StructType],
                 state_tables: dict[str, str], app_id: Callable[[], str],
                 on_batch: Callable[[BatchReport], None] | None = None,
                 after_sink: Callable[[int], None] | None = None,
                 after_state: Callable[[int], None] | None = None,
                 *, checkpoint: Path | None = None, spark: SparkSession | None = None):
        self.plan, self.sides, self.schemas = plan, sides, schemas
        self.state_tables, self.app_id = state_tables, app_id
        self.on_batch, self.after_sink, self.after_state = on_batch, after_sink, after_state
        self.checkpoint, self.spark = checkpoint, spark
        self.outer = padding.sides(plan)
        self.ledger = older.Ledger(checkpoint, [b.relation if b.relation in state_tables else None
                                                for b in sides], copy_all=bool(self.outer),
                                   location=Location(plan.path))
        self.progress = padding.progress_table(plan.sink.table, plan.model)
        self.held = held.Held()  # older rows kept between micro-batches (`held`)
        self.copies = copies.Copies()  # the state tables' rows this object appended (`copies`)
        self.side_jobs = side_jobs.SideJobs()  # the inputs' collections at once (`side_jobs`)
        self.logs = input_logs.InputLogs()  # the inputs' own Delta logs (`input_logs`)
        # exactly-once appends: the query's journal, opened before the query plans a batch
        self.journal = once.Journal.open(checkpoint, offsets.next_batch(checkpoint)) if checkpoint else None
        self.reports: list[BatchReport] = []
        self.lock = threading.RLock()
        self._cached: list[DataFrame] = []  # frames cached for the running step (padding, checked rows)
        # what the catalog said once, kept for the query's life: the sink as its first write
        # found it, the commit log's folder, which state tables exist (docs/design.md §2.9)
        self._sink_info: deltalog.TableInfo | None = None
        self._log_location: str | None = None
        self._state_exists: dict[str, bool] = {}
        self._state_location: dict[str, str] = {}  # state table -> folder, once appended to
        # the outer join's progress after the last step this object recorded (`_record`):
        # (batch, seq) and the progress; the next micro-batch starts from it instead of
        # reading the progress table (only this query writes it while it runs)
        self._recorded: tuple[tuple[int, int], padding.Progress] | None = None
        self._progress_exists = False  # the progress table, once this object has written it
        self._stat_memo: dict[tuple[int, str], tuple[list[Column], Column, dict[str, Column]]] = {}  # `_stat_columns`
        self._lookups: dict[str, tuple[tuple[str, str], ...]] | None = None  # `_keyed`
        began = time.monotonic()
        self.last_rows = {b.relation: began for b in sides}  # when each input last brought rows

    def _run(self, df: DataFrame, batch_id: int) -> None:
        fault_points.reached("spark_commit", batch_id - 1)  # Spark committed the batch before
        with self.lock:  # the idle check pads from another thread
            self._batch(df, batch_id)

    def _batch(self, df: DataFrame, batch_id: int) -> None:
        began = time.monotonic()
        spark, plan, phase = df.sparkSession, self.plan, Phases()
        sources = self.ledger.before(batch_id)  # before caching: an error here leaks nothing
        self._keyed(spark)  # (decided at the query's first micro-batch)
        self.copies.begin(batch_id)
        with phase("new rows"):
            sides = [self._new_rows(spark, df, batch_id, k) for k in range(len(self.sides))]
        kept: set[int] = set()  # inputs whose new rows a held run keeps cached
        copied: set[int] = set()  # inputs whose new rows `copies` keeps cached
        try:
            arrows: dict[str, pa.Table] = {}  # clean new rows on the driver, of inputs held by key
            keys: dict[str, pa.Table] = {}  # the same rows' key columns at least, for `_probe`
            watches: dict[int, watched.Watch] | None = None  # stats the join's job counts (`_watched`)
            joined = sides  # the new rows the join reads (observed, when `watches`)
            with phase("stats"):
                stats = self._log_stats(spark, batch_id)
                found = None if stats is not None else self._arrow_stats(spark, batch_id, sides)
                if found is not None:
                    stats, arrows, keys = found
                elif stats is None:
                    found_w = self._watched(spark, batch_id, sides, sources)
                    stats, joined, watches = found_w if found_w else (self._stats(sides), sides, None)
            counts = stats.rows
            # few new rows (the state appends' rows) make few joined rows: the appends go
            # through the driver (`local_append.append_frame`); an outer join's sink append
            # when its padded rows (counted below) are few too
            few = sum(counts.values()) <= LOCAL_ROWS
            for k, b in enumerate(self.sides):
                if counts.get(k):
                    self.last_rows[b.relation] = began
            # the stats' quarantine rule, not a second copy of its column expressions
            clean = {b.relation: joined[k] if stats.proven_clean else
                     Q.clean(joined[k], b, model=plan.model, reason=stats.reason_of.get(k))
                     for k, b in enumerate(self.sides)}
            if plan.hash_join_sql is None:  # else bound once the rows read are known (`_bind`)
                self._bind_new(clean, one_partition=False)  # before the dimensions, which read them
            app = self.app_id()
            with phase("dimensions"):
                dims = snapshot.begin(spark, plan, self._id(app, batch_id))  # pinned dimensions (2.3)
            quarantined = 0
            if watches is None:  # else known once the join's job ran
                quarantined = self._quarantine_new(spark, sides, stats, app, batch_id, few, phase)
            keeps: dict[str, list[tuple[str, int, int]] | None] = {}  # `_keep` per joined input
            olds: dict[str, DataFrame] = {}  # each joined input's older rows
            if few and self._keyed(spark) and self.held.on_driver and not keys:
                with phase("keys"):  # each keyed input's rows (or keys) at once (`side_jobs`)
                    taken = [(b, self._to_run(batch_id, k)) for k, b in enumerate(self.sides)
                             if b.relation in self._keyed(spark)]
                    tables = self.side_jobs.to_arrow(spark, [
                        clean[b.relation].select(*(clean[b.relation].columns if whole else self._probed(b)))
                        for b, whole in taken])
                    for (b, whole), table in zip(taken, tables, strict=True):
                        keys[b.relation] = table
                        if whole:
                            arrows[b.relation] = table
            # the rows the join reads at most, as far as known (None: not known), for `small_plan`
            reads: int | None = None if self.outer else sum(counts.values())
            with phase("prune"):
                for b in self.sides:
                    if b.old_view:
                        keeps[b.relation] = keep = self._keep(b, stats.bounds)
                        # a batch that brought the other side no rows matches none of `b`'s
                        # older rows: an empty frame, and the held rows and window stay as
                        # they are for the next batch (reading them would filter out every row)
                        if keep == []:
                            old = clean[b.relation].limit(0)
                        else:
                            wanted = self._wanted(spark, b, keys)
                            old, most = self._older(spark, b, sources[b.relation], batch_id, keep,
                                                    self._probe(spark, b, wanted, clean[b.relation].schema),
                                                    wanted)
                            reads = None if reads is None or most is None else reads + most
                        olds[b.relation] = old
            interpreted = reads is not None and reads <= INTERPRETED_ROWS
            sql = self._bind(clean, olds, interpreted)
            with phase("analyse"), model_errors(plan, sql):  # Spark's analysis error at the model's line
                rows = spark.sql(sql)  # analysed now: the views may be rebound below
            now, pads, dirty = None, [], []
            if self.outer:
                with phase("padding"):
                    rows, now, pads, dirty = self._outer(spark, rows, batch_id, clean, counts,
                                                         stats.max_ingest)
            checked = sink_partitions.check(plan.sink, rows)
            if checked is not None:  # docs/semantics.md, "Partition values"
                # the model's rows are computed once: counting the bad ones fills the cache,
                # the quarantine and the sink write read it (not the join a second time)
                with phase("sink"), small_plan(spark, few, interpreted):  # the cache plans the join
                    checked = checked.persist()
                    self._cached.append(checked)
                    bad = sink_partitions.quarantine_rows(plan, checked, origin=f"batch {batch_id}")
                    n_bad = bad.count()
                if n_bad:
                    with phase("quarantine"):
                        write(spark, quarantine_sink(plan, "append_once", Q.PARTITION_BY), bad,
                              batch=self._id(f"{app}__quarantine::partition", batch_id))
                    quarantined += n_bad
                rows = sink_partitions.clean(checked)
            local = few and sum(pads) <= LOCAL_ROWS
            if not few and sum(counts.values()) <= COUNTED_ROWS:
                with phase("sink"), no_runtime_filter(spark), small_plan(spark, few, interpreted):
                    local = self._few_out(rows, checked is not None)
            if watches is not None:  # the join's job ran every new row: its stats, else a job's
                with phase("stats"):
                    stats = self._watched_stats(watches, stats) or self._stats(sides)
                quarantined += self._quarantine_new(spark, sides, stats, app, batch_id, few, phase)
            reasons = stats.reasons
            # no latest input snapshots built; a small batch's join without adaptive execution
            with phase("sink"), no_runtime_filter(spark), small_plan(spark, few, interpreted):
                written = write(spark, plan.sink, rows, batch=self._id(app, batch_id),
                                known=self._sink_info, local=local)
                if self._sink_info is None:  # (described by the write when it created it)
                    self._sink_info = written.created or deltalog.describe(spark, plan.sink.table)
            if dims is not None and dims.snapshot is not None and (written.version is not None or written.skipped):
                with phase("commit log"):  # the written rows per dimension partition, from the cache
                    dims.counts = snapshot.lineage_counts(plan, rows)
            self._uncache()  # before the state appends (`_uncache`)
            if watches is not None:  # what later batches hold reads the rows without the observation
                clean = {b.relation: Q.clean(sides[k], b, model=plan.model, reason=stats.reason_of.get(k))
                         for k, b in enumerate(self.sides)}
            fault_points.reached("sink", batch_id)
            if self.after_sink:
                self.after_sink(batch_id)
            with phase("state"):
                after, copy = self.ledger.after(batch_id, sources)
                for k, b in enumerate(self.sides):
                    if b.relation in copy and sources[b.relation].since == batch_id - 1 \
                            and self._by_files(spark, b, sources[b.relation], batch_id, k):
                        after[b.relation] = dataclasses.replace(after[b.relation], files=True)
                    if b.relation in copy and counts.get(k):
                        if not after[b.relation].files:  # else the input's own files are the copy
                            table = self.state_tables[b.relation]
                            self._state_location[table] = state.append(
                                spark, table, clean[b.relation], self._id(table, batch_id),
                                indexed=_indexed(b), owner=plan.model,
                                location=self._state_location.get(table), local=few)
                            self._state_exists[table] = True
                        # the same rows, held for the next micro-batches' older rows (`copies`)
                        if self.copies.add(b.relation, batch_id, sides[k], clean[b.relation], counts[k],
                                           extent=self._piece_extent(b, stats),
                                           keys=self._copy_keys(b, keys)):
                            copied.add(k)
                self.ledger.record(batch_id, after)
                if now is not None:
                    self._record(spark, "batch", now)
            fault_points.reached("state", batch_id)
            if self.after_state:
                self.after_state(batch_id)
            with phase("commit log"):
                out = self._log(spark, written, self._id(app, batch_id), dirty, dims=dims,
                                inputs=self._offsets(batch_id), quarantined=quarantined,
                                late=reasons.get("late", 0))
            fault_points.reached("commit_log", batch_id)
            kept = self._hold(batch_id, sides, clean, counts, stats, keeps, arrows)
        finally:
            self._drop_views(spark)  # first: its frames read the new rows (`_uncache`)
            for k, frame in enumerate(sides):
                if k not in kept | copied:
                    frame.unpersist()
        padded_rows = sum(pads)
        report = BatchReport(
            plan.model, batch_id, tuple((b.relation, counts.get(k, 0)) for k, b in enumerate(self.sides)),
            out.rows, quarantined, out.skipped, time.monotonic() - began,
            padded=padded_rows, dirty=tuple((p, r) for p, _, r in dirty), phases=phase.items(),
            reasons=tuple(sorted((k, n) for k, n in reasons.items() if n)),
            newest_ingest_us=max((v for v in stats.max_ingest.values() if v is not None), default=None))
        self._report(report)

    def _few_out(self, rows: DataFrame, cached: bool) -> bool:
        """Whether the model's rows of a batch of many new rows are few enough to be appended
        from the driver (`LOCAL_ROWS`): counted once into the cache the write then reads. A
        catch-up's one batch of a million rows makes tens of thousands; written by Spark they
        are a file per partition in tasks (about 45 ms a file on two cores) after a shuffle,
        by delta-rs the same files in a fraction of that (docs/design.md §2.9)."""
        if not cached:
            rows.persist()
            self._cached.append(rows)
        return rows.count() <= LOCAL_ROWS

    def _quarantine_new(self, spark: SparkSession, sides: list[DataFrame], stats: Stats, app: str,
                        batch_id: int, few: bool, phase: Phases) -> int:
        """Append the new rows the quarantine rule takes (`stats.reasons` says how many) to the
        model's quarantine table, once per batch id; how many."""
        quarantined = sum(stats.reasons.values())
        if quarantined:
            with phase("quarantine"):  # its rows are built only when there are some
                parts = [Q.split(sides[k], b, model=self.plan.model, origin=f"batch {batch_id}").quarantine
                         for k, b in enumerate(self.sides)]
                q_sink = quarantine_sink(self.plan, "append_once", Q.PARTITION_BY)
                write(spark, q_sink, reduce(DataFrame.unionByName, parts),
                      batch=self._id(f"{app}__quarantine", batch_id), local=few)
        return quarantined

    def _bind(self, clean: dict[str, DataFrame], olds: dict[str, DataFrame], interpreted: bool) -> str:
        """Bind each joined input's older rows to its view (and the new rows, for a plan with a
        hash-join form); the SQL that reads them. A join that reads few rows (`interpreted`)
        whose plan has a hash-join form (`planning.delta.hash_join`: an inner join over the
        plan's views that shuffles nothing, no dimension) reads every view as one partition and
        hashes its new rows in the task that reads the older ones, instead of broadcasting them
        in a Spark job each: the same rows, one job of a task per join term."""
        hashed = self.plan.hash_join_sql if interpreted else None
        for b in self.sides:
            if b.relation in olds:
                assert b.old_view is not None  # only a joined input's older rows are read
                views.bind(olds[b.relation].coalesce(1) if hashed else olds[b.relation], b.old_view)
        if self.plan.hash_join_sql is not None:
            self._bind_new(clean, one_partition=hashed is not None)
        return hashed or self.plan.sql

    def _bind_new(self, clean: dict[str, DataFrame], *, one_partition: bool) -> None:
        """Bind each input's clean new rows to its delta view (as one partition: `_bind`)."""
        for b in self.sides:
            assert b.view is not None  # a stream side is read through its delta view
            views.bind(clean[b.relation].coalesce(1) if one_partition else clean[b.relation], b.view)

    def _new_rows(self, spark: SparkSession, df: DataFrame, batch_id: int, k: int) -> DataFrame:
        """Input `k`'s rows of this batch: when they are a whole version of its table
        (`older.new_rows`: a starting snapshot), the files live at that version read as plain
        Parquet (`_own_rows`; a catch-up's one batch plans no Delta snapshot of it) or the table
        read as of the version; none when the batch brought it nothing (the envelope's empty
        slice under `LIMIT 0`, which Spark's optimizer removes from the join; an empty frame
        built by `createDataFrame` cost about 0.1 s a batch on a loaded two-core machine),
        else read from the data files the input's log says it handed the batch (`_own_rows`)
        or, where those are not known or not read exactly as plain Parquet, taken from the
        envelope; flat and cached (a cache of flat columns is scanned far faster than one of
        the envelope's structs). The filter on the envelope's side does not prune the other
        inputs' files: `foreachBatch` hands the batch as one scan of them all (a
        `LogicalRDD`), so an input's cache filled from it reads every file of the batch (an
        event log of the 1M/20 run, 2026-12-06). A table read is cached only
        for an outer join, whose padding and state append read the new rows again; an inner
        join reads them twice (stats, join), and a column-pruned scan costs less than a cache.
        New rows that came in under `input_logs.SMALL_BATCH_BYTES` of files are cached as one
        partition: every later pass over them is one task, not one per file."""
        b = self.sides[k]
        whole, version = older.new_rows(self.checkpoint, batch_id, k)
        if whole and version is not None:
            rows = (self._own_rows(spark, batch_id, k)
                    or older.table_at(spark, b.relation, version, self.schemas[b.relation]))
            return rows.persist() if self.outer else rows
        if whole:  # nothing new on this input: no rows, as the optimizer sees (no scan, no cache)
            return self._envelope_rows(df, k).limit(0)
        rows = self._own_rows(spark, batch_id, k) or self._envelope_rows(df, k)
        size = self.logs.added_bytes(spark, b.relation, self.checkpoint, batch_id, k)
        if size is not None and size <= input_logs.SMALL_BATCH_BYTES:
            rows = rows.coalesce(1)
        return rows.persist()

    @staticmethod
    def _envelope_rows(df: DataFrame, k: int) -> DataFrame:
        """Input `k`'s slice of the micro-batch's envelope, flat (built only where it is read:
        each frame is JVM calls and an analysis)."""
        return df.where(F.col(SIDE) == k).select(f"{side_column(k)}.*")

    def _own_rows(self, spark: SparkSession, batch_id: int, k: int) -> DataFrame | None:
        """Input `k`'s new rows of this batch read from the data files its log says it handed
        the batch (`own_files`), so no job reads the other inputs' files for them; None when
        not known or not read exactly that way."""
        b = self.sides[k]
        partitions = self.logs.plain_parquet(spark, b.relation)
        found = None if partitions is None else self.logs.batch_adds(spark, b.relation, self.checkpoint, batch_id, k)
        if found is None or partitions is None:
            return None
        return own_files.read(spark, found[0], found[1], self.schemas[b.relation], partitions)

    def _older(self, spark: SparkSession, b: SourceBinding, source: older.Source, batch_id: int,
               keep: list[tuple[str, int, int]] | None,
               probe: Callable[[Store], tuple[DataFrame | None, int]] | None = None,
               wanted: Callable[[], pa.Table] | None = None) -> tuple[DataFrame, int | None]:
        """`b`'s older rows (`older.Source`): its clean rows in the table as of the source's
        version plus the copies of later batches, pruned to `keep` (`_keep`); and how many
        rows the join scans for them at most (None: not known; the copies of a state table
        are not counted). The table as of the version is left out when its file statistics
        say no row of it is in `keep` (`_base_may_match`). `probe`: the held batches' rows
        the batch can match and their count, by key (`_probe`), for a run held on the driver;
        `wanted`: the keys it looks them up by (`_wanted`), by which copies are left out too."""
        schema = self.schemas[b.relation]
        where = self._keep_column(b, keep)
        copies = self._copies(spark, b, source, batch_id, where, keep, wanted)
        if source.base is None:
            return copies if copies is not None else state.empty(spark, schema), None
        scanned: list[int | None] = []  # the base version's rows the parts read at most

        def base(run: held.Run) -> list[DataFrame]:
            parts = self._base(spark, b, run, keep)
            scanned.append(self._version_rows(spark, b, run.base, keep) if parts else 0)
            return parts

        lows = None if keep is None else {c.lower(): low for c, low in window.floors(keep, {}).items()}
        handed: list[int] = []  # the held rows a lookup by key handed the join

        def probe_rows(store: Store) -> DataFrame | None:
            assert probe is not None  # (passed only with one)
            frame, rows = probe(store)
            handed.append(rows)
            return frame

        probing = None if probe is None else probe_rows
        parts = self.held.parts(b.relation, source.base, batch_id, base=base, lows=lows, probe=probing)
        if parts is None:  # read the table as of the version (a new Delta snapshot) when needed; hold it
            version = source.base

            def read() -> DataFrame:
                return Q.clean(older.table_at(spark, b.relation, version, schema), b, model=self.plan.model)

            self.held.start(b.relation, version, read, batch_id, keyed=self._key_columns(b))
            parts = self.held.parts(b.relation, version, batch_id, base=base, probe=probing)
            assert parts is not None  # the run just started reaches the version
        parts = [p.where(where) if where is not None else p for p in parts]
        run = self.held.runs[b.relation]
        known = [n for n in scanned if n is not None]
        held_rows = run.rows if run.tables is None else sum(handed)
        most = None if copies is not None or len(known) < len(scanned) else sum(known) + held_rows
        if copies is not None:
            parts.append(copies)
        return (reduce(DataFrame.unionByName, parts) if parts else state.empty(spark, schema)), most

    def _copies(self, spark: SparkSession, b: SourceBinding, source: older.Source, batch_id: int,
                where: Column | None, keep: list[tuple[str, int, int]] | None = None,
                wanted: Callable[[], pa.Table] | None = None) -> DataFrame | None:
        """`b`'s copies in its state table of the batches after `source.since` and before
        `batch_id`, pruned by `where` (`keep` as a filter): from memory when this object
        appended them all (`copies`: those whose range `keep` can match and, by `wanted`, that
        hold a key the batch looks up), else read from the table; None when there are none
        (no state table, or none held)."""
        table = self.state_tables[b.relation]
        found = self.copies.rows(b.relation, source.since, batch_id, keep, wanted)
        if found is None and source.files:
            return self._file_copies(spark, b, source, batch_id, where)
        if found is None:
            if not self._has_state(spark, table):
                return None  # no state table: no copies (`state.older` would be an empty frame)
            return state.older(spark, table, self.schemas[b.relation], batch_id, where,
                               after=source.since, exists=True)
        if not found:
            return None
        schema = self.schemas[b.relation]
        rows = self.copies.union(b.relation, found, lambda f: state.input_columns(f, schema))
        return rows.where(where) if where is not None else rows

    def _by_files(self, spark: SparkSession, b: SourceBinding, source: older.Source, batch_id: int,
                  k: int) -> bool:
        """Whether the run of batches inside a version that `batch_id` begins keeps no copies in
        `b`'s state table: the input's own log names every file the run is handed (after
        `source.base`, `input_logs.InputLogs.run_files`), so a query that does not hold the
        copies reads those files (`_file_copies`). Not for an outer join: its padding reads
        each copy's batch id."""
        return (not self.outer and self.checkpoint is not None
                and self.logs.run_files(spark, b.relation, self.checkpoint, source.base, batch_id, k) is not None)

    def _file_copies(self, spark: SparkSession, b: SourceBinding, source: older.Source, batch_id: int,
                     where: Column | None) -> DataFrame:
        """`_copies` of a run kept as the input's own files (`_by_files`): the clean rows of the
        files `b` handed the query after `source.base` up to the end of the batch before
        `batch_id`, each read at a version where it is live, pruned by `where`."""
        assert self.checkpoint is not None  # (a run is kept as files only with a checkpoint)
        k = self.sides.index(b)
        found = self.logs.run_files(spark, b.relation, self.checkpoint, source.base, batch_id - 1, k)
        log = self.logs.log(spark, b.relation)
        grouped = None if found is None or log is None else source_files.by_version(Path(log).parent, found)
        if grouped is None:
            raise SqlflowError(
                f"input `{b.relation}`: micro-batch {batch_id} cannot name the data files of the batches "
                f"before it from the table's Delta log, and they hold rows the join still needs (the "
                f"log no longer holds those versions, they were rewritten, or two live files share a name)",
                location=Location(self.plan.path),
                hint="rebuild the model from a fresh checkpoint (drop its sink table and its checkpoint folder)")
        schema = self.schemas[b.relation]
        parts = [older.files_at(spark, b.relation, version, [source_files.file_name(a["path"]) for a in adds],
                                schema, partitions=[a.get("partitionValues") or {} for a in adds])
                 for version, adds in sorted(grouped.items())]
        rows = Q.clean(reduce(DataFrame.unionByName, parts), b, model=self.plan.model) if parts \
            else state.empty(spark, schema)
        return rows.where(where) if where is not None else rows

    def _base(self, spark: SparkSession, b: SourceBinding, run: held.Run,
              keep: list[tuple[str, int, int]] | None) -> list[DataFrame]:
        """What the batch reads of the table as of the held run's base version: nothing when
        none of its rows may be in `keep` (`_base_may_match`; a window the run cached is
        released then), else the run's cached window of it when that holds every row `keep`
        keeps, else the table (`window`). The first batch that needs it with a prune range
        opens the window, and reads it."""
        if not self._base_may_match(spark, b, run.base, keep):
            if run.window is not None:
                run.window.release()
                run.window = None
            return []
        if not keep:
            return [run.table()]
        if run.window is None:
            schema = self.schemas[b.relation]
            margin = {r.column.lower(): self._lateness(r.other) for r in b.prune}
            run.window = window.open_window(run.table(), keep, margin, lambda c: _as_timestamp(schema, c),
                                            int(spark.conf.get("spark.sql.shuffle.partitions") or 1))
        return [run.window.rows] if run.window.rows is not None and run.window.serves(keep) else [run.table()]

    def _timestamp_columns(self, b: SourceBinding, keep: list[tuple[str, int, int]] | None) -> tuple[str, ...]:
        """The columns of `keep` that are timestamps (what file statistics can bound)."""
        schema = self.schemas[b.relation]
        return tuple(dict.fromkeys(c for c, _, _ in keep or ()
                                   if isinstance(_field(schema, c).dataType, TimestampType)))

    def _lateness(self, relation: str) -> int:
        """How far (µs) the clean rows of a later batch of `relation` can reach behind an
        earlier batch's: its allowed lateness and future tolerance (`window`)."""
        found = next((s for s in self.sides if s.relation == relation), None)
        return 0 if found is None else found.allowed_lateness_us + found.future_tolerance_us

    def _base_may_match(self, spark: SparkSession, b: SourceBinding, version: int,
                        keep: list[tuple[str, int, int]] | None) -> bool:
        """Whether a row of `b`'s table as of `version` may be in `keep`, by the file
        statistics of that version (`input_logs.InputLogs.extent`): False only when they say
        so, or when the version has no data file."""
        extent = self.logs.extent(spark, b.relation, version, self._timestamp_columns(b, keep))
        if extent is None:
            return True
        if keep is None:
            return extent.files > 0
        return any(extent.may_hold(c, low, high) for c, low, high in keep)

    def _version_rows(self, spark: SparkSession, b: SourceBinding, version: int,
                      keep: list[tuple[str, int, int]] | None) -> int | None:
        """The rows of `b`'s table as of `version`, by its file statistics (the same question
        as `_base_may_match`'s, answered once per version); None when not known."""
        found = self.logs.extent(spark, b.relation, version, self._timestamp_columns(b, keep))
        return None if found is None else found.rows

    def _has_state(self, spark: SparkSession, table: str) -> bool:
        """Whether state table `table` exists, asked once per query: only this query creates
        it (`state.append`, which sets the answer). Not for the steps between micro-batches:
        over Spark Connect the server's batches create it, not this object."""
        if table not in self._state_exists:
            self._state_exists[table] = spark.catalog.tableExists(table)
        return self._state_exists[table]

    def _hold(self, batch_id: int, sides: list[DataFrame], clean: dict[str, DataFrame],
              counts: dict[int, int], stats: Stats,
              keeps: dict[str, list[tuple[str, int, int]] | None],
              arrows: dict[str, pa.Table]) -> set[int]:
        """After a committed micro-batch: add each joined input's clean new rows to its held
        run when the batch started and ended on whole versions (`held.Held.extend`), with the
        range of their prune columns from the stats pass, then let go of the held batches no
        later batch can match (`held.Held.evict`: below this batch's ranges, less the other
        side's lateness, as a window's floors; such a run is `bounded`, not dropped for its
        size); the inputs whose cached new rows the runs keep. A run held on the driver
        (`keyed`) takes the batch's clean rows there, `arrows`."""
        kept = set()
        for k, b in enumerate(self.sides):
            if not b.old_view or self.checkpoint is None:
                continue
            if b.relation not in self.held.runs:
                self._seed(batch_id, k, b, clean[b.relation])
                continue
            start, end = self._versions(batch_id, k)
            keep = keeps.get(b.relation)  # None: not pruned, nothing evicts its rows ([]: not now)
            if self.held.extend(b.relation, batch_id, start, end, sides[k], clean[b.relation],
                                counts.get(k, 0), extent=self._piece_extent(b, stats),
                                bounded=keep is not None, table=arrows.get(b.relation)):
                kept.add(k)
            columns = {r.column.lower() for r in b.prune}
            if keep and columns and columns <= {c.lower() for c, _, _ in keep}:
                margin = {r.column.lower(): self._lateness(r.other) for r in b.prune}
                self.held.evict(b.relation, window.floors(keep, margin))
        return kept

    def _versions(self, batch_id: int, k: int) -> tuple[int | None, int | None]:
        """The whole versions of input `k` that micro-batch `batch_id` began after and ended on
        (`offsets.delivered`; None: inside a version, or no rows yet)."""
        assert self.checkpoint is not None  # (runs are held only with one)
        start = offsets.start_of(self.checkpoint, batch_id, k)
        end = offsets.end_of(self.checkpoint, batch_id, k)
        return (start.version if start else None), (end.version if end else None)

    def _to_run(self, batch_id: int, k: int) -> bool:
        """Whether `_hold` may add input `k`'s clean new rows of this batch to a run held on
        the driver, which then needs every column of them there: only a batch that began and
        ended on whole versions extends a run (`held.Held.extend`). Known before the batch
        reads a row (Spark wrote its offsets first); True also where `extend` may still refuse
        (a run started during this batch is not known yet)."""
        if self.checkpoint is None or not self.sides[k].old_view:
            return False
        start, end = self._versions(batch_id, k)
        return start is not None and end is not None and start != end

    def _probed(self, b: SourceBinding) -> list[str]:
        """`b`'s columns that `_probe` looks the other input's held rows up by (the other
        input's `_keyed` pairs, whose second column is `b`'s): all a batch that extends no run
        needs of `b`'s new rows on the driver."""
        assert self._lookups is not None, "`_keyed` runs first, at the start of every micro-batch"
        return list(dict.fromkeys(theirs for other in self.sides
                                  if other is not b and b.relation in {p.other for p in other.keys}
                                  for _, theirs in self._lookups.get(other.relation, ())))

    def _keyed(self, spark: SparkSession) -> dict[str, tuple[tuple[str, str], ...]]:
        """Per joined input whose held rows are looked up by key (`keyed`), the pairs (its
        column, the other input's) it is looked up by. Only on the embedded `local` target
        (the driver is where the rows are), for an inner join of two streams whose prune
        ranges are in use (`_ranges`: the rows a batch can match are those the other side's
        new rows can), and a checkpoint (runs are held only with one). Decided once."""
        if self._lookups is None:
            self._lookups = {}
            if not self.outer and self._ranges() and self.checkpoint is not None and _embedded(spark):
                joined = {b.relation for b in self.sides if b.old_view}
                for b in self.sides:
                    others = {p.other for p in b.keys}
                    if b.relation not in joined or len(others) != 1 or not others <= joined:
                        continue
                    other = next(iter(others))
                    pairs = keyed.usable(b.keys, self.schemas[b.relation], self.schemas[other])
                    if pairs:
                        self._lookups[b.relation] = pairs
        return self._lookups

    def _key_columns(self, b: SourceBinding) -> tuple[str, ...]:
        """`b`'s columns its held rows are looked up by (`_keyed`, decided at the query's first
        micro-batch before anything is held; none: held in Spark)."""
        assert self._lookups is not None, "`_keyed` runs first, at the start of every micro-batch"
        return tuple(mine for mine, _ in self._lookups.get(b.relation, ()))

    def _wanted(self, spark: SparkSession, b: SourceBinding, keys: dict[str, pa.Table]
                ) -> Callable[[], pa.Table] | None:
        """The keys of this batch's new rows of the other input that `b`'s older rows are looked
        up by (`keyed.keys_of`, named as `b`'s columns), computed at the first call only: a
        batch that looks up no held batch and no copy of `b` (`_probe`, `copies`) never asks.
        None when `b` is not looked up by key or the batch took no rows to the driver (`keys`:
        per input, its clean new rows there, at least the columns looked up by)."""
        pairs = self._keyed(spark).get(b.relation)
        other = next((p.other for p in b.keys), None)
        if not pairs or other not in keys or b.relation not in keys:
            return None
        new = keys[other]
        return functools.cache(lambda: keyed.keys_of(new, pairs))

    def _probe(self, spark: SparkSession, b: SourceBinding, wanted: Callable[[], pa.Table] | None,
               schema: StructType) -> Callable[[Store], tuple[DataFrame | None, int]] | None:
        """For `b`'s run held on the driver, the lookup of its held batches' rows that this
        batch's new rows of the other input can match (`key_index.Store.matching`: those of
        the keys `wanted` gives, `_wanted`), as a frame of `schema` (None: no row) and their
        count; None without `wanted`."""
        if wanted is None:
            return None

        def lookup(store: Store) -> tuple[DataFrame | None, int]:
            found = store.matching(wanted())
            if found is None or not found.num_rows:
                return None, 0
            return spark.createDataFrame(found, schema=schema), found.num_rows
        return lookup

    def _copy_keys(self, b: SourceBinding, keys: dict[str, pa.Table]) -> pa.Table | None:
        """The columns of `b`'s clean new rows on the driver (`keys`) that its older rows are
        looked up by (`_key_columns`), for `copies` to leave out a copy that holds none of a
        later batch's keys; None when `b` is not looked up by key or they are not there."""
        columns = self._key_columns(b)
        table = keys.get(b.relation)
        if not columns or table is None or not set(columns) <= set(table.column_names):
            return None
        return table.select(list(columns))

    def _seed(self, batch_id: int, k: int, b: SourceBinding, clean: DataFrame) -> None:
        """Start `b`'s held run from this micro-batch when its new rows were the whole table
        as of a version (a query's first batch, `older.new_rows`): the next batch's older rows
        are that version's clean rows, `clean` itself, read through the frame this batch built
        (its Delta snapshot built once, not again for the next batch). Not for an outer join,
        whose older rows are its copies (`older`)."""
        if self.outer:
            return
        whole, version = older.new_rows(self.checkpoint, batch_id, k)
        if whole and version is not None:
            self.held.start(b.relation, version, lambda: clean, batch_id + 1,
                            keyed=self._key_columns(b))

    def _piece_extent(self, b: SourceBinding, stats: Stats) -> held.Extent | None:
        """The range of `b`'s prune columns over its clean new rows of the batch, from the
        stats pass (which measures each input's columns the other side's ranges are on);
        None when a column is not among them, or the batch brought no clean row."""
        found: held.Extent = {}
        for r, span in stats.bounds.items():
            if r.other == b.relation:
                found[r.other_column.lower()] = span
        columns = {r.column.lower() for r in b.prune}
        if not columns or not columns <= set(found):
            return None
        return {c: found[c] for c in columns}

    def _id(self, app: str, batch_id: int, step: int | None = None) -> BatchId:
        """The identity of an exactly-once append of batch `step` (default: `batch_id`), with
        the query's journal when it decides that batch (`once.Journal.decides`)."""
        journal = self.journal
        if journal is not None and not journal.decides(batch_id if step is None else step):
            journal = None
        return BatchId(app, batch_id, journal)

    def _report(self, report: BatchReport) -> None:
        self.reports.append(report)
        if self.on_batch:
            self.on_batch(report)

    def release(self) -> None:
        """The query has ended: let go of the older rows held for its next micro-batch."""
        self.held.clear()
        self.copies.clear()
        self.side_jobs.close()

    def _uncache(self) -> None:
        """Let go of the step's cached frames (padding, checked rows), newest first.

        Spark plans a cached frame again whenever a table it reads is written (it re-caches
        every cached plan over the table an append wrote) and whenever a frame it reads is
        uncached before it. An outer join's pending and padded rows read its state tables,
        which the step appends to after the sink: held until the end of the step, they were
        planned again at each state append and at each earlier uncache, a Delta file-skipping
        job on the state table each time (about ten per micro-batch, 1-2 s). So they are
        released once the sink is written, dependents first."""
        for frame in reversed(self._cached):
            frame.unpersist()
        self._cached.clear()

    def _drop_views(self, spark: SparkSession) -> None:
        self._uncache()
        for b in self.sides:
            for view in (b.view, b.old_view, b.pending_view):
                if view:
                    spark.catalog.dropTempView(view)

    # --- outer joins ------------------------------------------------------------------------------

    def _outer(self, spark: SparkSession, rows: DataFrame, batch_id: int,
               clean: dict[str, DataFrame], counts: dict[int, int],
               max_ingest: dict[str, int | None]):
        """The batch's rows plus the padded rows this step closes; the step's progress; the
        padded row counts; and the dirty partitions a new row reveals."""
        prev = self._progress_before(spark, batch_id)
        now = padding.advance(prev, self.outer, self.sides, batch_id, max_ingest)
        index = {b.relation: k for k, b in enumerate(self.sides)}
        dirty = []
        for side in self.outer:
            closed_any = prev.cutoff_of(side.binding.relation) is not None or prev.flushed >= 0
            if closed_any and counts.get(index[side.other.relation]):
                dirty += self._diverged(spark, side, batch_id, clean[side.other.relation], prev)
        frames, pads = [rows], []
        for side in self.outer:
            if now.cutoff_of(side.binding.relation) is None and now.flushed == prev.flushed:
                pads.append(0)  # no frontier of the other side yet: nothing closes
                continue
            pending = padding.pending_of(
                spark, side, self.state_tables, self.schemas, batch_id, clean[side.binding.relation],
                prev, now, exists=self._has_state(spark, self.state_tables[side.binding.relation])).persist()
            other = padding.other_rows(spark, side, self.state_tables, self.schemas, batch_id, pending,
                                       exists=self._has_state(spark, self.state_tables[side.other.relation]))
            pad = padding.padded(spark, side, state.input_columns(pending, self.schemas[side.binding.relation]),
                                 other, clean[side.other.relation]).persist()
            self._cached += [pending, pad]
            pads.append(pad.count())
            frames.append(pad)
        return reduce(DataFrame.unionByName, frames), now, pads, dirty

    def _stats(self, sides: list[DataFrame]) -> Stats:
        """What the step needs to know about its new rows, in ONE Spark job over the batch:
        rows per input, quarantine reasons, the event-time range of each prune range's other
        side and each input's max ingest time (both over clean rows). Each input is one global
        aggregate of conditional counts and extremes: no grouping key, so no hash table."""
        ranges = self._ranges()
        frames, stats = [], Stats()
        for k, rows in enumerate(sides):
            aggs, stats.reason_of[k], _values = self._stat_columns(k, rows, ranges)
            frames.append(rows.agg(*aggs))
        with unadaptive(sides[0].sparkSession):  # one Spark job, not one per query stage
            found = reduce(DataFrame.unionByName, frames).collect()
        for g in found:
            k = g["side"]
            stats.add(k, self.sides[k].relation, g["n"], {why: g[why] for why in Q.REASONS}, g["ingest"],
                      {j: (g[f"low{j}"], g[f"high{j}"]) for j in range(len(ranges))}, ranges)
        stats.settle(self.sides)
        return stats

    def _arrow_stats(self, spark: SparkSession, batch_id: int, sides: list[DataFrame]
                     ) -> tuple[Stats, dict[str, pa.Table], dict[str, pa.Table]] | None:
        """`_stats` of a small batch whose every input is held by key on the driver (`_keyed`),
        counted on the driver from the rows that go there anyway: each input's new rows are
        taken to the driver once (`toArrow`, the job that also fills their cache), with the
        quarantine reason and the values the stats' aggregates take extremes of computed by
        Spark beside them (the same column expressions, `_stat_columns`); the counts, reasons
        and extremes are read from those columns, and the clean rows are the rows without a
        reason. One Spark job per input instead of the stats job plus one per input held by
        key, the inputs' jobs at once (`side_jobs`). Returns the stats, per input the clean
        rows when a held run may take them (`_to_run`: every column), and per input the clean
        rows' columns `_probe` reads (all of them when taken whole): a batch that begins or
        ends inside a version takes only those, the rest of each row stays in Spark (1M rows
        in 20 micro-batches: the stats phase about 0.05 s less a batch, 2026-12-06, README).
        None when it does not apply: an outer join, inputs held in Spark, or more than
        `LOCAL_ROWS` new rows in all, or a count the inputs' logs do not give
        (`InputLogs.batch_rows`: known before any row is read)."""
        keyed = self._keyed(spark)
        if self.outer or not self.held.on_driver or any(b.relation not in keyed for b in self.sides):
            return None
        total = 0
        for k, b in enumerate(self.sides):
            n = self.logs.batch_rows(spark, b.relation, self.checkpoint, batch_id, k)
            if n is None:
                return None
            total += n
        if total > LOCAL_ROWS:
            return None
        ranges, stats, arrows, keys = self._ranges(), Stats(), {}, {}
        frames, picked = [], []  # per input: what goes to the driver, and how it is read back
        for k, b in enumerate(self.sides):
            _aggs, reason, values = self._stat_columns(k, sides[k], ranges)
            stats.reason_of[k] = reason
            whole = self._to_run(batch_id, k)
            columns = sides[k].columns if whole else self._probed(b)
            frames.append(sides[k].select(*columns, reason.alias(_REASON),
                                          *[v.alias(f"{_VALUE}{name}") for name, v in values.items()]))
            picked.append((whole, columns, list(values)))
        tables = self.side_jobs.to_arrow(spark, frames)  # one job per input, at once
        for k, b in enumerate(self.sides):
            (whole, columns, names), table = picked[k], tables[k]
            counted = arrow_stats.count(table, _REASON, {name: f"{_VALUE}{name}" for name in names})
            stats.add(k, b.relation, table.num_rows, counted.reasons, counted.highs.get("ingest"),
                      {j: (counted.lows.get(f"range{j}"), counted.highs.get(f"range{j}"))
                       for j in range(len(ranges))}, ranges)
            keys[b.relation] = counted.rows.select(columns)
            if whole:
                arrows[b.relation] = keys[b.relation]
        stats.settle(self.sides)
        return stats, arrows, keys

    def _watched(self, spark: SparkSession, batch_id: int, sides: list[DataFrame],
                 sources: dict[str, older.Source]
                 ) -> tuple[Stats, list[DataFrame], dict[int, watched.Watch]] | None:
        """`_stats` of a batch of many new rows counted by the job that computes its join
        (`watched`) instead of a job before it: each input's new rows observed with the stats'
        own aggregates (`_stat_columns`). Before the join only what the input logs give is
        known (the rows per input: `InputLogs.batch_rows`), so it applies where nothing else
        is needed first: an inner join whose joined inputs have no older rows yet (their prune
        ranges would need the new rows' event times: a catch-up's first batch), of more than
        `LOCAL_ROWS` new rows (the count of the output, `_few_out`, runs the join before any
        write) up to `COUNTED_ROWS`, on a session with a JVM here (observations are not read
        over Spark Connect). Returns the stats known so far (rows per input, reason columns),
        the new rows to join (observed) and each observed input's `Watch`; the quarantine
        waits for the join's job (`_watched_stats`). None: count first, as before."""
        if self.outer or self.checkpoint is None or getattr(spark, "_jvm", None) is None:
            return None
        if any(s.base is not None or s.since != batch_id - 1 for s in sources.values()):
            return None
        rows = [self.logs.batch_rows(spark, b.relation, self.checkpoint, batch_id, k)
                for k, b in enumerate(self.sides)]
        known = [n for n in rows if n is not None]
        if len(known) < len(rows) or not LOCAL_ROWS < sum(known) <= COUNTED_ROWS:
            return None
        ranges, stats, joined, watches = self._ranges(), Stats(), list(sides), {}
        for k, n in enumerate(known):
            aggs, stats.reason_of[k], _values = self._stat_columns(k, sides[k], ranges)
            stats.rows[k] = n
            if n:
                joined[k], watches[k] = watched.watch(sides[k], aggs)
        return stats, joined, watches

    def _watched_stats(self, watches: dict[int, watched.Watch], known: Stats) -> Stats | None:
        """The stats the join's job observed (`_watched`; `known`: what it knew before): None
        when an input's observed rows are not the rows its log gave for the batch (not run,
        or not all)."""
        ranges, stats = self._ranges(), Stats(reason_of=dict(known.reason_of))
        for k, b in enumerate(self.sides):
            g = watches[k].found() if k in watches else {"n": 0}
            if g is None or g["n"] != known.rows.get(k, 0):
                return None
            stats.add(k, b.relation, g["n"], {why: g.get(why, 0) for why in Q.REASONS}, g.get("ingest"),
                      {j: (g.get(f"low{j}"), g.get(f"high{j}")) for j in range(len(ranges))}, ranges)
        stats.settle(self.sides)
        return stats

    def _log_stats(self, spark: SparkSession, batch_id: int) -> Stats | None:
        """`_stats` without a Spark job, from the Delta statistics of the files each input's new
        rows came in, when they prove every new row clean (`log_stats`); None: they do not
        (or are not known here, or the join is an outer one), and `_stats` counts."""
        if self.outer or self.checkpoint is None:
            return None
        ranges = self._ranges()
        stats = Stats(proven_clean=True)
        for k, b in enumerate(self.sides):
            rule = self._rule(b, ranges)
            adds = None if rule is None else self.logs.new_files(spark, b.relation, self.checkpoint, batch_id, k)
            found = None if rule is None or adds is None else log_stats.prove_clean(adds, rule)
            if found is None:
                return None
            stats.rows[k] = found.rows
            if found.rows and b.ingest_time:
                stats.max_ingest[b.relation] = found.newest_ingest_us
            for r in ranges:
                if found.rows and r.other == b.relation and r.other_column.lower() in found.ranges:
                    stats.bounds[r] = found.ranges[r.other_column.lower()]
        stats.settle(self.sides)
        return stats

    def _rule(self, b: SourceBinding, ranges: list[PruneRange]) -> log_stats.Rule | None:
        """What `log_stats` must prove of `b`'s new rows; None when its statistics cannot prove
        it: an event time, ingest time or ranged column that is not a TIMESTAMP (a STRING's
        statistics are not in time order), a declared column the rows lack (`_stats` says so),
        or a Kafka payload's error column (a reason no statistic rules out)."""
        fields = {f.name.lower(): f for f in self.schemas[b.relation].fields}
        ingest = (b.ingest_time or "").lower() or None
        ranged = tuple(dict.fromkeys(r.other_column.lower() for r in ranges if r.other == b.relation))
        needed = [(b.event_time or "").lower(), *ranged] + ([ingest] if ingest else [])
        if Q.KAFKA_ERROR.lower() in fields or not all(
                c in fields and isinstance(fields[c].dataType, TimestampType) for c in needed):
            return None
        return log_stats.Rule(needed[0], ingest, b.allowed_lateness_us, b.future_tolerance_us, ranged)

    def _stat_columns(self, k: int, rows: DataFrame, ranges: list[PruneRange]
                      ) -> tuple[list[Column], Column, dict[str, Column]]:
        """Input `k`'s aggregates for `_stats`, its quarantine reason column and the per-row
        values the aggregates take extremes of (`_arrow_stats` reads those), built at the
        query's first micro-batch and reused by every later one (per column layout of the new
        rows): expressions by column name, valid over any batch's rows. Building them costs
        about 1,100 JVM round trips per micro-batch of a two-input join (each `functions` call
        looks up the active session), more than the stats job itself on a small batch."""
        key = (k, rows.schema.simpleString())
        if key not in self._stat_memo:
            b = self.sides[k]
            times = Q.event_times(rows, b, model=self.plan.model)
            reason = Q.reason_of(times, b)
            clean = reason.isNull()
            # per row, over clean rows only (NULL otherwise): what the aggregates take extremes of
            values = {"ingest": F.when(clean, F.unix_micros(times.ingest))}
            values.update({f"range{j}": F.when(clean, _micros(rows, r.other_column))
                           for j, r in enumerate(ranges) if r.other == b.relation})
            aggs = [F.lit(k).alias("side"), F.count(F.lit(1)).alias("n"), F.max(values["ingest"]).alias("ingest")]
            aggs += [F.count_if(reason == r).alias(r) for r in Q.REASONS]
            for j, _r in enumerate(ranges):
                v = values.get(f"range{j}", F.lit(None).cast("bigint"))
                aggs += [F.min(v).alias(f"low{j}"), F.max(v).alias(f"high{j}")]
            self._stat_memo[key] = (aggs, reason, values)
        return self._stat_memo[key]

    def _ranges(self) -> list[PruneRange]:
        """The prune ranges in use: only for a model with one join of two streams (with more,
        a range against one side would hide old rows another side's new rows need)."""
        if len(self.state_tables) != 2:
            return []
        return [r for b in self.sides for r in b.prune]

    def _diverged(self, spark: SparkSession, side: padding.Side, batch_id: int,
                  new: DataFrame, prev: padding.Progress) -> list[tuple[str, int, str]]:
        """Partitions of padded rows (of P's rows closed before this batch, with no match
        among O's older rows) that O's new rows match: (partition, rows, reason)."""
        p, o = side.binding, side.other
        ps, os_ = self.schemas[p.relation], self.schemas[o.relation]
        assert p.event_time is not None and o.event_time is not None  # an interval join's sides
        low, high = padding.time_range(new, os_, o.event_time)
        if low is None or not self._has_state(spark, self.state_tables[p.relation]):
            return []
        assert high is not None  # min and max are None together
        t = padding.micros_of(ps, p.event_time)
        a = F.col(state.BATCH_COLUMN)
        closed = (spark.table(self.state_tables[p.relation])
                  .where((a < batch_id) & prev.closed_for(p.relation, a, t)
                         & padding.between(ps, p.event_time, low - side.upper_us, high - side.lower_us)))
        closed = state.input_columns(closed, ps).persist()
        try:
            span = padding.time_range(closed, ps, p.event_time)  # one job: any rows, and their range
            if span[0] is None:
                return []
            old = padding.other_rows(spark, side, self.state_tables, self.schemas, batch_id, closed,
                                     exists=self._has_state(spark, self.state_tables[o.relation]),
                                     span=span)
            emitted = padding.padded(spark, side, closed, old, state.empty(spark, os_))
            still = padding.padded(spark, side, closed, old, new)
            gone = emitted.exceptAll(still)
            keys = [F.col(quote_ident(c)) for c in self.plan.sink.partition_by]
            groups = (gone.groupBy(*keys).count().collect() if keys
                      else [r for r in [gone.agg(F.count(F.lit(1)).alias("count")).collect()[0]]
                            if r["count"]])
        finally:
            closed.unpersist()
        out = []
        for g in groups:
            spec = commitlog.partition_spec({c: g[c] for c in self.plan.sink.partition_by})
            n = g["count"]
            out.append((spec, n, f"{n} row(s) of `{p.relation}` were emitted padded before a "
                                 f"matching `{o.relation}` row arrived in micro-batch {batch_id} "
                                 "(it was not late by its own ingest time)"))
        return out

    # --- steps between micro-batches ------------------------------------------------------------

    def flush(self) -> BatchReport | None:
        """End of a bounded run: pad every pending row; None when there is nothing to close
        (no outer join, no batch yet, or flushed already: a restart pads nothing twice)."""
        if not self.outer:
            return None
        assert self.spark is not None  # given where the query starts
        with self.lock:
            prev = padding.read_progress(self.spark, self.progress)
            return self._close("flush", prev, padding.flush(prev))

    def idle_check(self, settled: Callable[[], bool],
                   last_rows: dict[str, float] | None = None) -> BatchReport | None:
        """Pad what an idle input's timeout closes (see `padding.idle`); `settled` says no
        micro-batch is in flight or waiting for its replay. `last_rows`: when each input last
        brought rows, when the batches do not run here (over Spark Connect, read from the
        offset log: `runtime.input_activity`); else as the batches noted it."""
        timeout = self.plan.idle_timeout_us
        if not self.outer or timeout is None:
            return None
        now = time.monotonic()
        seen = self.last_rows if last_rows is None else last_rows
        idle = {r for r, t in seen.items() if (now - t) * 1e6 >= timeout}
        if not idle:
            return None
        with self.lock:
            if not settled():
                return None
            assert self.spark is not None  # given where the query starts
            prev = padding.read_progress(self.spark, self.progress)
            return self._close("idle", prev, padding.idle(prev, self.outer, idle))

    def idle_due(self, idle: set[str]) -> bool:
        """Whether an idle step for the inputs `idle` would move a preserved side's cutoff
        (`padding.idle`), read from the progress table: it writes nothing and takes no lock,
        so it may run beside a micro-batch (the stream service over Spark Connect asks it
        before it stops a query for the step, docs/deploy.md)."""
        if not self.outer or not idle:
            return False
        assert self.spark is not None  # given where the query starts
        prev = padding.read_progress(self.spark, self.progress)
        return padding.idle(prev, self.outer, idle) is not None

    def redo(self) -> BatchReport | None:
        """At start: write again the last recorded flush/idle step (recorded first, written
        second); its write is skipped when its commit is there."""
        if not self.outer:
            return None
        assert self.spark is not None  # given where the query starts
        last = padding.unfinished_step(self.spark, self.progress)
        if last is None:
            return None
        b, s, kind = last
        prev = padding.read_progress(self.spark, self.progress, before=(b, s))
        now = padding.read_progress(self.spark, self.progress, before=(b, s + 1))
        with self.lock:
            return self._write_close(kind, prev, now)

    def _close(self, kind: str, prev: padding.Progress, now: padding.Progress | None) -> BatchReport | None:
        if now is None:
            return None
        assert self.spark is not None  # given where the query starts
        self._record(self.spark, kind, now)
        return self._write_close(kind, prev, now)

    def _record(self, spark: SparkSession, kind: str, now: padding.Progress) -> None:
        """Record a step's progress in the progress table, and keep it for the next batch."""
        self._recorded = None  # unknown until the record is committed
        padding.record(spark, self.progress, now.batch, now.seq, kind, now, self.plan.model,
                       exists=self._progress_exists)
        self._progress_exists = True
        self._recorded = ((now.batch, now.seq), now)

    def _progress_before(self, spark: SparkSession, batch_id: int) -> padding.Progress:
        """The progress of the steps recorded before micro-batch `batch_id`. While a query runs,
        only its own function records steps (the run lock keeps other runs out; over Spark
        Connect the client's idle step runs with the query stopped, and the restarted query
        builds a new function), so the last step this object recorded, when it came before
        the batch, is what the progress table says. Otherwise (the query's first batch, a
        batch replayed after its own step was recorded) the table is read."""
        if self._recorded is not None and self._recorded[0] < (batch_id, 0):
            return self._recorded[1]
        return padding.read_progress(spark, self.progress, before=(batch_id, 0))

    def _write_close(self, kind: str, prev: padding.Progress, now: padding.Progress) -> BatchReport:
        began = time.monotonic()
        spark, plan = self.spark, self.plan
        assert spark is not None  # given where the query starts
        frames = []
        try:
            for side in self.outer:
                o = side.other
                pending = padding.pending_of(spark, side, self.state_tables, self.schemas,
                                             now.batch, None, prev, now).persist()
                self._cached.append(pending)
                other = padding.other_rows(spark, side, self.state_tables, self.schemas,
                                           now.batch + 1, pending)
                frames.append(padding.padded(
                    spark, side, state.input_columns(pending, self.schemas[side.binding.relation]),
                    other, state.empty(spark, self.schemas[o.relation])))
            batch = self._id(f"{self.app_id()}__close", now.batch * padding.CLOSE_STEP + now.seq,
                             step=now.batch)
            out = write(spark, plan.sink, reduce(DataFrame.unionByName, frames), batch=batch)
            out = self._log(spark, out, batch, [], inputs={}, quarantined=0, late=0)
            padding.mark_done(spark, self.progress, now.batch, now.seq, kind, plan.model)
            self._progress_exists = True
        finally:
            self._drop_views(spark)
        report = BatchReport(plan.model, now.batch, (), out.rows, 0, out.skipped,
                             time.monotonic() - began, kind=kind, padded=out.rows)
        self._report(report)
        return report

    # --- commit log -------------------------------------------------------------------------------

    def _log(self, spark: SparkSession, out: WriteResult, batch: BatchId,
             dirty: list[tuple[str, int, str]], dims: snapshot.StreamBatch | None = None,
             **fields) -> WriteResult:
        """The commit-log rows of one sink write (and its dirty partitions), once per batch id:
        ONE append, so every row of the batch lands or none. A replayed write was skipped by
        Delta: its partitions are read from its commit, and returned (marked skipped) for the
        batch's report. `dims`: the micro-batch's pinned dimension snapshot (its rows carry the
        dimension partitions used and the provisional flag, docs/design.md §2.3)."""
        if out.skipped and out.version is None and batch.journal is None:
            # Delta's `txn` skipped the append: find the commit that holds the batch. With the
            # journal a replay comes back with its commit's version, so no version here means
            # the write had no rows (docs/semantics.md, "Stream runs")
            found = _find_commit(spark, self.plan.sink, batch)
            out = dataclasses.replace(found, skipped=True) if found else out
        entries = []
        fields.update(run_id=batch.app_id, batch_id=batch.batch_id)
        if dims is not None:
            entries = snapshot.end(spark, self.plan, out, dims, **fields) or []
        if out.version is not None and not entries:
            entries = commitlog.write_entries(out, mode="stream", model=self.plan.model, **fields)
        entries += [commitlog.Entry(self.plan.sink.table, spec, "dirty", "stream", self.plan.model,
                                    run_id=batch.app_id, batch_id=batch.batch_id, rows=n, reason=why)
                    for spec, n, why in dirty]
        if entries and self._log_location is None:
            self._log_location = commitlog.folder(spark)
        commitlog.append(spark, entries, batch=batch, location=self._log_location)
        return out

    def _offsets(self, batch_id: int) -> dict[str, dict]:
        """Each input's Delta source offsets before and after this batch (from the
        checkpoint's `offsets/<id>` files; `{}` when unknown)."""
        if self.checkpoint is None:
            return {}
        end, start = offsets.read(self.checkpoint, batch_id), offsets.read(self.checkpoint, batch_id - 1)
        out = {}
        for k, b in enumerate(self.sides):
            if k < len(end):
                out[b.relation] = {"start": _plain(start[k]) if k < len(start) else None,
                                   "end": _plain(end[k])}
        return out

    def _keep(self, b: SourceBinding, bounds: dict[PruneRange, tuple[int, int]]) -> list[tuple[str, int, int]] | None:
        """The older rows of `b` that the other side's new rows can match: a row is kept when
        one of these `(column, low, high)` holds its column's µs in `[low, high]` (its prune
        ranges over the other side's event-time range `bounds`, from `_stats`; a range whose
        other side brought no rows keeps nothing); None: no pruning."""
        if not b.prune or not self._ranges():  # one rule for when pruning applies
            return None
        return [(r.column, bounds[r][0] + r.lower_us, bounds[r][1] + r.upper_us)
                for r in b.prune if r in bounds]

    def _keep_column(self, b: SourceBinding, keep: list[tuple[str, int, int]] | None) -> Column | None:
        """`keep` (`_keep`) as a filter on `b`'s rows; None: no pruning."""
        if keep is None:
            return None
        out = F.lit(False)
        for column, low, high in keep:
            out = out | _as_timestamp(self.schemas[b.relation], column).between(
                F.timestamp_micros(F.lit(low)), F.timestamp_micros(F.lit(high)))
        return out


@dataclass
class Stats:
    """`MicroBatch._stats`: rows per input index, quarantine rows per reason, (min, max) µs of
    each prune range's other side, max ingest µs per input (clean rows; None: no rows), and
    each input's quarantine reason column (`quarantine.reason_of`, by column name: built at the
    query's first micro-batch, `MicroBatch._stat_columns`, and valid over every batch's rows)."""

    rows: dict[int, int] = dataclasses.field(default_factory=dict)
    reason_of: dict[int, Column] = dataclasses.field(default_factory=dict)
    reasons: dict[str, int] = dataclasses.field(default_factory=dict)
    bounds: dict[PruneRange, tuple[int, int]] = dataclasses.field(default_factory=dict)
    max_ingest: dict[str, int | None] = dataclasses.field(default_factory=dict)
    proven_clean: bool = False  # from the files' statistics: every new row is clean (`log_stats`)

    def add(self, k: int, relation: str, rows: int, reasons: dict[str, int], ingest: int | None,
            extremes: dict[int, tuple[int | None, int | None]], ranges: list[PruneRange]) -> None:
        """Input `k`'s counts, however counted (`MicroBatch._stats`, `_arrow_stats`): its rows,
        its quarantined rows per reason, and over its clean rows (if any) its newest ingest
        time and the (lowest, highest) of each prune range `j` whose other side it is."""
        self.rows[k] = rows
        for why, n in reasons.items():
            if n:
                self.reasons[why] = self.reasons.get(why, 0) + n
        if rows > sum(reasons.values()):  # the input has clean rows
            self.max_ingest[relation] = ingest
            for j, r in enumerate(ranges):
                low, high = extremes.get(j, (None, None))
                if r.other == relation and low is not None and high is not None:
                    self.bounds[r] = (low, high)

    def settle(self, sides: list[SourceBinding]) -> None:
        """Every input with an ingest time has an entry in `max_ingest` (None: no clean row)."""
        for b in sides:
            if b.ingest_time:
                self.max_ingest.setdefault(b.relation, None)


def _embedded(spark: SparkSession) -> bool:
    """Whether `spark` is the embedded `local` target's session: a JVM in this process
    running `local` Spark (not Spark Connect, not a cluster's driver)."""
    if getattr(spark, "_jvm", None) is None:
        return False
    master = spark.sparkContext.master or ""
    return master == "local" or master.startswith("local[")  # (`local-cluster` has executors)


def _indexed(b: SourceBinding) -> tuple[str, ...]:
    """The columns of `b`'s state rows that are filtered on: its event time, its prune columns."""
    return tuple(c for c in (b.event_time, *(r.column for r in b.prune)) if c)


def _plain(offset: offsets.Offset | None) -> dict | None:
    """An offset as the commit log's `inputs` records it."""
    return None if offset is None else {"version": offset.version, "index": offset.index}


def _find_commit(spark: SparkSession, sink: Sink, batch: BatchId, look_back: int = 50) -> WriteResult | None:
    """The WriteResult of the sink commit made by `batch` (its marker or Delta `txn` action,
    `once.find`), searched in the table's last `look_back` commits."""
    latest = deltalog.latest_version(spark, sink.table)
    if latest is None:
        return None
    location = deltalog.describe(spark, sink.table).location
    version = once.find(spark, sink.table, location, batch.app_id, batch.batch_id,
                        after=max(-1, latest - look_back), latest=latest)
    return None if version is None else committed(spark, sink, version, location)


def _micros(df: DataFrame, name: str) -> Column:
    return F.unix_micros(_as_timestamp(df.schema, name))


def _field(schema: StructType, name: str) -> StructField:
    return next(f for f in schema.fields if f.name.lower() == name.lower())


def _as_timestamp(schema: StructType, name: str) -> Column:
    field = _field(schema, name)
    column = F.col(quote_ident(field.name))
    return column if isinstance(field.dataType, TimestampType) else column.cast("timestamp")
