"""The commit log on real Delta: readiness, dirty/provisional until settled, idempotent appends."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from sqlflow.runtime.delta import commitlog as C
from sqlflow.runtime.delta import commitlog_files, deltalog, logfiles
from sqlflow.runtime.delta.sinks import BatchId, PartitionWrite, WriteResult

pytestmark = pytest.mark.spark

LOG = "rt_commitlog.log"
T0 = datetime(2026, 11, 2, 8, 0)


@pytest.fixture(autouse=True)
def fresh(spark):
    spark.sql("DROP DATABASE IF EXISTS rt_commitlog CASCADE")
    yield
    spark.sql("DROP DATABASE IF EXISTS rt_commitlog CASCADE")


def at(minutes):
    return T0 + timedelta(minutes=minutes)


def without_jvm(spark, tables):
    """open_partitions as `sqlflow status` reads it: the log's files, pyarrow, no Spark."""
    folder = Path(unquote(urlparse(deltalog.describe(spark, LOG).location).path))
    return [(p["partition"], p["dirty"], p["provisional"], tuple(p["reasons"]))
            for p in commitlog_files.open_partitions(logfiles.read_rows(folder), tables)]


def with_spark(spark, tables):
    return [(s.partition, s.dirty, s.provisional, s.reasons)
            for s in C.open_partitions(spark, tables, table=LOG)]


def test_partition_specs_round_trip():
    spec = C.partition_spec({"dt": "2026-11-01", "hour": 3})
    assert spec == "dt=2026-11-01/hour=3"
    assert C.parse_partition(spec) == {"dt": "2026-11-01", "hour": "3"}
    assert C.parse_partition("") == {}
    with pytest.raises(ValueError, match="not a partition"):
        C.parse_partition("2026-11-01")


def test_ready_partitions_are_the_committed_ones(spark):
    C.append(spark, [
        C.Entry("dim.dim_user", "dt=2026-11-01", "commit", "manual", committed_at=at(0)),
        C.Entry("dim.dim_user", "dt=2026-11-02", "write", "batch", committed_at=at(1)),
        C.Entry("dim.dim_ad", "dt=2026-11-02", "commit", "marker", committed_at=at(2)),
    ], table=LOG)
    assert C.ready_partitions(spark, "DIM.dim_user", table=LOG) == {"dt=2026-11-01"}
    assert C.ready_partitions(spark, "dim.dim_ad", table=LOG) == {"dt=2026-11-02"}
    assert C.ready_partitions(spark, "dim.none", table=LOG) == set()
    # a log appended to by every micro-batch: Delta checkpoints it every 100 commits, not 10
    props = {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES {LOG}").collect()}
    assert props.get("delta.checkpointInterval") == str(C.CHECKPOINT_INTERVAL) == "100"
    # each append is one file, however many rows (spark.default.parallelism would make 4)
    assert spark.sql(f"DESCRIBE DETAIL {LOG}").collect()[0]["numFiles"] == 1


def test_dirty_and_provisional_until_a_batch_rewrite_settles_them(spark):
    t = "dw.m"
    C.append(spark, [
        C.Entry(t, "dt=2026-11-01", "write", "stream", provisional=True, committed_at=at(0)),
        C.Entry(t, "dt=2026-11-01", "write", "stream", committed_at=at(1)),
        C.Entry(t, "dt=2026-11-02", "dirty", "stream", reason="late match", committed_at=at(2)),
        C.Entry(t, "dt=2026-11-03", "dirty", "stream", reason="dropped", committed_at=at(3)),
        C.Entry(t, "dt=2026-11-03", "repair", "batch", committed_at=at(4)),
        C.Entry(t, "dt=2026-11-04", "write", "batch", committed_at=at(5)),
        C.Entry(t, "dt=2026-11-04", "write", "stream", provisional=True, committed_at=at(6)),
    ], table=LOG)
    got = [(s.partition, s.dirty, s.provisional, s.reasons)
           for s in C.open_partitions(spark, [t], table=LOG)]
    assert got == [("dt=2026-11-01", False, True, ("write",)),
                   ("dt=2026-11-02", True, False, ("late match",)),
                   ("dt=2026-11-04", False, True, ("write",))]
    assert without_jvm(spark, [t]) == got
    C.append(spark, [C.Entry(t, "dt=2026-11-01", "write", "batch", committed_at=at(7))], table=LOG)
    assert [s.partition for s in C.open_partitions(spark, table=LOG)] == [
        "dt=2026-11-02", "dt=2026-11-04"]
    # after a Delta checkpoint, the file reader starts from it (and the commits after it)
    jvm = spark.sparkContext._jvm
    folder = str(urlparse(deltalog.describe(spark, LOG).location).path)
    jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, folder).checkpoint()
    C.append(spark, [C.Entry(t, "dt=2026-11-05", "dirty", "stream", reason="late", committed_at=at(8))],
             table=LOG)
    assert (Path(folder) / "_delta_log" / "_last_checkpoint").is_file()
    assert without_jvm(spark, None) == with_spark(spark, None) and len(with_spark(spark, None)) == 3


