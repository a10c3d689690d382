"""`source_files.batch_files` against real Delta streams: for every micro-batch of a query over
two real tables, split inside its starting snapshot and inside later commits by
`maxFilesPerTrigger`, the files the module names from the log and the offsets hold exactly the
rows Spark handed the batch (every row, as multisets), and their statistics count them. A Delta
release that admits files in another order fails here.

Unit cases (no JVM) cover the offsets the module must refuse rather than guess."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from urllib.parse import unquote

import pytest

from sqlflow.runtime import offsets
from sqlflow.runtime.delta import file_stats, logfiles, source_files
from sqlflow.runtime.incremental import input_logs
from sqlflow.runtime.offsets import Offset


def _write(spark, path: Path, ids: range, files: int) -> None:
    from pyspark.sql import functions as F

    df = spark.range(ids.start, ids.stop).withColumn("tag", F.concat(F.lit("r"), F.col("id").cast("string")))
    df.repartition(files).write.format("delta").mode("append").save(str(path))


def _adds(files: list[tuple[int, dict]] | None) -> list[dict] | None:
    """`batch_files`' answer without the versions."""
    return None if files is None else [add for _, add in files]


def _file_ids(table: Path, adds: list[dict]) -> Counter:
    found: Counter = Counter()
    for a in adds:
        found.update(r["id"] for r in logfiles.file_rows(table, unquote(a["path"]), ["id"]))
    return found


