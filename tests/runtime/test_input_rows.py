"""`input_rows.rows_read`: a backfill's input rows counted from the tables' Delta logs, on
real Delta tables; what it cannot count exactly is None (the run is then planned as
configured), never a guess."""

from __future__ import annotations

import pytest

from sqlflow.runtime import input_rows
from sqlflow.runtime.session_settings import changed

pytestmark = pytest.mark.spark

DB = "rt_input_rows"


@pytest.fixture(scope="module")
def tables(spark):
    spark.sql(f"DROP DATABASE IF EXISTS {DB} CASCADE")
    spark.sql(f"CREATE DATABASE {DB}")
    spark.range(7).write.format("delta").saveAsTable(f"{DB}.seven")
    (spark.range(30).selectExpr("id", "id % 3 AS p").repartition(4)
     .write.format("delta").partitionBy("p").saveAsTable(f"{DB}.thirty"))
    spark.sql(f"DELETE FROM {DB}.thirty WHERE id < 10")  # files rewritten: 20 live rows
    spark.range(5).write.format("parquet").saveAsTable(f"{DB}.plain")
    with changed(spark, {"spark.databricks.delta.stats.collect": "false"}):  # files without numRecords
        spark.range(3).write.format("delta").saveAsTable(f"{DB}.no_stats")
    yield
    spark.sql(f"DROP DATABASE IF EXISTS {DB} CASCADE")


def test_the_rows_of_every_input_at_its_latest_version_each_counted_once(spark, tables):
    assert input_rows.rows_read(spark, [f"{DB}.seven"]) == 7
    assert spark.table(f"{DB}.thirty").count() == 20
    assert input_rows.rows_read(spark, [f"{DB}.thirty"]) == 20
    assert input_rows.rows_read(spark, [f"{DB}.seven", f"{DB}.THIRTY", f"{DB}.seven"]) == 27
    assert input_rows.rows_read(spark, []) == 0


def test_what_cannot_be_counted_from_a_delta_log_is_not_known(spark, tables, monkeypatch):
    assert input_rows.rows_read(spark, [f"{DB}.seven", f"{DB}.plain"]) is None  # not Delta
    assert input_rows.rows_read(spark, [f"{DB}.seven", f"{DB}.missing"]) is None
    assert input_rows.rows_read(spark, [f"{DB}.no_stats"]) is None
    monkeypatch.setattr(input_rows, "LOG_BYTES", 1)  # too large to read its log for a count
    assert input_rows.rows_read(spark, [f"{DB}.seven"]) is None