def test_a_full_refresh_starts_the_table_with_fresh_commit_state(spark):
    """The dropped table's commits and dirty rows stay as history but no longer count; the
    other tables' rows and the rebuilt table's new rows do."""
    t, other = "dw.routed_a", "dw.other"
    C.append(spark, [
        C.Entry(t, "dt=2026-11-01/hour=1", "commit", "stream", committed_at=at(0)),
        C.Entry(t, "dt=2026-11-01/hour=2", "dirty", "stream", reason="late", committed_at=at(1)),
        C.Entry(other, "dt=2026-11-01/hour=1", "commit", "stream", committed_at=at(1)),
    ], table=LOG)
    assert C.refreshed(spark, [t], "routed", table=LOG) == 1
    assert C.ready_partitions(spark, t, table=LOG) == set()
    assert C.open_partitions(spark, [t], table=LOG) == [] == without_jvm(spark, [t])
    assert C.ready_partitions(spark, other, table=LOG) == {"dt=2026-11-01/hour=1"}
    C.append(spark, [C.Entry(t, "dt=2026-11-01/hour=3", "commit", "stream")], table=LOG)
    assert C.ready_partitions(spark, t, table=LOG) == {"dt=2026-11-01/hour=3"}
    assert spark.table(LOG).count() == 5  # history kept


def test_a_replayed_batch_appends_nothing_twice(spark):
    result = WriteResult("dw.m", "append_once", 3, rows=5, partitions=(
        PartitionWrite((("dt", "2026-11-01"),), 2, 1), PartitionWrite((("dt", "2026-11-02"),), 3, 1)))
    entries = C.write_entries(result, mode="stream", model="m", batch_id=7, inputs={"ods.x": 4})
    assert [(e.partition, e.rows, e.batch_id) for e in entries] == [
        ("dt=2026-11-01", 2, 7), ("dt=2026-11-02", 3, 7)]
    assert C.append(spark, entries, batch=BatchId("m@q", 7), table=LOG) == 2
    C.append(spark, entries, batch=BatchId("m@q", 7), table=LOG)
    rows = spark.table(LOG).orderBy("partition").collect()
    assert [(r["partition"], r["rows"], r["inputs"]) for r in rows] == [
        ("dt=2026-11-01", 2, '{"ods.x": 4}'), ("dt=2026-11-02", 3, '{"ods.x": 4}')]


def test_readiness_from_the_log_s_files_equals_spark_s_and_reads_each_file_once(spark, monkeypatch):
    """READY from the log's own files (`commitlog_ready`, no Spark job) equals Spark's read of
    the same log, through commits, a full refresh and commits after it; a later question reads
    only the data files added since (Delta data files never change), and after an OPTIMIZE
    only the file that replaced them."""
    from sqlflow.runtime.delta import commitlog_ready

    dims = ["dim.a", "DIM.B", "dim.none"]
    read = []
    original = logfiles.file_rows
    monkeypatch.setattr(logfiles, "file_rows", lambda *a, **k: read.append(a[1]) or original(*a, **k))

    def both():
        location = deltalog.describe(spark, LOG).location
        return commitlog_ready.ready_partitions_of(spark, location, dims), C.ready_partitions_read(spark, dims, table=LOG)

    C.append(spark, [C.Entry("dim.a", "dt=2026-11-01", "commit", "marker", committed_at=at(0)),
                     C.Entry("dim.b", "dt=2026-11-01", "commit", "marker", committed_at=at(0)),
                     C.Entry("dim.b", "dt=2026-11-02", "write", "batch", committed_at=at(1))], table=LOG)
    files, spark_read = both()
    assert files == spark_read == {"dim.a": {"dt=2026-11-01"}, "dim.b": {"dt=2026-11-01"}, "dim.none": set()}
    assert len(read) == 1
    C.refreshed(spark, ["dim.b"], "m", table=LOG)  # dim.b's earlier commits no longer count
    C.append(spark, [C.Entry("dim.b", "dt=2026-11-03", "commit", "stream")], table=LOG)
    C.append(spark, [C.Entry("dim.a", f"dt=2026-11-{d:02d}", "commit", "marker") for d in (2, 3)], table=LOG)
    read.clear()
    files, spark_read = both()
    assert files == spark_read == {"dim.a": {"dt=2026-11-01", "dt=2026-11-02", "dt=2026-11-03"},
                                   "dim.b": {"dt=2026-11-03"}, "dim.none": set()}
    assert len(read) == 3  # the three files added since, not the first one again
    assert C.ready_partitions_of(spark, dims, table=LOG) == files
    spark.sql(f"OPTIMIZE {LOG}")  # the files replaced: the removed ones are forgotten, the new read
    read.clear()
    assert both()[0] == files and len(read) == 1
