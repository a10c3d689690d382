"""A small micro-batch's output appended from this process (`local_append.append_frame`,
`sinks.write(local=True)`): the rows Spark reads back are exactly the frame's, Spark's data
skipping over the statistics delta-rs wrote keeps every matching row, a retry of the batch
is found by the journal and appends nothing, and every row delta-rs would store differently
from Spark (a partition value it names another folder, a NULL partition, a NULL in a NOT
NULL column, other columns) is written by Spark instead, computed once."""

from __future__ import annotations

import json
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from helpers import delta_writers
from sqlflow.errors import SqlflowError
from sqlflow.planning.plan import Sink
from sqlflow.runtime import ownership
from sqlflow.runtime.delta import deltalog, local_append, once
from sqlflow.runtime.delta.sinks import BatchId, write

pytestmark = pytest.mark.spark

DB = "rt_local_sink"
TABLE = f"{DB}.out"
SCHEMA = StructType([
    StructField("req_id", StringType()),
    StructField("ad_id", LongType()),
    StructField("n", IntegerType()),
    StructField("price", DecimalType(12, 4)),
    StructField("score", DoubleType()),
    StructField("ok", BooleanType()),
    StructField("day", DateType()),
    StructField("click_ts", TimestampType()),
    StructField("raw", BinaryType()),
    StructField("dt", StringType()),
    StructField("hour", IntegerType()),
])
SINK = Sink(TABLE, "append_once", partition_by=("dt", "hour"), owner="m", role="sink")


@pytest.fixture(autouse=True)
def fresh(spark):
    spark.sql(f"DROP DATABASE IF EXISTS {DB} CASCADE")
    yield
    spark.sql(f"DROP DATABASE IF EXISTS {DB} CASCADE")


def row(k: int, dt: str | None = "2026-11-01", hour: int = 3, **changes) -> tuple:
    base = dict(req_id=f"r{k}" if k % 3 else None, ad_id=k, n=k % 7, price=Decimal(k) / 8,
                score=k / 3 if k % 4 else None, ok=k % 2 == 0, day=date(2026, 11, 1 + k % 5),
                click_ts=datetime(2026, 11, 1, 3, k % 60, k % 60, 100_000 + k),
                raw=bytes([k % 256, 7]), dt=dt, hour=hour)
    base.update(changes)
    return tuple(base[f.name] for f in SCHEMA.fields)


def created(spark, schema: StructType = SCHEMA) -> str:
    """The sink table, created empty by Spark as a stream's first write creates it (its
    owner recorded, NOT NULL where `schema` says so); its location."""
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {DB}")
    columns = ", ".join(f"{f.name} {f.dataType.simpleString()}{'' if f.nullable else ' NOT NULL'}"
                        for f in schema.fields)
    props = ", ".join(f"'{k}' = '{v}'" for k, v in ownership.properties(SINK.owner, SINK.role).items())
    spark.sql(f"CREATE TABLE {TABLE} ({columns}) USING delta PARTITIONED BY (dt, hour) "
              f"TBLPROPERTIES ({props})")
    return deltalog.describe(spark, TABLE).location


def engines(spark) -> list[str]:
    return delta_writers(spark, TABLE)


def rows_of(spark, frame) -> list[tuple]:
    return sorted((tuple(r) for r in frame.collect()), key=repr)


def test_rows_appended_here_are_read_back_by_spark_exactly(spark):
    location = created(spark)
    given = [row(k, hour=k % 3) for k in range(40)]
    frame = spark.createDataFrame(given, SCHEMA)
    assert local_append.append_frame(spark, location, frame, user_metadata="m1") is None
    assert engines(spark) == ["Apache-Spark", "delta-rs"]
    assert rows_of(spark, spark.table(TABLE)) == rows_of(spark, frame)
    # one file per partition, named as Spark names its folders
    log = Path(unquote(urlparse(location).path)) / "_delta_log"
    adds = [json.loads(line)["add"] for line in (log / "00000000000000000001.json").read_text().splitlines()
            if '"add"' in line]
    assert sorted(a["path"].rsplit("/", 1)[0] for a in adds) == [f"dt=2026-11-01/hour={h}" for h in range(3)]
    # Spark's file skipping over the statistics delta-rs wrote (microseconds) keeps each row
    for k in (0, 17, 39):
        ts = given[k][7]
        for where in (F.col("click_ts") == F.lit(ts), F.col("click_ts") >= F.lit(ts),
                      F.col("click_ts") <= F.lit(ts)):
            assert spark.table(TABLE).where(where & (F.col("ad_id") == k)).count() == 1, (k, where)
        same = sum(1 for r in given if r[7] == ts)
        assert spark.table(TABLE).where(F.col("click_ts") == F.lit(ts)).count() == same


