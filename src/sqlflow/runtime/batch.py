"""The batch runtime: run a model's `BatchPlan` as a backfill. Its output is the reference a
stream of the same input must equal (docs/semantics.md, "What identical means").

For each model, on one SparkSession:
1. read every input at one pinned Delta version; an input that would stream goes through the
   quarantine filter (`sqlflow.runtime.quarantine`) and its clean rows become the plan's
   clean view;
2. write the quarantine rows to `<model>__quarantine`;
3. run `plan.sql` and write the sink (`sqlflow.runtime.delta.sinks`).

How many rows each input sends to the quarantine decides step 2 (nothing to write when there
are none and the table holds none). A whole run into an existing Delta sink counts them while
the sink write reads the inputs (`sqlflow.runtime.observed_reasons`), so steps 2 and 3 swap:
the sink first, then the quarantine, with no job of its own to count; any other run, or
counts that cannot be proven whole, asks first in one job, as step 2.

Routed groups run in `sqlflow.runtime.routed.routing`; `sqlflow.runtime.dispatch` picks.

A backfill range `[start, end]` (inclusive dates of the sink's first partition column) is
written with a Delta `replaceWhere` over exactly that range, so partitions outside it are never
touched and a partition of the range that has no rows any more is emptied. When the plan's
`backfill_margin_us` is known, event inputs are read pruned to
`[start - margin, end + 1 day + margin)` of their event time; otherwise they are read whole and
only the output is filtered. Both give the same rows (tests/runtime/test_batch_run.py).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from datetime import date, timedelta
from functools import partial, reduce

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from sqlflow.engine.context import Context
from sqlflow.errors import Location, SqlflowError
from sqlflow.planning.plan import COMMIT_LOG, BatchPlan
from sqlflow.runtime import (
    dbt_incremental,
    fault_points,
    input_rows,
    observed_reasons,
    sink_partitions,
    snapshot,
)
from sqlflow.runtime import quarantine as Q
from sqlflow.runtime.analysis_errors import model_errors
from sqlflow.runtime.delta.deltalog import TableInfo, holds_no_files, latest_version, locate
from sqlflow.runtime.delta.sinks import WriteResult, write
from sqlflow.runtime.env_errors import environment_problem, written_paths
from sqlflow.runtime.inputs import range_predicate, read, string_range, write_quarantine
from sqlflow.runtime.results import DateRange, InputRead, QuarantineCount, RunResult
from sqlflow.runtime.small_plan import small_plan
from sqlflow.runtime.spark_errors import SPARK_ERRORS

# a quarantine replace of at most this many rows is committed from the driver (`_quarantine`):
# at about 500 bytes a row (the raw row as JSON), some 25 MB of Arrow
LOCAL_QUARANTINE_ROWS = 50_000


def run_batch(ctx: Context, plan: BatchPlan, *, start: date | None = None,
              end: date | None = None, versions: Mapping[str, int] | None = None,
              full_refresh: bool = False) -> RunResult:
    """Run one model's batch plan on `ctx.spark`; see the module docstring. `versions` pins
    inputs to a Delta version (`sqlflow audit`: what a stream had processed); others: latest.

    An `incremental` model runs incrementally when its table exists, unless `full_refresh`
    (`sqlflow.runtime.dbt_incremental`); a date range is refused for it, as dbt has none.
    Raises SqlflowError naming the model for anything that stops it: a missing input table,
    a bad range, or Spark refusing the SQL or the write.
    """
    spark = ctx.spark
    dates = DateRange.of(start, end)
    if plan.sink.write != "overwrite_partitions":
        dates = None  # a table or view is rebuilt whole; a range does not apply
    if dates is not None:
        dbt_incremental.refuse_range([plan])
    plan = dbt_incremental.choose(spark, plan, full_refresh=full_refresh)
    began = time.monotonic()
    tables = _check_plan(spark, plan)
    small = _small_run(spark, plan, tables)
    with small_plan(spark, small, interpreted=small):
        cached: list[DataFrame] = []
        uses: list = []
        try:
            watches = _observable(plan, dates, tables)
            reads, quarantined = _bind_inputs(spark, plan, dates, cached, versions or {}, tables, watches)
            missing = None
            if plan.dim is not None:  # dimensions and READY pinned once for the whole run
                snap = snapshot.pin(spark, plan.dim)
                reads = tuple(InputRead(r.relation, snap.versions.get(r.relation, r.version), r.view)
                              for r in reads) + (InputRead(COMMIT_LOG, snap.log_version),)
                missing = snapshot.missing_rows(spark, plan, origin=f"commit_log@v{snap.log_version}")
                if missing is not None:
                    missing = missing.persist()
                    cached.append(missing)
                    quarantined.append(partial(_frame, missing))
            checked = _checked(spark, plan, cached)
            poisoned = _poisoned(plan, checked, counted=bool(quarantined))
            if poisoned is not None:
                quarantined.append(partial(_frame, poisoned))
            if watches is not None and len(watches) != len(quarantined):  # not every input watched
                watches = None
            if watches is None:
                q_result, counts = (_quarantine(spark, plan, quarantined, dates, tables) if quarantined
                                    else (None, ()))
            sink, written = _write_sink(spark, plan, dates, checked, tables)
            fault_points.reached("batch_sink")
            if watches is not None:  # counted by the sink write, when they are whole
                q_result, counts = _quarantine(spark, plan, quarantined, dates, tables,
                                               known=observed_reasons.counts(watches))
            if missing is not None and dates is not None:
                missing = missing.where(F.expr(string_range("dt", dates)))
            # the rows per dimension partition from the written rows while they are cached (else
            # read back from the sink)
            by_dim = (snapshot.lineage_counts(plan, written)
                      if plan.dim is not None and written is not None and not sink.skipped else None)
            uses = snapshot.record(spark, plan, sink, mode="batch", run_id=uuid.uuid4().hex, rows=by_dim,
                                   inputs={r.relation: r.version for r in reads}, missing=missing)
        except SqlflowError:
            raise
        except SPARK_ERRORS as exc:
            problem = environment_problem(exc, written_paths(ctx, plan, checkpoint=False))
            if problem is not None:
                raise SqlflowError(f"model `{plan.model}` failed: {problem.message}",
                                   location=Location(plan.path), hint=problem.fix) from exc
            raise SqlflowError(
                f"model `{plan.model}` failed: {str(exc).strip().splitlines()[0]}",
                location=Location(plan.path),
                hint=f"its batch SQL is in target/sqlflow/batch/{plan.model}.sql; "
                     "run with --debug for Spark's full error") from exc
        finally:
            # unpersist before the views go: over Spark Connect a DataFrame is resolved again on
            # the server at each call, so its views must still exist (docs/deploy.md, Spark Connect)
            for rows in cached:
                rows.unpersist()
            for b in plan.sources:
                if b.view:
                    spark.catalog.dropTempView(b.view)
            snapshot.release(spark, plan.dim)
        return RunResult(plan.model, dates, reads, sink, q_result, counts, time.monotonic() - began,
                         tuple(uses))


# --- inputs ---------------------------------------------------------------------------------------


def _check_plan(spark: SparkSession, plan: BatchPlan) -> dict[str, TableInfo]:
    """Refuse what cannot run before anything is written: missing inputs, a view over streams.
    Returns the format and location of the inputs, the sink and the quarantine table that
    exist (`deltalog.locate`: one catalog call a database; lower-case keys)."""
    if plan.sink.write == "view" and any(b.view for b in plan.sources):
        raise SqlflowError(f"model `{plan.model}` is a view over stream inputs", location=Location(plan.path),
                           hint="materialize it as `streaming_table` or `table`")
    found = locate(spark, [*(b.relation for b in plan.sources), plan.sink.table, plan.quarantine])
    for b in plan.sources:
        if b.relation.lower() in found or spark.catalog.tableExists(b.relation):
            continue
        hint = ("run `sqlflow demo generate` first" if b.kind == "source" else
                f"run `{b.input}` first: `sqlflow run --mode batch --select +{plan.model}`")
        raise SqlflowError(f"model `{plan.model}`: input table `{b.relation}` does not exist; {hint}")
    return found


def _small_run(spark: SparkSession, plan: BatchPlan, tables: Mapping[str, TableInfo]) -> bool:
    """Whether the run is small (`input_rows.small`) over what it reads: its sources, its
    dimensions and the commit log their READY view reads, and an `incremental` model's own
    table, which its run reads."""
    relations = [b.relation for b in plan.sources]
    if plan.dim is not None:
        relations += [*(d.relation for d in plan.dim.dims), COMMIT_LOG]
    if plan.incremental is not None:
        relations.append(plan.sink.table)
    return input_rows.small(spark, relations, tables)


def _observable(plan: BatchPlan, dates: DateRange | None, tables: Mapping[str, TableInfo]) -> list | None:
    """An empty list to collect the inputs' `observed_reasons.Watch`es in when the sink write
    can count their quarantine reasons, else None: a whole run (each input's count is checked
    against its whole snapshot) of an existing Delta `overwrite_partitions` sink (Delta's
    CREATE TABLE AS SELECT fills no observation) whose quarantine holds input rows only (no
    dimension's missing rows, no partition value checked row by row, `sink_partitions`)."""
    sink = plan.sink
    safe = {c.lower() for c in sink.safe_partitions}
    if (dates is not None or plan.dim is not None or plan.incremental is not None
            or sink.write != "overwrite_partitions" or sink.file_format != "delta"
            or any(c.lower() not in safe for c in sink.partition_by)):
        return None
    found = tables.get(sink.table.lower())
    return [] if found is not None and found.format == "delta" else None


def _bind_inputs(spark: SparkSession, plan: BatchPlan, dates: DateRange | None,
                 cached: list[DataFrame], pinned: Mapping[str, int], tables: Mapping[str, TableInfo],
                 watches: list | None):
    """Register each clean view; return the reads and, for every input, a function that builds
    its quarantine rows (built only when they are counted or written: `_quarantine`).
    `watches` (not None): each input's clean view counts its quarantine reasons as the sink
    write reads it (`observed_reasons`), and its `Watch` is appended; an input that cannot be
    watched is split as usual and leaves the list short.

    An event input is not cached: the model's SQL reads only the columns it uses, and the
    quarantine reads the input again only when it has rows to hold (`_quarantine`). A cache
    would hold every column of every row in memory first, which cost more than the second
    read it saves (bench/interval_join.py: the batch plan against the hand-written join)."""
    reads, quarantined = [], []
    for b in plan.sources:
        info = tables.get(b.relation.lower())
        location = info.location if info is not None and info.format == "delta" else None
        version = (pinned[b.relation] if b.relation in pinned
                   else latest_version(spark, b.relation, location))
        if not b.view:
            reads.append(InputRead(b.relation, version))
            continue
        rows = read(spark, b.relation, version, location)
        times = Q.event_times(rows, b, model=plan.model)
        if dates is not None and plan.backfill_margin_us is not None:
            low, high = _event_bounds(dates, plan.backfill_margin_us)
            rows = rows.where(Q.in_dates(times, low, high))
        origin = f"{b.relation}@v{version}" if version is not None else b.relation
        reason = Q.reason_of(times, b)
        found = None
        if watches is not None and version is not None and location is not None:
            found = observed_reasons.watch(spark, rows, reason, relation=b.relation, version=version,
                                           location=location, reasons=Q.reasons_of(times))
        if found is not None and watches is not None:
            clean, watched = found
            watches.append(watched)
        else:
            clean = Q.clean(rows, b, model=plan.model, reason=reason)
        clean.createOrReplaceTempView(b.view)
        quarantined.append(partial(Q.bad_rows, rows, b, model=plan.model, origin=origin))
        reads.append(InputRead(b.relation, version, b.view))
    return tuple(reads), quarantined


def _event_bounds(dates: DateRange, margin_us: int) -> tuple[Column, Column]:
    """[start - margin, end + 1 day + margin) as timestamps in the session time zone, the zone
    the model's `to_date(event_time)` uses."""
    def shifted(day: date, us: int) -> Column:
        return F.timestamp_micros(F.unix_micros(F.to_timestamp(F.lit(day.isoformat()))) + F.lit(us))

    return shifted(dates.start, -margin_us), shifted(dates.end + timedelta(days=1), margin_us)


def _quarantine(spark: SparkSession, plan: BatchPlan, parts: list[Callable[[], DataFrame]],
                dates: DateRange | None, tables: Mapping[str, TableInfo],
                known: tuple[QuarantineCount, ...] | None = None) -> tuple[WriteResult, tuple[QuarantineCount, ...]]:
    """Replace this run's quarantine rows (`write_quarantine`), unless there is nothing to
    replace: no input has a quarantine row and the table holds none (in the range). Returns
    the write and the rows it wrote per input and reason. `known`: those counts, already
    taken by the sink write (`observed_reasons`); None: asked here.

    The question is one narrow job that counts the rows per input and reason (the optimizer
    reads only the columns the reason needs), where the write reads every column of every input
    row to build `raw`; inputs with no bad row are the common case past staging. Its counts are
    the run's: the write replaces the quarantine's rows (in the range) with exactly these, so
    the table is not read again to count them. A table that does not exist yet is created
    empty (from the schema alone: no input is read), so a run always leaves its quarantine
    table. At most `LOCAL_QUARANTINE_ROWS` rows replacing an existing table are handed to the
    driver and committed by delta-rs (`sinks.write(local=True)`): Spark's replace of a
    Delta table rebuilds its snapshot before and after the commit (about a second on two
    cores for the demo's staging models), for a few hundred rows."""
    counts = known if known is not None else _count([build() for build in parts], dates)
    exists = tables.get(plan.quarantine.lower())  # as the run found it (`_check_plan`)
    if counts or (exists is not None and _holds_rows(spark, plan.quarantine, exists, dates)):
        few = sum(c.rows for c in counts) <= LOCAL_QUARANTINE_ROWS
        return write_quarantine(spark, plan, [build() for build in parts], dates, tables,
                                local=few), counts
    if not exists:
        return write_quarantine(spark, plan, [build().limit(0) for build in parts], dates, tables), ()
    return WriteResult(plan.quarantine, "replace", skipped=True), ()


def _frame(rows: DataFrame) -> DataFrame:
    """`rows`, as a builder of quarantine rows that are built already."""
    return rows


def _count(parts: list[DataFrame], dates: DateRange | None) -> tuple[QuarantineCount, ...]:
    """The quarantine rows of `parts` (in the range) per input and reason: one narrow job."""
    rows = reduce(DataFrame.unionByName, [p.select("input", "reason", "dt") for p in parts])
    if dates is not None:  # what `write_quarantine` keeps
        rows = rows.where(F.expr(string_range("dt", dates)))
    found = rows.groupBy("input", "reason").count().collect()
    return tuple(QuarantineCount(r["input"], r["reason"], r["count"])
                 for r in sorted(found, key=lambda r: (r["input"], r["reason"])))


def _holds_rows(spark: SparkSession, table: str, info: TableInfo, dates: DateRange | None) -> bool:
    """Whether `table` holds a row (in the range): a quarantine table with no data file says
    so in its log (`deltalog.holds_no_files`, no Spark job); else one row is asked for."""
    if holds_no_files(spark, info.location):
        return False
    rows = spark.table(table)
    if dates is not None:
        rows = rows.where(F.expr(string_range("dt", dates)))
    return bool(rows.select(F.lit(1)).take(1))


# --- outputs --------------------------------------------------------------------------------------


def _checked(spark: SparkSession, plan: BatchPlan, cached: list[DataFrame]) -> DataFrame | None:
    """The model's output rows with their partition problem (`sink_partitions.check`), cached
    (appended to `cached`): the quarantine's bad rows and the sink's clean rows both read them,
    so the model's SQL runs once. None when there is nothing to check (a view, no STRING
    partition column)."""
    if plan.sink.write == "view":
        return None
    with model_errors(plan):
        checked = sink_partitions.check(plan.sink, spark.sql(plan.sql))
    if checked is None:
        return None
    checked = checked.persist()
    cached.append(checked)
    return checked


def _poisoned(plan: BatchPlan, checked: DataFrame | None, *, counted: bool) -> DataFrame | None:
    """The model's output rows whose partition values cannot be directories, as quarantine
    rows (`sink_partitions`); None when there is nothing to check. `counted`: the inputs have
    quarantine rows to ask about (`_quarantine`), and that one job counts these too; else a
    job asks whether there are any (None when there are none: no quarantine for nothing)."""
    if checked is None:
        return None
    bad = sink_partitions.quarantine_rows(plan, checked, origin="backfill")
    return bad if counted or bad.take(1) else None


def _write_sink(spark: SparkSession, plan: BatchPlan, dates: DateRange | None,
                checked: DataFrame | None,
                tables: Mapping[str, TableInfo]) -> tuple[WriteResult, DataFrame | None]:
    """Write the sink; returns the write and, when they are cached (`checked`) and make up
    the written partitions whole (not an incremental model's merge or append), the rows
    written. `tables`: the sink as the run located it (`_check_plan`), so the write does not
    ask the catalog again."""
    if checked is not None:  # its bad rows went to the quarantine (`_poisoned`)
        rows = sink_partitions.clean(checked)
    else:
        with model_errors(plan):  # Spark's analysis error at the model's line (a view: checked first)
            rows = spark.sql(plan.sql)
        if plan.sink.write == "view":
            return write(spark, plan.sink, sql=plan.sql), None
    if plan.incremental is not None:  # chosen: the table exists, not a full refresh
        return dbt_incremental.write(spark, plan, rows), None
    where = None
    if dates is not None:
        where = range_predicate(rows, plan.sink.partition_by[0], dates, model=plan.model)
        rows = rows.where(F.expr(where))
    whole = checked is not None and plan.sink.write in ("overwrite_partitions", "replace")
    return write(spark, plan.sink, rows, replace_where=where, located=tables), rows if whole else None
