"""Writes of tables that are not Delta (`file_format` parquet, orc, ...), as dbt-spark writes them.

dbt's own materializations follow the model's `file_format`, dbt-spark's default being
parquet (`sqlflow.planning.formats`), so sqlflow writes the same format: a `replace` drops the
old relation and creates the table from the rows (`CREATE TABLE ... USING <format> AS`,
dbt-spark's table materialization); an `overwrite_partitions` inserts with Spark's dynamic
partition overwrite (dbt-spark's `insert_overwrite`), into a table of the same format, or
into a new one. Such a table has no Delta log: the write's result counts the rows written and
names no version (docs/semantics.md, "File formats").
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from sqlflow.planning.plan import Sink
from sqlflow.runtime import ownership
from sqlflow.runtime.delta import deltalog
from sqlflow.runtime.delta.deltalog import TableInfo, quote


def write(spark: SparkSession, sink: Sink, rows: DataFrame, *, replace_where: str | None = None) -> int:
    """Write `rows` to the non-Delta `sink`; returns how many rows it wrote.

    `replace_where` (a date-range backfill) narrows the rows already; the partitions they hold
    are overwritten, as dbt-spark's insert_overwrite does (a partition the range empties keeps
    its old rows: use a Delta table for exact range backfills)."""
    info = deltalog.describe(spark, sink.table) if spark.catalog.tableExists(sink.table) else None
    if info is not None and sink.owner:
        ownership.check(spark, sink.table, sink.owner, sink.role, info=info,
                        action="replace" if sink.write == "replace" else "overwrite",
                        origin=sink.origin, adopt=sink.adopt_unowned)
    rows = rows.persist()
    try:
        count = rows.count()
        same = (info is not None and info.format == sink.file_format
                and info.partition_columns == sink.partition_by)
        if sink.write == "overwrite_partitions" and same and sink.partition_by:
            assert info is not None  # `same` says it exists
            columns = spark.table(sink.table).columns
            rows.select(*[quote(c) for c in columns]).write.insertInto(sink.table, overwrite=True)
            if info.owner is None and sink.owner:
                claim(spark, sink)
        else:
            if info is not None:
                drop(spark, sink.table, info)
            _create(spark, sink, rows)
    finally:
        rows.unpersist()
    return count


def _create(spark: SparkSession, sink: Sink, rows: DataFrame) -> None:
    if "." in sink.table:
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {quote(sink.table.rsplit('.', 1)[0])}")
    view = "__sqlflow_plain_write"
    rows.createOrReplaceTempView(view)
    try:
        parts = (f" PARTITIONED BY ({', '.join(quote(c) for c in sink.partition_by)})"
                 if sink.partition_by else "")
        props = f" {ownership.tblproperties(sink.owner, sink.role)}" if sink.owner else ""
        # a partitioned datasource table keeps its partition columns last, as dbt-spark's does
        spark.sql(f"CREATE TABLE {quote(sink.table)} USING {sink.file_format}{parts}{props} "
                  f"AS SELECT * FROM {view}")
    finally:
        spark.catalog.dropTempView(view)


def drop(spark: SparkSession, table: str, info: TableInfo) -> None:
    """Drop the relation at `table` (a view when the catalog names no provider)."""
    spark.sql(f"DROP {'TABLE' if info.format else 'VIEW'} IF EXISTS {quote(table)}")


def drop_if_table(spark: SparkSession, table: str) -> None:
    """Before a view replaces `table`: drop it when it is a table (dbt-spark's view
    materialization drops a table in its place); a view is replaced in place."""
    if spark.catalog.tableExists(table):
        info = deltalog.describe(spark, table)
        if info.format:
            drop(spark, table, info)


def claim(spark: SparkSession, sink: Sink) -> None:
    """Record the sink's owner on a table built by dbt (adopted: `Sink.adopt_unowned`)."""
    assert sink.owner is not None  # only owned sinks adopt
    props = ownership.tblproperties(sink.owner, sink.role).removeprefix("TBLPROPERTIES ")
    spark.sql(f"ALTER TABLE {quote(sink.table)} SET TBLPROPERTIES {props}")
