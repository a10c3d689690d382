"""Generate the demo's source tables: three ODS landing tables and two daily dimensions.

Everything is Spark expressions over `spark.range(n)` with hash-based randomness (see
`noise`), so `--rows` scales to tens of millions and a seed gives identical tables however
the work is split. Layout (managed Delta tables, overwritten on every run):

- `<ods>.ods_ad_impressions`, `<ods>.ods_ad_clicks`, `<ods>.ods_user_events`: partitioned by
  `dt` ('YYYY-MM-DD') and `hour` ('HH') of the INGEST time, in UTC;
- `<dim>.dim_ad`, `<dim>.dim_user`: partitioned by `dt`, one snapshot per day from the day
  before the events start to their last day. The newest `dim_user` day is missing; the newest
  `dim_ad` day is written but not ready; every other day is ready (a `_SUCCESS` marker).

Rates and sizes are in `scenario`; the dirty rows are described there.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date

from pyspark.sql import DataFrame, SparkSession

from sqlflow.demo import dims, ods
from sqlflow.demo import scenario as S
from sqlflow.errors import SqlflowError
from sqlflow.runtime.delta.markers import clear_ready, mark_ready, table_location

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class TableReport:
    """One written table: its name, rows, and rows per injected defect ("duplicate" = extra copies)."""

    table: str
    rows: int
    dirty: dict[str, int]


@dataclass(frozen=True)
class DemoReport:
    """What `generate` wrote: the tables, and per dimension the days written and ready.

    `expected_days` are the days every dimension should have (the day before the events
    start through their last day); `dim_days` the days actually written, per table.
    """

    seed: int
    rows: int
    days: int
    start: date
    tables: tuple[TableReport, ...]
    expected_days: tuple[str, ...]
    dim_days: dict[str, tuple[str, ...]]
    ready_days: dict[str, tuple[str, ...]]

    def table(self, name: str) -> TableReport:
        """The report of a table by full or short name (`ods.ods_ad_clicks` or `ods_ad_clicks`)."""
        for t in self.tables:
            if name in (t.table, t.table.split(".")[-1]):
                return t
        raise KeyError(name)


def generate(
    spark: SparkSession,
    *,
    rows: int = S.DEFAULT_ROWS,
    seed: int = S.DEFAULT_SEED,
    days: int = S.DEFAULT_DAYS,
    start: date = S.DEFAULT_START,
    ods_schema: str = "ods",
    dim_schema: str = "dim",
    partitions: int | None = None,
    progress: Callable[[str], None] | None = None,
    write_ods: bool = True,
) -> DemoReport:
    """Write the demo tables into `ods_schema` and `dim_schema` and report what was written.

    `rows` is the number of ad impressions (before duplicates); clicks are about
    CLICK_RATE of them and user events EVENTS_PER_IMPRESSION times as many. `partitions`
    sets how many Spark tasks generate the rows (default: Spark's parallelism); it changes
    speed, never the data. `progress` gets one line per table written. `write_ods=False`
    writes the dimensions only (`sqlflow demo produce` sends the ODS rows to Kafka instead).
    """
    _validate(rows=rows, days=days, schemas=(ods_schema, dim_schema), partitions=partitions)
    say = progress or (lambda _line: None)
    scale = ods.Scale(seed=seed, rows=rows, days=days, start=start, partitions=partitions)
    for schema in (ods_schema, dim_schema):
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {schema}")

    tables = []
    for name, build in (("ods_ad_impressions", ods.impressions), ("ods_ad_clicks", ods.clicks),
                        ("ods_user_events", ods.events)) if write_ods else ():
        report = _write_ods(build(spark, scale), f"{ods_schema}.{name}")
        say(f"wrote {report.table}: {report.rows:,} rows")
        tables.append(report)

    all_days = dims.dim_days(scale)
    newest = all_days[-1]
    written = {"dim_ad": all_days, "dim_user": [d for d in all_days if d != newest]}
    ready = {"dim_ad": [d for d in all_days if d != newest], "dim_user": written["dim_user"]}
    for name, build_dim in (("dim_ad", dims.dim_ad), ("dim_user", dims.dim_user)):
        table = f"{dim_schema}.{name}"
        count = _write(build_dim(spark, scale, written[name]), table, ("dt",))
        location = table_location(spark, table)
        clear_ready(spark, location, "dt")  # none after a fresh write, unless the drop kept files
        for day in ready[name]:
            mark_ready(spark, location, "dt", day)
        tables.append(TableReport(table, count, {}))
        state = "not ready" if newest in written[name] else "missing"
        say(f"wrote {table}: {count:,} rows, days {span(written[name])} ({newest} {state})")

    return DemoReport(
        seed=seed, rows=rows, days=days, start=start, tables=tuple(tables),
        expected_days=tuple(all_days),
        dim_days={k: tuple(v) for k, v in written.items()},
        ready_days={k: tuple(v) for k, v in ready.items()},
    )


def span(days) -> str:
    """`first..last` of a sorted run of days, or the one day."""
    return "none" if not days else days[0] if len(days) == 1 else f"{days[0]}..{days[-1]}"


def _validate(*, rows: int, days: int, schemas: tuple[str, ...], partitions: int | None) -> None:
    if rows < 1:
        raise SqlflowError(f"--rows must be at least 1, got {rows}")
    if not 1 <= days <= 366:
        raise SqlflowError(f"--days must be between 1 and 366, got {days}")
    if partitions is not None and partitions < 1:
        raise SqlflowError(f"partitions must be at least 1, got {partitions}")
    for schema in schemas:
        if not _IDENT.match(schema):
            raise SqlflowError(f"`{schema}` is not a valid schema name",
                               hint="use letters, digits and underscores")


def _write_ods(df: DataFrame, table: str) -> TableReport:
    """Count the defects (one cheap pass: the rows are recomputed from hashes), then write."""
    grouped = df.groupBy(*ods.HELPER_COLUMNS).count().collect()
    counts = {(r["_defect"], r["_copy"]): r["count"] for r in grouped}
    dirty = {kind: 0 for kind in _defect_kinds(table)}
    for (kind, copy), n in counts.items():
        if kind != ods.CLEAN:
            dirty[kind] = dirty.get(kind, 0) + n
        if copy:
            dirty["duplicate"] += n
    rows = _write(df.drop(*ods.HELPER_COLUMNS), table, ("dt", "hour"))
    if rows != sum(counts.values()):  # a bug of ours, not the user's: fail loudly
        raise AssertionError(f"{table}: wrote {rows} rows, counted {sum(counts.values())}")
    return TableReport(table, rows, dirty)


def _defect_kinds(table: str) -> list[str]:
    kinds = ["late", "future", "null_event_time", "null_key"]
    if table.endswith("ods_user_events"):
        kinds += ["malformed_payload", "malformed_spmid"]
    return kinds + ["duplicate"]


def _write(df: DataFrame, table: str, partition_by: tuple[str, ...]) -> int:
    """Replace `table` with `df`; returns the rows written.

    The old table is dropped rather than overwritten: regenerated demo data has no useful
    history, a fresh table skips Delta's scan of the old file list (slow on two cores) and
    the Hive schema-compatibility error an in-place replace logs, and no stale partition or
    ready marker of an earlier run can survive.
    """
    spark = df.sparkSession
    spark.sql(f"DROP TABLE IF EXISTS {table}")
    # Few files per partition, as a landing job writes them, instead of one per task.
    (df.repartition(*partition_by).write.format("delta")
       .partitionBy(*partition_by).saveAsTable(table))
    return table_rows(spark, table)


# Operations that replace a whole table: their numOutputRows is the table's row count.
_FULL_WRITES = frozenset({"CREATE TABLE AS SELECT", "REPLACE TABLE AS SELECT",
                          "CREATE OR REPLACE TABLE AS SELECT"})


def table_rows(spark: SparkSession, table: str) -> int:
    """Rows of a Delta table: from its log when the last commit replaced the whole table,
    else by a count (which on two cores costs a 50-task snapshot job)."""
    last = spark.sql(f"DESCRIBE HISTORY {table} LIMIT 1").collect()[0]
    metrics = last["operationMetrics"] or {}
    if last["operation"] in _FULL_WRITES and "numOutputRows" in metrics:
        return int(metrics["numOutputRows"])
    return spark.table(table).count()
