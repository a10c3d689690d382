"""Reading a backfill's inputs and writing its quarantine: what the batch runtime and a routed
group's backfill share (`sqlflow.runtime.batch`, `sqlflow.runtime.routed.routing`)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DateType, StringType, TimestampNTZType, TimestampType

from sqlflow.errors import SqlflowError
from sqlflow.identifiers import quote as quote_ident
from sqlflow.planning.plan import BatchPlan, RoutedPlan
from sqlflow.runtime import quarantine as Q
from sqlflow.runtime.delta.deltalog import TableInfo
from sqlflow.runtime.delta.sinks import WriteResult, quote, write
from sqlflow.runtime.ownership import quarantine_sink
from sqlflow.runtime.results import DateRange, QuarantineCount


def read(spark: SparkSession, relation: str, version: int | None, location: str | None = None) -> DataFrame:
    """The table at `version` (one snapshot for the whole run), or as it is when not Delta.
    `location`: the Delta table's folder as the run located it, read there at `version`
    without asking the catalog again (a third of the time of `VERSION AS OF`'s parse and
    look-up on two cores; the same files, columns and rows). The catalog gives it as Hadoop's
    unescaped path string (`a folder%41`), which is what `load` takes."""
    if version is None:
        return spark.table(relation)
    if location is not None:
        return spark.read.format("delta").option("versionAsOf", version).load(location)
    return spark.sql(f"SELECT * FROM {quote(relation)} VERSION AS OF {version}")


def write_quarantine(spark: SparkSession, plan: BatchPlan | RoutedPlan, parts: list[DataFrame],
                     dates: DateRange | None, located: Mapping[str, TableInfo] | None = None,
                     *, local: bool = False) -> WriteResult:
    """Replace this run's quarantine rows: the whole table, or the range's `dt` partitions.
    `located`: the tables as the run found them; `local`: the rows are few, a whole table's
    replace may be committed from the driver (both: `sinks.write`)."""
    rows = parts[0]
    for part in parts[1:]:
        rows = rows.unionByName(part)
    if dates is None:
        return write(spark, quarantine_sink(plan, "replace", Q.PARTITION_BY), rows, located=located,
                     local=local)
    where = string_range("dt", dates)
    sink = quarantine_sink(plan, "overwrite_partitions", Q.PARTITION_BY)
    return write(spark, sink, rows.where(F.expr(where)), replace_where=where, located=located)


def count_quarantine(spark: SparkSession, table: str,
                     dates: DateRange | None) -> tuple[QuarantineCount, ...]:
    """Quarantined rows per input and reason (in the range's partitions)."""
    where = f"WHERE {string_range('dt', dates)}" if dates else ""
    found = spark.sql(f"SELECT input, reason, count(*) AS n FROM {quote(table)} {where} "
                      "GROUP BY input, reason ORDER BY input, reason").collect()
    return tuple(QuarantineCount(r["input"], r["reason"], r["n"]) for r in found)


def range_predicate(rows: DataFrame, column: str, dates: DateRange, *, model: str) -> str:
    """SQL selecting `dates` on the output's partition column, by its type: a 'YYYY-MM-DD'
    string, a DATE, or a TIMESTAMP (whole days, session time zone)."""
    field = next((f for f in rows.schema.fields if f.name.lower() == column.lower()), None)
    kind = field.dataType if field else None
    if isinstance(kind, StringType):
        return string_range(column, dates)
    q = quote_ident(column)
    if isinstance(kind, DateType):
        return f"{q} >= DATE'{dates.start}' AND {q} <= DATE'{dates.end}'"
    if isinstance(kind, (TimestampType, TimestampNTZType)):
        return (f"{q} >= TIMESTAMP'{dates.start}' AND "
                f"{q} < TIMESTAMP'{dates.end + timedelta(days=1)}'")
    raise SqlflowError(
        f"model `{model}`: --start/--end select dates of its first partition column `{column}`, "
        f"which is {kind.simpleString() if kind else 'missing'}",
        hint="partition by a date first (e.g. `to_date(event_ts) AS dt`), or run without a range")


def string_range(column: str, dates: DateRange) -> str:
    """`column` between the range's first and last day, as 'YYYY-MM-DD' strings."""
    q = quote_ident(column)
    return f"{q} >= '{dates.start}' AND {q} <= '{dates.end}'"
