"""The batch runtime: run a model's `BatchPlan` as a backfill. Its output is the reference a
stream of the same input must equal (DESIGN 2).

For each model, on one SparkSession:
1. read every input at one pinned Delta version; an input that would stream goes through the
   quarantine filter (`sqlflow.runtime.quarantine`) and its clean rows become the plan's
   clean view;
2. write the quarantine rows to `<model>__quarantine`;
3. run `plan.sql` and write the sink (`sqlflow.runtime.sinks`).

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
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Iterator, Sequence

from pyspark.errors import PySparkException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DateType, StringType, TimestampNTZType, TimestampType

from sqlflow.errors import Location, SqlflowError
from sqlflow.plan import COMMIT_LOG, BatchPlan, RoutedPlan, Sink
from sqlflow.runtime import quarantine as Q
from sqlflow.runtime import snapshot
from sqlflow.runtime.analysis_errors import model_errors
from sqlflow.runtime.deltalog import latest_version
from sqlflow.runtime.env_errors import environment_problem, written_paths
from sqlflow.runtime.sinks import WriteResult, quote, write

try:  # a JVM error pyspark does not translate arrives as Py4JJavaError (not with Spark Connect)
    from py4j.protocol import Py4JJavaError
    _SPARK_ERRORS: tuple[type[Exception], ...] = (PySparkException, Py4JJavaError)
except ImportError:  # pragma: no cover
    _SPARK_ERRORS = (PySparkException,)


@dataclass(frozen=True)
class DateRange:
    """Inclusive dates of a backfill, e.g. `DateRange(date(2026, 11, 1), date(2026, 11, 3))`."""

    start: date
    end: date

    @classmethod
    def of(cls, start: date | None, end: date | None) -> "DateRange | None":
        if start is None and end is None:
            return None
        if start is None or end is None:
            raise SqlflowError("a backfill range needs both --start and --end (inclusive dates)",
                               hint="e.g. --start 2026-11-01 --end 2026-11-01 for one day")
        if start > end:
            raise SqlflowError(f"--start {start} is after --end {end}",
                               hint="swap them; both dates are included")
        return cls(start, end)


@dataclass(frozen=True)
class InputRead:
    """One input as the run read it: the Delta version (pinned for clean-view inputs)."""

    relation: str
    version: int | None
    view: str | None = None


@dataclass(frozen=True)
class QuarantineCount:
    input: str
    reason: str
    rows: int


@dataclass(frozen=True)
class RunResult:
    """What one model's backfill did; `dates` is None for a full run (or a full rebuild)."""

    model: str
    dates: DateRange | None
    inputs: tuple[InputRead, ...]
    sink: WriteResult
    quarantine: WriteResult | None
    quarantined: tuple[QuarantineCount, ...]
    seconds: float
    dims: tuple = ()  # snapshot.DimUse per output partition and dimension (DESIGN 2.3)

    def quarantined_by_reason(self) -> dict[str, int]:
        out = dict.fromkeys(Q.REASONS, 0)
        for q in self.quarantined:
            out[q.reason] = out.get(q.reason, 0) + q.rows
        return out