def test_a_journaled_retry_finds_the_append_made_here_and_appends_nothing(spark, tmp_path):
    created(spark)
    journal = once.Journal.open(tmp_path / "checkpoint", 0)
    batch = BatchId("q1", 4, journal=journal)
    frame = spark.createDataFrame([row(k) for k in range(5)], SCHEMA)
    first = write(spark, SINK, frame, batch=batch, local=True)
    assert (first.rows, first.skipped, first.version) == (5, False, 1)
    assert [(p.spec, p.rows) for p in first.partitions] == [("dt=2026-11-01/hour=3", 5)]
    assert engines(spark)[-1] == "delta-rs"
    again = write(spark, SINK, frame, batch=batch, local=True)
    assert (again.skipped, again.version) == (True, 1)
    assert rows_of(spark, spark.table(TABLE)) == rows_of(spark, frame)
    # an empty batch commits nothing, as Spark's empty append does
    empty = write(spark, SINK, frame.limit(0), batch=BatchId("q1", 5, journal=journal), local=True)
    assert empty.version is None and len(engines(spark)) == 2


def test_a_sink_not_there_yet_is_created_by_spark_and_the_rows_appended_here(spark, tmp_path):
    journal = once.Journal.open(tmp_path / "checkpoint", 0)
    batch = BatchId("q1", 0, journal=journal)
    frame = spark.createDataFrame([row(k, hour=k % 2) for k in range(6)], SCHEMA)
    first = write(spark, SINK, frame, batch=batch, local=True)
    assert engines(spark) == ["Apache-Spark", "delta-rs"]  # the empty create, the rows
    assert (first.rows, first.version, first.skipped) == (6, 1, False)
    info = deltalog.describe(spark, TABLE)
    assert (info.owner, info.partition_columns) == ((SINK.owner, SINK.role), SINK.partition_by)
    assert rows_of(spark, spark.table(TABLE)) == rows_of(spark, frame)
    again = write(spark, SINK, frame, batch=batch, local=True)
    assert (again.skipped, again.version) == (True, 1) and len(engines(spark)) == 2


def test_a_new_sink_delta_refuses_to_create_is_a_message_not_a_traceback(spark, tmp_path):
    journal = once.Journal.open(tmp_path / "checkpoint", 0)
    frame = spark.createDataFrame([row(1)], SCHEMA).withColumnRenamed("n", "n x")  # Delta: no spaces
    with pytest.raises(SqlflowError, match=f"cannot write `{TABLE}`") as raised:
        write(spark, SINK, frame, batch=BatchId("q1", 0, journal=journal), local=True)
    assert "DROP TABLE" in raised.value.diagnostics[0].hint  # what to do
    assert not spark.catalog.tableExists(TABLE)


@pytest.mark.parametrize("odd", [
    {"dt": "2026 11 01"},  # a space: delta-rs percent-encodes it, Spark does not
    {"dt": "a=b"},         # escaped by both, differently
    {"dt": None},          # Spark's __HIVE_DEFAULT_PARTITION__
    {"dt": ""},            # Spark writes NULL for an empty partition string
])
def test_a_partition_value_named_otherwise_here_is_written_by_spark(spark, tmp_path, odd):
    location = created(spark)
    given = [row(1), row(2, **odd)]
    frame = spark.createDataFrame(given, SCHEMA)
    left = local_append.append_frame(spark, location, frame)
    assert left is not None and left is not frame, "the computed rows come back as a local frame"
    assert engines(spark) == ["Apache-Spark"], "nothing was written here"
    assert rows_of(spark, left) == rows_of(spark, frame)
    journal = once.Journal.open(tmp_path / "checkpoint", 0)
    written = write(spark, SINK, frame, batch=BatchId("q1", 0, journal=journal), local=True)
    assert engines(spark) == ["Apache-Spark", "Apache-Spark"] and written.rows == 2
    want = [r if r[-2] != "" else r[:-2] + (None, r[-1]) for r in given]
    assert rows_of(spark, spark.table(TABLE)) == sorted(want, key=repr)


def test_other_columns_or_types_or_a_null_in_a_not_null_column_are_left_to_spark(spark, tmp_path):
    strict = StructType([StructField(f.name, f.dataType, nullable=f.name != "ad_id") for f in SCHEMA.fields])
    location = created(spark, strict)
    nulls = spark.createDataFrame([row(1, ad_id=None)], SCHEMA)
    assert local_append.append_frame(spark, location, nulls) is not None
    wider = spark.createDataFrame([row(1)], SCHEMA).withColumn("extra", F.lit(1))
    assert local_append.append_frame(spark, location, wider) is not None
    assert engines(spark) == ["Apache-Spark"]
    journal = once.Journal.open(tmp_path / "checkpoint", 0)
    with pytest.raises(Exception, match="(?i)null|ad_id"):  # Spark's own constraint error
        write(spark, SINK, nulls, batch=BatchId("q1", 0, journal=journal), local=True)
    assert spark.table(TABLE).count() == 0
    # a frame of the table's columns and types, with no NULL where none may be, is written here
    narrower = spark.createDataFrame([row(1)], SCHEMA).withColumn("n", F.col("n").cast("bigint"))
    assert local_append.append_frame(spark, location, narrower) is not None  # Spark casts it
    fine = spark.createDataFrame([row(2)], SCHEMA)
    assert local_append.append_frame(spark, location, fine) is None
    assert engines(spark) == ["Apache-Spark", "delta-rs"]
    assert rows_of(spark, spark.table(TABLE)) == rows_of(spark, fine)
