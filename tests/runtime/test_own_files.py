"""`own_files.read`: a batch's new rows of an input read from its data files as plain Parquet
must be, row for row and column for column, the rows Spark's Delta stream handed the batch:
for a partitioned table (string with NULL values, date and int partition columns) with files
written before a column was added, batches split inside versions. What a plain read cannot give exactly
(column mapping, a reader feature such as type widening, a timestamp partition, a file outside
its partition folders) is refused, and the micro-batch reads its rows as before.

Unit cases (no JVM) cover the refusals read from the log."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from rowdiff import row_diff
from sqlflow.runtime.delta import logfiles
from sqlflow.runtime.incremental import own_files


def _same(left, right) -> None:
    assert left.schema.names == right.schema.names
    assert [f.dataType for f in left.schema] == [f.dataType for f in right.schema]
    diff = row_diff(right, left)
    assert diff.equal and diff.want_rows > 0, diff


@pytest.mark.spark
def test_every_batch_s_own_files_read_as_parquet_are_the_rows_spark_handed_it(spark, tmp_path):
    """A real stream over a partitioned table (string with NULL values, date and int partition
    columns; files written before a column was added) split by `maxFilesPerTrigger` inside its
    starting snapshot and inside later commits of several files: for every micro-batch, the
    files `InputLogs.batch_adds` names read by `own_files.read` are, row for row and column for
    column, the rows Spark handed the batch."""
    from pyspark.sql import functions as F

    from sqlflow.runtime.incremental import input_logs

    name = "rt_own_files_parts"
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    rnd = random.Random(11)

    def rows(ids: range, extra: bool):
        out = (spark.range(ids.start, ids.stop)
               .withColumn("s", F.when(F.col("id") % 5 == 0, F.lit(None))
                           .otherwise(F.concat(F.lit("s"), (F.col("id") % 3).cast("string"))))
               .withColumn("d", F.expr("date_add(DATE'2026-11-01', CAST(id % 2 AS INT))"))
               .withColumn("n", (F.col("id") % 2).cast("int"))
               .withColumn("v", F.col("id") * 10))
        return out.withColumn("extra", F.concat(F.lit("x"), F.col("id").cast("string"))) if extra else out

    start = 0
    for _ in range(2):
        n = rnd.randint(60, 120)
        rows(range(start, start + n), False).repartition(rnd.randint(1, 3)).write.format("delta") \
            .mode("append").partitionBy("s", "d", "n").saveAsTable(name)
        start += n
    spark.sql(f"ALTER TABLE {name} ADD COLUMNS (extra STRING)")  # older files lack it: NULL
    table = Path(spark.sql(f"DESCRIBE DETAIL {name}").first()["location"].removeprefix("file:"))
    assert logfiles.plain_parquet(table) == ["s", "d", "n"]
    checkpoint = tmp_path / "checkpoint"
    handed: list[tuple[int, object]] = []

    def each(df, batch_id):
        handed.append((batch_id, df.persist()))
        df.count()

    def run():
        q = (spark.readStream.format("delta").option("maxFilesPerTrigger", rnd.randint(2, 4)).table(name)
             .writeStream.foreachBatch(each).option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
        q.awaitTermination()

    run()
    for _ in range(2):  # later commits of several files each: batches inside a commit
        n = rnd.randint(60, 120)
        rows(range(start, start + n), True).repartition(rnd.randint(3, 5)).write.format("delta") \
            .mode("append").saveAsTable(name)
        start += n
    run()
    logs = input_logs.InputLogs()
    logs._logs[name] = str(table / "_delta_log")
    schema = spark.table(name).schema
    assert len(handed) >= 4
    for batch_id, df in handed:
        found = logs.batch_adds(spark, name, checkpoint, batch_id, 0)
        assert found is not None and found[0] == table
        read = own_files.read(spark, table, found[1], schema, ["s", "d", "n"])
        assert read is not None, batch_id
        _same(read, df)
        df.unpersist()
    spark.sql(f"DROP TABLE {name}")

    by_time = "rt_own_files_ts"  # a timestamp partition value's string form: refused
    spark.sql(f"DROP TABLE IF EXISTS {by_time}")
    rows(range(0, 10), False).withColumn("t", F.expr("TIMESTAMP'2026-11-01 10:00:00'")).write \
        .format("delta").partitionBy("t").saveAsTable(by_time)
    table = Path(spark.sql(f"DESCRIBE DETAIL {by_time}").first()["location"].removeprefix("file:"))
    adds = list(logfiles.live_adds(table).values())
    assert own_files.read(spark, table, adds, spark.table(by_time).schema, ["t"]) is None
    spark.sql(f"DROP TABLE {by_time}")


@pytest.mark.spark
def test_many_files_are_listed_by_the_driver_without_a_job(spark):
    """More than 32 paths: Spark lists them in a job of its own unless told not to; the read
    lists them in the driver (local files), starts no job, and gives every file's rows."""
    name = "rt_own_files_many"
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    spark.range(400).selectExpr("id", "CAST(id % 2 AS INT) AS n").repartition(40).write \
        .format("delta").partitionBy("n").saveAsTable(name)
    table = Path(spark.sql(f"DESCRIBE DETAIL {name}").first()["location"].removeprefix("file:"))
    adds = list(logfiles.live_adds(table).values())
    assert len(adds) > 32
    before = spark.conf.get(own_files.LISTING_THRESHOLD, None)
    spark.sparkContext.setJobGroup("rt_own_files_listing", "the read's planning")
    try:
        read = own_files.read(spark, table, adds, spark.table(name).schema, ["n"])
        assert spark.sparkContext.statusTracker().getJobIdsForGroup("rt_own_files_listing") == []
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    assert spark.conf.get(own_files.LISTING_THRESHOLD, None) == before  # put back
    assert read is not None
    _same(read, spark.table(name))
    spark.sql(f"DROP TABLE {name}")



