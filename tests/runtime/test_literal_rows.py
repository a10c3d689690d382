"""`sqlflow.runtime.literal_rows`: bookkeeping rows built as one SQL statement of literals give
exactly the rows `createDataFrame` gives, whatever the strings hold (quotes, backslashes,
`${...}` that Spark's variable substitution would expand, newlines, any Unicode), and a naive
timestamp is the UTC instant whatever the session's time zone."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from sqlflow.runtime import literal_rows
from sqlflow.runtime.delta import commitlog

pytestmark = pytest.mark.spark

SCHEMA = StructType([StructField("s", StringType(), False), StructField("n", LongType()),
                     StructField("b", BooleanType(), False), StructField("t", TimestampType()),
                     StructField("h", ArrayType(StringType())), StructField("i", IntegerType())])
NASTY = ["it's", 'a"b', "back\\slash\\", "${env:HOME}", "${spark.app.name}", "${hiveconf:x}",
         "new\nline\t", "汉字 ü 🎉", "", "'; DROP TABLE x; --", "\\'", "%s {x}"]
NOON = datetime(2026, 11, 27, 12, 0, 0, 656_530)


def test_rows_equal_create_dataframe_s_for_any_string(spark):
    rows = [(v, k, k % 2 == 0, NOON if k else None, [v, "x"] if k % 3 else [], k if k % 2 else None)
            for k, v in enumerate(NASTY)]
    got = literal_rows.frame(spark, rows, SCHEMA)
    assert [(f.name, f.dataType) for f in got.schema.fields] == [(f.name, f.dataType) for f in SCHEMA.fields]
    want = spark.createDataFrame(rows, SCHEMA)
    assert sorted(map(tuple, got.collect())) == sorted(map(tuple, want.collect()))
    assert {r["s"] for r in got.collect()} == set(NASTY)  # nothing substituted or unescaped
    # past SMALL rows the same rows come through createDataFrame
    many = rows * (literal_rows.SMALL // len(rows) + 1)
    assert len(many) > literal_rows.SMALL
    assert sorted(map(tuple, literal_rows.frame(spark, many, SCHEMA).collect())) == sorted(map(tuple, want.union(want).collect()))
    # and so does one row whose array holds more values than SMALL rows would
    wide = [("w", 1, True, NOON, [str(k) for k in range(literal_rows.SMALL * len(SCHEMA.fields) + 1)], 2)]
    assert [tuple(r) for r in literal_rows.frame(spark, wide, SCHEMA).collect()] == \
        [tuple(r) for r in spark.createDataFrame(wide, SCHEMA).collect()]


def test_a_naive_timestamp_is_the_utc_instant_in_any_session_time_zone(spark):
    one = StructType([StructField("t", TimestampType())])
    before = spark.conf.get("spark.sql.session.timeZone")
    try:
        for zone in ("UTC", "Asia/Shanghai", "America/Los_Angeles"):
            spark.conf.set("spark.sql.session.timeZone", zone)
            utc = int(NOON.replace(tzinfo=timezone.utc, microsecond=0).timestamp()) * 1_000_000 + NOON.microsecond
            for rows in ([(NOON,), (NOON.replace(tzinfo=timezone.utc),)], [(NOON,)] * (literal_rows.SMALL + 1)):
                got = literal_rows.frame(spark, rows, one)
                micros = [r[0] for r in got.selectExpr("unix_micros(t)").collect()]
                assert micros == [utc] * len(rows), (zone, len(rows))
    finally:
        spark.conf.set("spark.sql.session.timeZone", before)


def test_a_commit_log_append_reads_back_as_written(spark):
    spark.sql("DROP TABLE IF EXISTS t_literal_rows.log")
    spark.sql("CREATE DATABASE IF NOT EXISTS t_literal_rows")
    table = "t_literal_rows.log"
    entry = commitlog.Entry("dw.T", "dt=2026-11-27/lane=a%2Fb", "write", "stream", "m", run_id="q@1",
                            batch_id=4, inputs={"ods.x": 7}, rows=2, provisional=True,
                            reason="${env:HOME} it's", committed_at=NOON)
    assert commitlog.append(spark, [entry], table=table) == 1
    row = spark.table(table).collect()[0].asDict()
    assert row == {**dict(zip(commitlog.SCHEMA.names, entry.as_row(NOON), strict=True)), "table": "dw.t"}
    spark.sql("DROP DATABASE t_literal_rows CASCADE")