def run_batch(ctx, plan: BatchPlan, *, start: date | None = None, end: date | None = None) -> RunResult:
    """Run one model's batch plan on `ctx.spark`; see the module docstring.

    Raises SqlflowError naming the model for anything that stops it: a missing input table,
    a bad range, or Spark refusing the SQL or the write.
    """
    spark = ctx.spark
    dates = DateRange.of(start, end)
    if plan.sink.write != "overwrite_partitions":
        dates = None  # a table or view is rebuilt whole; a range does not apply
    began = time.monotonic()
    _check_plan(spark, plan)
    cached: list[DataFrame] = []
    uses: list = []
    try:
        reads, quarantined = _bind_inputs(spark, plan, dates, cached)
        missing = None
        if plan.dim is not None:  # dimensions and READY pinned once for the whole run
            snap = snapshot.pin(spark, plan.dim)
            reads = tuple(InputRead(r.relation, snap.versions.get(r.relation, r.version), r.view)
                          for r in reads) + (InputRead(COMMIT_LOG, snap.log_version),)
            missing = snapshot.missing_rows(spark, plan, origin=f"commit_log@v{snap.log_version}")
            if missing is not None:
                missing = missing.persist()
                cached.append(missing)
                quarantined.append(missing)
        q_result = _write_quarantine(spark, plan, quarantined, dates) if quarantined else None
        sink = _write_sink(spark, plan, dates)
        if missing is not None and dates is not None:
            missing = missing.where(F.expr(_string_range("dt", dates)))
        uses = snapshot.record(spark, plan, sink, mode="batch", run_id=uuid.uuid4().hex,
                               inputs={r.relation: r.version for r in reads}, missing=missing)
    except SqlflowError:
        raise
    except _SPARK_ERRORS as exc:
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
        for b in plan.sources:
            if b.view:
                spark.catalog.dropTempView(b.view)
        for rows in cached:
            rows.unpersist()
        snapshot.release(spark, plan.dim)
    counts = _count_quarantine(spark, plan.quarantine, dates) if q_result else ()
    return RunResult(plan.model, dates, reads, sink, q_result, counts, time.monotonic() - began,
                     tuple(uses))


def run_models(ctx, plans: Sequence[BatchPlan], *, start: date | None = None,
               end: date | None = None) -> Iterator[RunResult]:
    """Run `plans` in order (compile_project's order: inputs first), yielding each result.

    Stops at the first model that fails: later models read its table, so running them would
    build on stale or missing rows. The SqlflowError raised names the model and why.
    """
    DateRange.of(start, end)  # refuse a bad range before any model runs
    for plan in plans:
        if isinstance(plan, RoutedPlan):  # fan-out fusion: one read for every target
            from sqlflow.runtime.routing import run_routed_batch
            yield from run_routed_batch(ctx, plan, start=start, end=end)
            continue
        yield run_batch(ctx, plan, start=start, end=end)


# --- inputs ---------------------------------------------------------------------------------------


def _check_plan(spark: SparkSession, plan: BatchPlan) -> None:
    """Refuse what cannot run before anything is written: missing inputs, a view over streams."""
    if plan.sink.write == "view" and any(b.view for b in plan.sources):
        raise SqlflowError(f"model `{plan.model}` is a view over stream inputs", location=Location(plan.path),
                           hint="materialize it as `streaming_table` or `table`")
    for b in plan.sources:
        if spark.catalog.tableExists(b.relation):
            continue
        hint = ("run `sqlflow demo generate` first" if b.kind == "source" else
                f"run `{b.input}` first: `sqlflow run --mode batch --select +{plan.model}`")
        raise SqlflowError(f"model `{plan.model}`: input table `{b.relation}` does not exist; {hint}")


def _bind_inputs(spark: SparkSession, plan: BatchPlan, dates: DateRange | None,
                 cached: list[DataFrame]):
    """Register each clean view; return the reads and the quarantine rows of every input.

    Each event input is read once: its rows are cached (appended to `cached`, which the caller
    unpersists) because both the quarantine write and the model SQL consume them."""
    reads, quarantined = [], []
    for b in plan.sources:
        version = latest_version(spark, b.relation)
        if not b.view:
            reads.append(InputRead(b.relation, version))
            continue
        rows = _read(spark, b.relation, version)
        times = Q.event_times(rows, b, model=plan.model)
        if dates is not None and plan.backfill_margin_us is not None:
            low, high = _event_bounds(dates, plan.backfill_margin_us)
            rows = rows.where(Q.in_dates(times, low, high))
        rows = rows.persist()
        cached.append(rows)
        origin = f"{b.relation}@v{version}" if version is not None else b.relation
        split = Q.split(rows, b, model=plan.model, origin=origin)
        split.clean.createOrReplaceTempView(b.view)
        quarantined.append(split.quarantine)
        reads.append(InputRead(b.relation, version, b.view))
    return tuple(reads), quarantined