@pytest.mark.spark
def test_every_batch_s_files_from_the_log_hold_exactly_the_rows_spark_handed_it(spark, tmp_path):
    from pyspark.sql import functions as F

    rnd = random.Random(7)
    tables = [tmp_path / "a", tmp_path / "b"]
    start = 0
    for table in tables:  # a few commits before the stream starts: its starting snapshot
        for _ in range(rnd.randint(2, 3)):
            n = rnd.randint(40, 120)
            _write(spark, table, range(start, start + n), rnd.randint(1, 6))
            start += n
    checkpoint = tmp_path / "checkpoint"
    seen: list[tuple[int, list[Counter]]] = []

    def each(df, batch_id):
        rows = df.groupBy("s", "id").count().collect()
        got = [Counter(), Counter()]
        for r in rows:
            got[r["s"]][r["id"]] += r["count"]
        seen.append((batch_id, got))

    def run():
        sides = [spark.readStream.format("delta").option("maxFilesPerTrigger", rnd.randint(1, 4))
                 .load(str(t)).select(F.lit(k).alias("s"), "id") for k, t in enumerate(tables)]
        q = (sides[0].unionByName(sides[1]).writeStream.foreachBatch(each)
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
        q.awaitTermination()

    run()
    for table in tables:  # later commits of several files each: batches inside a commit
        for _ in range(rnd.randint(2, 3)):
            n = rnd.randint(40, 120)
            _write(spark, table, range(start, start + n), rnd.randint(2, 7))
            start += n
    run()

    logs = input_logs.InputLogs()  # `batch_rows` reads the same files' row counts, by relation
    for k, table in enumerate(tables):
        logs._logs[f"t{k}"] = str(table / "_delta_log")
    inside = 0
    for batch_id, got in seen:
        ends = offsets.read(checkpoint, batch_id)
        starts = offsets.read(checkpoint, batch_id - 1) if batch_id else [None, None]
        for k, table in enumerate(tables):
            end, begin = ends[k], starts[k]
            assert end is not None
            inside += end.index >= 0
            adds = _adds(source_files.batch_files(table, begin, end))
            assert adds is not None, (batch_id, k, begin, end)
            assert _file_ids(table, adds) == got[k], (batch_id, k, begin, end)
            counts = [file_stats.stats(a).get("numRecords") for a in adds]
            assert sum(counts) == sum(got[k].values())
            assert logs.batch_rows(spark, f"t{k}", checkpoint, batch_id, k) == sum(got[k].values())
            # a small batch's cache is one partition by these bytes, inside a version or not
            assert logs.added_bytes(spark, f"t{k}", checkpoint, batch_id, k) == sum(a["size"] for a in adds)
    assert inside >= 4  # the stream was split inside versions, the case under test
    # every row of both tables was handed out exactly once
    for k, table in enumerate(tables):
        total = sum((got[k] for _, got in seen), Counter())
        assert total == _file_ids(table, list(logfiles.live_adds(table).values()))


def _log(tmp_path: Path, commits: list[list[dict]]) -> Path:
    import json

    log = tmp_path / "_delta_log"
    log.mkdir(parents=True)
    for v, actions in enumerate(commits):
        (log / f"{v:020d}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")
    return tmp_path


def _add(name: str, mtime: int = 0, change: bool = True) -> dict:
    return {"add": {"path": name, "modificationTime": mtime, "dataChange": change, "size": 1,
                    "partitionValues": {}}}


def test_a_commit_s_files_come_in_the_commit_s_order_and_the_snapshot_s_by_time_then_path(tmp_path):
    meta = {"metaData": {"id": "t", "configuration": {}}}
    table = _log(tmp_path, [[meta, _add("c", 5), _add("a", 9), _add("b", 5)],
                            [_add("z"), _add("y"), _add("old", change=False), _add("x")]])
    names = lambda adds: [a["path"] for a in adds]  # noqa: E731
    assert names(source_files.snapshot_order(table, 0)) == ["b", "c", "a"]
    assert names(_adds(source_files.batch_files(table, None, Offset(0, 1, True)))) == ["b", "c"]
    assert names(_adds(source_files.batch_files(table, Offset(0, 1, True), Offset(1, 0, False)))) == ["a", "z"]
    # a rewrite that changes no rows is not handed to a stream, and takes no index
    assert names(_adds(source_files.batch_files(table, Offset(1, 0, False), Offset(1, 2, False)))) == ["y", "x"]
    assert names(_adds(source_files.batch_files(table, Offset(1, -1, False), Offset(2, -1, False)))) == ["z", "y", "x"]
    assert source_files.batch_files(table, None, Offset(0, -1, True)) == []


def test_offsets_that_do_not_follow_or_commits_that_are_no_append_are_not_guessed(tmp_path):
    meta = {"metaData": {"id": "t", "configuration": {}}}
    table = _log(tmp_path, [[meta, _add("a"), _add("b")],
                            [{"remove": {"path": "a", "dataChange": True}}, _add("c")],
                            [meta, _add("d")]])
    assert source_files.batch_files(table, Offset(0, 0, False), Offset(1, 0, False)) is None  # a delete
    assert source_files.batch_files(table, Offset(2, -1, False), Offset(2, 0, False)) is None  # a schema change
    assert source_files.batch_files(table, Offset(0, 1, False), Offset(0, 0, False)) is None  # backwards
    assert source_files.batch_files(table, Offset(0, 0, True), Offset(1, 0, True)) is None  # two snapshots
    assert source_files.batch_files(table, Offset(0, 0, False), Offset(7, 0, False)) is None  # no commit 3


def test_files_are_read_by_name_at_their_version_only_where_the_name_is_unique(tmp_path):
    meta = {"metaData": {"id": "t", "configuration": {}}}
    table = _log(tmp_path, [[meta, _add("p=1/a.parquet"), _add("p=2/b.parquet")],
                            [_add("p=1/c.parquet"), _add("p=2/a.parquet")]])

    def names(grouped):
        return {v: [source_files.file_name(a["path"]) for a in adds] for v, adds in grouped.items()}

    files = source_files.batch_files(table, None, Offset(0, 0, True))
    assert names(source_files.by_version(table, files)) == {0: ["a.parquet"]}
    b = source_files.batch_files(table, Offset(0, 0, True), Offset(1, 0, False))
    assert [(v, a["path"]) for v, a in b] == [(0, "p=2/b.parquet"), (1, "p=1/c.parquet")]
    assert names(source_files.by_version(table, b)) == {0: ["b.parquet"], 1: ["c.parquet"]}
    # at version 1 two live files are named a.parquet: a read by name could take the wrong one
    assert source_files.by_version(table, [(1, {"path": "p=2/a.parquet"})]) is None


def test_a_table_whose_every_commit_only_added_files_may_be_streamed_from_its_first_commit(tmp_path):
    meta = {"metaData": {"id": "t", "configuration": {}}}
    protocol = {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}
    info = {"commitInfo": {"operation": "WRITE"}}
    appended = _log(tmp_path / "appended", [[protocol, meta, info], [_add("a"), info], [_add("b"), _add("c")]])
    assert source_files.appends_only(appended)
    assert not source_files.appends_only(appended, max_commits=2)  # a long history: the snapshot
    for name, later in (("optimized", [{"remove": {"path": "a", "dataChange": False}}, _add("ab", change=False)]),
                        ("deleted", [{"remove": {"path": "a", "dataChange": True}}]),
                        ("altered", [meta]),
                        ("vector", [{"add": {"path": "d", "dataChange": True, "deletionVector": {"x": 1}}}])):
        assert not source_files.appends_only(_log(tmp_path / name, [[protocol, meta], [_add("a")], later])), name
    cleaned = _log(tmp_path / "cleaned", [[protocol, meta], [_add("a")], [_add("b")]])
    (cleaned / "_delta_log" / f"{0:020d}.json").unlink()  # the log's cleanup took the first commits
    assert not source_files.appends_only(cleaned)
    assert not source_files.appends_only(tmp_path / "nothing")


@pytest.mark.spark
def test_a_restart_reads_exactly_the_named_files_listing_only_their_partitions(spark, tmp_path):
    """`older.files_at`: the rows of the named files of a partitioned table (string, date and
    int partition columns, a NULL partition value among them), read at their version, listing
    only the files of their partitions; a table partitioned by a timestamp gets no partition
    filter (its partition values' string form), and the same rows."""
    from pyspark.sql import functions as F

    from sqlflow.runtime.incremental import older

    name = "rt_source_files_parts"
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    rows = (spark.range(0, 400)
            .withColumn("s", F.when(F.col("id") % 5 == 0, F.lit(None)).otherwise(F.concat(F.lit("s"), F.col("id") % 3)))
            .withColumn("d", F.expr("date_add(DATE'2026-11-01', CAST(id % 2 AS INT))"))
            .withColumn("n", (F.col("id") % 2).cast("int"))
            .withColumn("t", F.expr("TIMESTAMP'2026-11-01 10:00:00' + make_interval(0, 0, 0, 0, CAST(id % 2 AS INT))")))
    rows.repartition(4).write.format("delta").partitionBy("s", "d", "n").saveAsTable(name)
    table = Path(spark.sql(f"DESCRIBE DETAIL {name}").first()["location"].removeprefix("file:"))
    adds = list(logfiles.live_adds(table).values())
    picked = ([a for a in adds if a["partitionValues"]["s"] is None][:1]
              + [a for a in adds if a["partitionValues"]["s"] == "s1"][:2])
    assert len(picked) == 3
    schema = spark.table(name).schema
    names = [source_files.file_name(a["path"]) for a in picked]
    read = older.files_at(spark, name, 0, names, schema,
                          partitions=[a["partitionValues"] for a in picked])
    got = sorted(r["id"] for r in read.collect())
    assert got == sorted(_file_ids(table, picked).elements())
    # only the files of the picked files' partitions were listed
    leaves = read._jdf.queryExecution().executedPlan().collectLeaves()
    scanned = [leaves.apply(i).metrics() for i in range(leaves.size())]
    listed = sum(m.apply("numFiles").value() for m in scanned if m.contains("numFiles"))
    same = {tuple(sorted(a["partitionValues"].items())) for a in picked}
    assert listed == sum(tuple(sorted(a["partitionValues"].items())) in same for a in adds) < len(adds)
    spark.sql(f"DROP TABLE {name}")

    by_time = "rt_source_files_ts"
    spark.sql(f"DROP TABLE IF EXISTS {by_time}")
    rows.repartition(2).write.format("delta").partitionBy("t").saveAsTable(by_time)
    table = Path(spark.sql(f"DESCRIBE DETAIL {by_time}").first()["location"].removeprefix("file:"))
    adds = list(logfiles.live_adds(table).values())[:1]
    read = older.files_at(spark, by_time, 0, [source_files.file_name(a["path"]) for a in adds],
                          spark.table(by_time).schema, partitions=[a["partitionValues"] for a in adds])
    assert sorted(r["id"] for r in read.collect()) == sorted(_file_ids(table, adds).elements())
    spark.sql(f"DROP TABLE {by_time}")
