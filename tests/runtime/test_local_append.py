"""Commit-log appends written from this process (delta-rs) read back by Spark exactly as Spark's
own appends, mixed with them in one log, found by the exactly-once journal, and refused (Spark
writes instead) for a table whose protocol they could not honour."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from helpers import delta_writers
from sqlflow.runtime.delta import commitlog as C
from sqlflow.runtime.delta import deltalog, local_append, once

pytestmark = pytest.mark.spark

LOG = "rt_local_append.log"


@pytest.fixture(autouse=True)
def fresh(spark):
    spark.sql("DROP DATABASE IF EXISTS rt_local_append CASCADE")
    yield
    spark.sql("DROP DATABASE IF EXISTS rt_local_append CASCADE")


def folder(spark, table=LOG) -> Path:
    return Path(unquote(urlparse(deltalog.describe(spark, table).location).path))


def engines(spark, table=LOG) -> list[str]:
    return delta_writers(spark, table)


def test_rows_written_here_read_back_by_spark_as_given(spark):
    entries = [
        C.Entry("DW.Clicks", "dt=2026-11-01/hour=3", "write", "batch", "m", run_id="r1",
                inputs={"ods.a": 4}, rows=7, provisional=True,
                committed_at=datetime(2026, 11, 1, 3, 0, 0, 123456)),
        C.Entry("dw.clicks", "", "dirty", "stream", None, batch_id=9, late=2, quarantined=1,
                dropped=0, reason="late rows",
                committed_at=datetime(2026, 11, 1, 4, 0, tzinfo=timezone.utc)),
    ]
    assert C.append(spark, entries, table=LOG) == 2
    assert engines(spark)[-1] == "delta-rs", "the append was not written here"
    got = sorted(tuple(r) for r in spark.table(LOG).collect())
    want = sorted(e.as_row(datetime(2000, 1, 1)) for e in entries)
    # Spark returns naive timestamps in the session's time zone (UTC)
    want = [w[:-1] + (w[-1].replace(tzinfo=None),) for w in want]
    assert got == want


def test_spark_and_local_appends_share_one_log(spark):
    C.ensure(spark, LOG)
    C.append(spark, [C.Entry("dw.a", "dt=1", "commit", "manual")], table=LOG)
    spark.createDataFrame([("dw.b", "dt=2", "commit", "manual", None, None, None, None, None,
                            None, None, None, None, False, None, datetime(2026, 11, 1))],
                          C.SCHEMA).writeTo(LOG).append()
    C.append(spark, [C.Entry("dw.c", "dt=3", "commit", "manual")], table=LOG)
    kinds = engines(spark)
    assert kinds[1:] == ["delta-rs", "Apache-Spark", "delta-rs"]
    assert C.ready_partitions_of(spark, ["dw.a", "dw.b", "dw.c"], table=LOG) == {
        "dw.a": {"dt=1"}, "dw.b": {"dt=2"}, "dw.c": {"dt=3"}}


def test_a_journaled_append_carries_the_marker_the_journal_finds(spark, tmp_path):
    from sqlflow.runtime.delta.sinks import BatchId

    C.ensure(spark, LOG)
    journal = once.Journal.open(tmp_path / "checkpoint", 0)
    batch = BatchId("q1", 5, journal=journal)
    before = deltalog.latest_version(spark, LOG)
    assert C.append(spark, [C.Entry("dw.a", "dt=1", "write", "stream")], batch=batch, table=LOG) == 1
    assert engines(spark)[-1] == "delta-rs"
    found = once.find(spark, LOG, None, "q1__commit_log", 5, before)
    assert found == deltalog.latest_version(spark, LOG)
    # the retry of the same batch appends nothing
    assert C.append(spark, [C.Entry("dw.a", "dt=1", "write", "stream")], batch=batch, table=LOG) == 0
    assert spark.table(LOG).count() == 1
    assert [(r["table"], r["partition"], r["kind"], r["mode"]) for r in spark.table(LOG).collect()] == [
        ("dw.a", "dt=1", "write", "stream")]


def test_a_table_with_writer_features_is_left_to_spark(spark):
    C.ensure(spark, LOG)
    spark.sql(f"ALTER TABLE {LOG} SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    location = deltalog.describe(spark, LOG).location
    row = C.Entry("dw.a", "dt=1", "commit", "manual").as_row(datetime(2026, 11, 1))
    assert local_append.append(spark, location, [row], C.SCHEMA) is None
    assert C.append(spark, [C.Entry("dw.a", "dt=1", "commit", "manual")], table=LOG) == 1
    assert engines(spark)[-1] == "Apache-Spark"
    assert spark.table(LOG).count() == 1


def test_a_checkpoint_written_here_is_read_by_spark_and_by_the_log_replay(spark):
    from sqlflow.runtime.delta import logfiles

    C.ensure(spark, LOG)  # checkpointInterval 100: the appends below reach a checkpoint
    for i in range(C.CHECKPOINT_INTERVAL + 1):
        C.append(spark, [C.Entry("dw.a", f"dt={i}", "commit", "manual")], table=LOG)
    log = folder(spark) / "_delta_log"
    assert list(log.glob("*.checkpoint.parquet")), "no checkpoint was written"
    assert all(e == "delta-rs" for e in engines(spark)[1:])
    want = {f"dt={i}" for i in range(C.CHECKPOINT_INTERVAL + 1)}
    assert {r["partition"] for r in spark.table(LOG).collect()} == want
    assert {r["partition"] for r in logfiles.read_rows(folder(spark))} == want
    assert C.ready_partitions(spark, "dw.a", table=LOG) == want