def _read(spark: SparkSession, relation: str, version: int | None) -> DataFrame:
    """The table at `version` (one snapshot for the whole run), or as it is when not Delta."""
    if version is None:
        return spark.table(relation)
    return spark.sql(f"SELECT * FROM {quote(relation)} VERSION AS OF {version}")


def _event_bounds(dates: DateRange, margin_us: int) -> tuple[Column, Column]:
    """[start - margin, end + 1 day + margin) as timestamps in the session time zone, the zone
    the model's `to_date(event_time)` uses."""
    def shifted(day: date, us: int) -> Column:
        return F.timestamp_micros(F.unix_micros(F.to_timestamp(F.lit(day.isoformat()))) + F.lit(us))

    return shifted(dates.start, -margin_us), shifted(dates.end + timedelta(days=1), margin_us)


# --- outputs --------------------------------------------------------------------------------------


def _write_sink(spark: SparkSession, plan: BatchPlan, dates: DateRange | None) -> WriteResult:
    with model_errors(plan):  # Spark's analysis error at the model's line (a view: checked first)
        rows = spark.sql(plan.sql)
    if plan.sink.write == "view":
        return write(spark, plan.sink, sql=plan.sql)
    where = None
    if dates is not None:
        where = range_predicate(rows, plan.sink.partition_by[0], dates, model=plan.model)
        rows = rows.where(F.expr(where))
    return write(spark, plan.sink, rows, replace_where=where)


def _write_quarantine(spark: SparkSession, plan: BatchPlan, parts: list[DataFrame],
                      dates: DateRange | None) -> WriteResult:
    """Replace this run's quarantine rows: the whole table, or the range's `dt` partitions."""
    rows = parts[0]
    for part in parts[1:]:
        rows = rows.unionByName(part)
    if dates is None:
        return write(spark, Sink(plan.quarantine, "replace", Q.PARTITION_BY), rows)
    where = _string_range("dt", dates)
    sink = Sink(plan.quarantine, "overwrite_partitions", Q.PARTITION_BY)
    return write(spark, sink, rows.where(F.expr(where)), replace_where=where)


def _count_quarantine(spark: SparkSession, table: str, dates: DateRange | None) -> tuple[QuarantineCount, ...]:
    where = f"WHERE {_string_range('dt', dates)}" if dates else ""
    found = spark.sql(f"SELECT input, reason, count(*) AS n FROM {quote(table)} {where} "
                      "GROUP BY input, reason ORDER BY input, reason").collect()
    return tuple(QuarantineCount(r["input"], r["reason"], r["n"]) for r in found)


def range_predicate(rows: DataFrame, column: str, dates: DateRange, *, model: str) -> str:
    """SQL selecting `dates` on the output's partition column, by its type: a 'YYYY-MM-DD'
    string, a DATE, or a TIMESTAMP (whole days, session time zone)."""
    field = next((f for f in rows.schema.fields if f.name.lower() == column.lower()), None)
    kind = field.dataType if field else None
    if isinstance(kind, StringType):
        return _string_range(column, dates)
    if isinstance(kind, DateType):
        return f"`{column}` >= DATE'{dates.start}' AND `{column}` <= DATE'{dates.end}'"
    if isinstance(kind, (TimestampType, TimestampNTZType)):
        return (f"`{column}` >= TIMESTAMP'{dates.start}' AND "
                f"`{column}` < TIMESTAMP'{dates.end + timedelta(days=1)}'")
    raise SqlflowError(
        f"model `{model}`: --start/--end select dates of its first partition column `{column}`, "
        f"which is {kind.simpleString() if kind else 'missing'}",
        hint="partition by a date first (e.g. `to_date(event_ts) AS dt`), or run without a range")


def _string_range(column: str, dates: DateRange) -> str:
    return f"`{column}` >= '{dates.start}' AND `{column}` <= '{dates.end}'"
