"""The checksum file written beside a delta-rs append (`runtime.delta.version_checksum`) says
what the table holds after it, as Spark's own would: checked against the live files the log
replays to, through a Spark append after ours (which derives its checksum from ours), and
Spark reading the table. What it must not derive, it does not write."""

from __future__ import annotations

import bisect
import json
from datetime import datetime
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from helpers import delta_writers
from sqlflow.runtime.delta import commitlog as C
from sqlflow.runtime.delta import deltalog, logfiles, version_checksum

LOG = "rt_version_checksum.log"


def _folder(spark) -> Path:
    return Path(unquote(urlparse(deltalog.describe(spark, LOG).location).path))


def _crc(log: Path, version: int) -> dict:
    return json.loads((log / f"{version:020d}.crc").read_text())


def _delta_agrees(spark, table_dir: Path) -> bool:
    """Delta's own check of the latest version's checksum against its state rebuilt from the
    log (`Snapshot.validateChecksum`: size, files, histogram, protocol, metadata, ...)."""
    jvm = spark._jvm
    log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, str(table_dir))
    snapshot = log.update(False, jvm.scala.Option.empty(), jvm.scala.Option.empty())
    assert snapshot.checksumOpt().isDefined(), "Delta found no checksum"
    empty = getattr(getattr(jvm.scala.collection.immutable, "Map$"), "MODULE$").empty()
    return bool(snapshot.validateChecksum(empty))


def _truth(table_dir: Path, version: int, bounds: list[int]) -> tuple[int, int, list[int], list[int]]:
    """Size, file count and histogram of the live files at `version`, replayed from the log."""
    sizes = [a["size"] for a in logfiles.live_adds(table_dir, version).values()]
    counts, totals = [0] * len(bounds), [0] * len(bounds)
    for s in sizes:
        i = bisect.bisect_right(bounds, s) - 1
        counts[i] += 1
        totals[i] += s
    return sum(sizes), len(sizes), counts, totals


@pytest.mark.spark
def test_each_local_append_gets_the_checksum_of_the_table_after_it(spark):
    spark.sql("DROP DATABASE IF EXISTS rt_version_checksum CASCADE")
    C.ensure(spark, LOG)  # created by Spark: version 0 has its checksum
    for i in range(3):
        C.append(spark, [C.Entry("dw.a", f"dt={i}", "commit", "manual")], table=LOG)
        assert _delta_agrees(spark, _folder(spark)), f"version {i + 1}"
    spark.createDataFrame([C.Entry("dw.b", "dt=9", "commit", "manual").as_row(datetime(2026, 11, 1))],
                          C.SCHEMA).writeTo(LOG).append()
    C.append(spark, [C.Entry("dw.c", "dt=10", "commit", "manual")], table=LOG)
    assert _delta_agrees(spark, _folder(spark))
    assert delta_writers(spark, LOG) == ["Apache-Spark", "delta-rs", "delta-rs", "delta-rs",
                                         "Apache-Spark", "delta-rs"]
    table_dir = _folder(spark)
    log = table_dir / "_delta_log"
    first = _crc(log, 0)
    bounds = first["fileSizeHistogram"]["sortedBinBoundaries"]
    for version in range(1, 6):  # ours (1-3, 5) and Spark's (4, derived from our 3)
        crc = _crc(log, version)
        size, files, counts, totals = _truth(table_dir, version, bounds)
        assert (crc["tableSizeBytes"], crc["numFiles"]) == (size, files), version
        assert crc["fileSizeHistogram"]["fileCounts"] == counts, version
        assert crc["fileSizeHistogram"]["totalBytes"] == totals, version
        assert (crc["metadata"], crc["protocol"]) == (first["metadata"], first["protocol"])
    assert {r["table"] for r in spark.table(LOG).collect()} == {"dw.a", "dw.b", "dw.c"}
    spark.sql("DROP DATABASE IF EXISTS rt_version_checksum CASCADE")