@pytest.mark.spark
@pytest.mark.parametrize("order", [("id", "v", "s", "n"), ("id", "v", "n", "s"), ("s", "id", "n", "v")])
def test_the_columns_are_the_table_s_in_its_order_wherever_its_partition_columns_are(spark, order):
    """Spark puts the partition columns, read from the folders, after the files' columns: the
    read gives the table's own order whether its partition columns are last in folder order
    (no projection needed), last in another order, or among the others."""
    name = "rt_own_files_order"
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    spark.range(60).selectExpr("id", "id * 10 AS v", "CONCAT('s', CAST(id % 3 AS STRING)) AS s",
                               "CAST(id % 2 AS INT) AS n").select(*order).repartition(2) \
        .write.format("delta").partitionBy("s", "n").saveAsTable(name)
    table = Path(spark.sql(f"DESCRIBE DETAIL {name}").first()["location"].removeprefix("file:"))
    assert logfiles.plain_parquet(table) == ["s", "n"]
    read = own_files.read(spark, table, list(logfiles.live_adds(table).values()),
                          spark.table(name).schema, ["s", "n"])
    assert read is not None and read.columns == list(order)
    _same(read, spark.table(name))
    spark.sql(f"DROP TABLE {name}")

def _log(tmp_path: Path, protocol: dict, configuration: dict | None = None) -> Path:
    log = tmp_path / "_delta_log"
    log.mkdir()
    meta = {"id": "m", "format": {"provider": "parquet"}, "schemaString": "{}",
            "partitionColumns": ["dt"], "configuration": configuration or {}}
    (log / f"{0:020d}.json").write_text(json.dumps({"protocol": protocol}) + "\n"
                                        + json.dumps({"metaData": meta}) + "\n")
    return tmp_path


@pytest.mark.parametrize("protocol, configuration, columns", [
    ({"minReaderVersion": 1, "minWriterVersion": 2}, None, ["dt"]),
    ({"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["timestampNtz"],
      "writerFeatures": ["timestampNtz"]}, None, ["dt"]),
    ({"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["typeWidening"],
      "writerFeatures": ["typeWidening"]}, None, None),
    ({"minReaderVersion": 2, "minWriterVersion": 5}, {"delta.columnMapping.mode": "name"}, None),
], ids=["reader 1", "timestampNtz", "type widening", "column mapping"])
def test_a_plain_parquet_read_is_refused_where_a_reader_feature_changes_the_files_meaning(
        tmp_path, protocol, configuration, columns):
    assert logfiles.plain_parquet(_log(tmp_path, protocol, configuration)) == columns


@pytest.mark.parametrize("path, values, ok", [
    ("dt=2026-11-01/part-0.parquet", {"dt": "2026-11-01"}, True),
    ("dt=__HIVE_DEFAULT_PARTITION__/part-0.parquet", {"dt": None}, True),
    ("dt=2026-11-02/part-0.parquet", {"dt": "2026-11-01"}, False),  # folder and action disagree
    ("part-0.parquet", {"dt": "2026-11-01"}, False),  # not in its partition folder
    ("x/dt=2026-11-01/part-0.parquet", {"dt": "2026-11-01"}, False),
    ("dt=a%20b/part-0.parquet", {"dt": "a b"}, False),  # a value Spark would unescape
    ("dt=a%253Ab/part-0.parquet", {"dt": "a:b"}, False),
    ("/elsewhere/dt=2026-11-01/part-0.parquet", {"dt": "2026-11-01"}, False),
    ("s3://bucket/dt=2026-11-01/part-0.parquet", {"dt": "2026-11-01"}, False),
    ("dt=2026-11-01/part-[0].parquet", {"dt": "2026-11-01"}, False),  # a glob
])
def test_a_file_is_read_plainly_only_where_its_folders_name_its_partition_values(path, values, ok):
    found = own_files._path(Path("/t"), {"path": path, "partitionValues": values}, ["dt"])
    assert (found == f"/t/{path}") if ok else found is None