def _table(tmp_path: Path, before: dict | None, commit: list[dict]) -> Path:
    log = tmp_path / "_delta_log"
    log.mkdir()
    if before is not None:
        (log / f"{0:020d}.crc").write_text(json.dumps(before))
    (log / f"{1:020d}.json").write_text("\n".join(json.dumps(a) for a in commit))
    return log


BEFORE = {"tableSizeBytes": 100, "numFiles": 1, "numMetadata": 1, "numProtocol": 1,
          "setTransactions": [], "domainMetadata": [], "metadata": {"id": "m"},
          "protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}
ADD = {"add": {"path": "p", "size": 50, "dataChange": True, "partitionValues": {}}}


OPTIMIZE = {"commitInfo": {"operation": "OPTIMIZE"}}
REMOVED = {"remove": {"path": "p0", "size": 100, "dataChange": False}}
MERGED = {"add": {"path": "m", "size": 80, "dataChange": False, "partitionValues": {}}}


def test_a_compaction_after_a_checksum_gets_one(tmp_path):
    log = _table(tmp_path, BEFORE, [OPTIMIZE, REMOVED, MERGED])
    assert version_checksum.write(str(tmp_path), 1) is True
    assert _crc(log, 1) == {**BEFORE, "tableSizeBytes": 80, "numFiles": 1}


def test_a_plain_append_after_a_checksum_gets_one(tmp_path):
    log = _table(tmp_path, BEFORE, [{"commitInfo": {"operation": "WRITE"}}, ADD])
    assert version_checksum.write(str(tmp_path), 1) is True
    assert _crc(log, 1) == {**BEFORE, "tableSizeBytes": 150, "numFiles": 2}
    assert [p.name for p in log.iterdir() if p.name.startswith(".")] == []  # no temporary left


@pytest.mark.parametrize("before, commit", [
    (None, [ADD]),  # nothing to derive from
    ({**BEFORE, "numDeletionVectorsOpt": 3}, [ADD]),  # counts it does not keep
    ({**BEFORE, "inCommitTimestampOpt": 7}, [ADD]),
    ({**BEFORE, "someNewField": 1}, [ADD]),  # a field it does not know
    (BEFORE, [ADD, {"remove": {"path": "q"}}]),  # not a blind append
    (BEFORE, [{"add": {**ADD["add"], "dataChange": False}}]),  # a re-added file
    (BEFORE, [{"add": {**ADD["add"], "deletionVector": {"cardinality": 1}}}]),
    (BEFORE, [ADD, {"metaData": {"id": "n"}}]),
    (BEFORE, [ADD, ["not", "an", "action"]]),
    # a compaction: only `remove`s with their size and `add`s that change no data
    (BEFORE, [OPTIMIZE, {"remove": {"path": "q", "dataChange": False}}, MERGED]),
    (BEFORE, [OPTIMIZE, {"remove": {**REMOVED["remove"], "dataChange": True}}, MERGED]),
    (BEFORE, [OPTIMIZE, REMOVED, ADD]),
    (BEFORE, [OPTIMIZE, REMOVED, REMOVED, MERGED]),  # removes more than the table holds
])
def test_what_it_cannot_derive_for_sure_is_not_written(tmp_path, before, commit):
    log = _table(tmp_path, before, commit)
    assert version_checksum.write(str(tmp_path), 1) is False
    assert not (log / f"{1:020d}.crc").exists()


def test_a_checksum_already_there_is_never_replaced(tmp_path):
    log = _table(tmp_path, BEFORE, [ADD])
    (log / f"{1:020d}.crc").write_text("{}")
    assert version_checksum.write(str(tmp_path), 1) is False
    assert (log / f"{1:020d}.crc").read_text() == "{}"


@pytest.mark.spark
def test_a_partitioned_sink_append_gets_the_checksum_delta_computes(spark, tmp_path):
    from sqlflow.runtime.delta import local_append

    path = tmp_path / "sink"
    rows = spark.createDataFrame([(i, f"2026-11-0{i % 3 + 1}", f"r{i}") for i in range(9)], "n long, dt string, v string")
    rows.limit(2).write.format("delta").partitionBy("dt").save(str(path))
    for _ in range(2):  # two commits of three partition files each, written here
        assert local_append.append_frame(spark, f"file://{path}", rows) is None
    log = path / "_delta_log"
    assert [(log / f"{v:020d}.crc").exists() for v in range(3)] == [True, True, True]
    assert _delta_agrees(spark, path)
    assert spark.read.format("delta").load(str(path)).count() == 2 + 2 * 9
    first = spark.read.format("delta").option("versionAsOf", 0).load(str(path)).collect()
    got = sorted(tuple(r) for r in spark.read.format("delta").load(str(path)).select("n", "dt", "v").collect())
    assert got == sorted([tuple(r) for r in first] + 2 * [tuple(r) for r in rows.collect()])


@pytest.mark.spark
def test_the_log_s_small_files_are_merged_with_every_row_kept_and_the_checksum_delta_computes(
        spark, monkeypatch, tmp_path):
    """The commit log's small files are merged every `small_files.EVERY` versions
    (`runtime.delta.small_files`): each compaction commit gets the checksum Delta computes,
    a Spark append between them is kept, every row is read exactly once by Spark and by the
    log's own files, and a journaled batch replayed after a compaction appends nothing."""
    from sqlflow.runtime.delta import commitlog_files, once, small_files
    from sqlflow.runtime.delta.sinks import BatchId

    monkeypatch.setattr(small_files, "EVERY", 4)
    spark.sql("DROP DATABASE IF EXISTS rt_version_checksum CASCADE")
    C.ensure(spark, LOG)
    entries = [C.Entry(f"dw.t{i % 3}", f"dt={i}", "commit", "stream", committed_at=datetime(2026, 11, 1, 0, i))
               for i in range(14)]
    journal = once.Journal.open(tmp_path, 0)
    for i, entry in enumerate(entries):
        if i == 6:  # a Spark append between two of ours
            spark.createDataFrame([entry.as_row(datetime(2026, 11, 1))], C.SCHEMA).writeTo(LOG).append()
            continue
        assert C.append(spark, [entry], table=LOG, batch=BatchId("m@q", i, journal=journal)) == 1
        assert _delta_agrees(spark, _folder(spark)), f"after entry {i}"
    table_dir = _folder(spark)
    log = table_dir / "_delta_log"
    ops = [a["commitInfo"].get("operation") for _, a in deltalog.commit_actions(
        spark, str(table_dir), list(range(deltalog.latest_version(spark, LOG) + 1))) if "commitInfo" in a]
    assert ops.count("OPTIMIZE") >= 2, ops
    latest = deltalog.latest_version(spark, LOG)
    for version in range(1, latest + 1):  # every version has its checksum, compactions' too
        crc = _crc(log, version)
        size, files, _, _ = _truth(table_dir, version, crc["fileSizeHistogram"]["sortedBinBoundaries"])
        assert (crc["tableSizeBytes"], crc["numFiles"]) == (size, files), version
    assert len(logfiles.live_adds(table_dir)) < len(entries) // 2  # merged, not one file a row
    want = sorted((e.table, e.partition) for e in entries)
    assert sorted((r["table"], r["partition"]) for r in spark.table(LOG).collect()) == want
    assert sorted((r["table"], r["partition"]) for r in logfiles.read_rows(table_dir)) == want
    assert commitlog_files.ready_partitions(logfiles.read_rows(table_dir), ["dw.t0"]) == \
        C.ready_partitions_read(spark, ["dw.t0"], table=LOG)
    # the last batch retried after a compaction: found by its marker, not appended again
    assert C.append(spark, [entries[-1]], table=LOG, batch=BatchId("m@q", 13, journal=journal)) == 0
    assert spark.table(LOG).count() == len(entries)
    assert sorted((r["table"], r["partition"]) for r in spark.table(LOG).collect()) == want
    spark.sql("DROP DATABASE IF EXISTS rt_version_checksum CASCADE")
