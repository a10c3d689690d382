"""Exactly-once appends through a query's journal (`sqlflow.runtime.delta.once`): the journal's
records and the commit search without a JVM; on real Spark and Delta, journaled appends carry
a marker and no Delta `txn`, and a retry finds its earlier commit whether or not it got that
far."""

from __future__ import annotations

import json

import pytest

from sqlflow.errors import SqlflowError
from sqlflow.planning.plan import Sink
from sqlflow.runtime.delta import commitlog as C
from sqlflow.runtime.delta import deltalog, once
from sqlflow.runtime.delta.sinks import BatchId, write

DB = "rt_once"


# --- the journal, no JVM ------------------------------------------------------------------------

def test_a_new_journal_decides_from_the_first_batch_its_checkpoint_has_not_planned(tmp_path):
    fresh = once.Journal.open(tmp_path / "new", next_batch=0)
    assert fresh.start == 0 and fresh.decides(0)
    older = once.Journal.open(tmp_path / "old", next_batch=8)  # a checkpoint from before the journal
    assert (older.decides(7), older.decides(8)) == (False, True)
    # opened again (a later run, more batches planned): the first start stands
    assert once.Journal.open(tmp_path / "old", next_batch=20).start == 8


def test_records_are_kept_per_app_and_table_and_pruned_to_the_newest(tmp_path):
    journal = once.Journal.open(tmp_path, 0)
    assert journal.recorded("q@1", "dw.m", 0) is None
    journal.record("q@1", "dw.m", 0, None)  # the table did not exist yet
    journal.record("q@1", "dw.m", 1, 4)
    journal.record("q@1__commit_log", "dw.m", 1, 9)
    assert (journal.recorded("q@1", "dw.m", 0), journal.recorded("q@1", "DW.M", 1),
            journal.recorded("q@1__commit_log", "dw.m", 1), journal.recorded("q@2", "dw.m", 1)) == (
        -1, 4, 9, None)
    for b in range(2, 7):
        journal.record("q@1", "dw.m", b, 10 + b)
    kept = [b for b in range(7) if journal.recorded("q@1", "dw.m", b) is not None]
    assert kept == [4, 5, 6] and len(kept) == once.KEEP
    assert journal.recorded("q@1__commit_log", "dw.m", 1) == 9  # another key is not pruned
    assert not list(tmp_path.glob(f"{once.FOLDER}/*.tmp"))


def test_a_damaged_journal_file_is_an_error_with_a_fix(tmp_path):
    journal = once.Journal.open(tmp_path, 0)
    journal.record("q@1", "dw.m", 3, 7)
    (path,) = [p for p in (tmp_path / once.FOLDER).iterdir() if p.name.endswith(".3")]
    path.write_text("{not json")
    with pytest.raises(SqlflowError, match="cannot be read") as err:
        journal.recorded("q@1", "dw.m", 3)
    assert str(path) in str(err.value) and "fresh query" in err.value.diagnostics[0].hint
    (tmp_path / once.FOLDER / "start").write_text("x")
    with pytest.raises(SqlflowError, match="journal file"):
        once.Journal.open(tmp_path, 0)


def test_a_journaled_append_carries_its_marker_and_no_delta_txn(tmp_path):
    journal = once.Journal.open(tmp_path, 0)
    mark = json.loads(once.marker("q@1", 3))
    assert once.options(BatchId("q@1", 3, journal)) == {"userMetadata": json.dumps(mark, sort_keys=True)}
    assert once.options(BatchId("q@1", 3)) == {"userMetadata": json.dumps(mark, sort_keys=True),
                                              "txnAppId": "q@1", "txnVersion": "3"}


def _log(folder, version, *actions):
    log = folder / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    (log / f"{version:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))


def test_find_reads_the_commits_after_a_version_for_a_marker_or_a_txn(tmp_path):
    table = tmp_path / "t"
    _log(table, 0, {"commitInfo": {"operation": "CREATE TABLE"}})
    _log(table, 1, {"commitInfo": {"userMetadata": once.marker("q@1", 0)}}, {"add": {"path": "a"}})
    _log(table, 2, {"commitInfo": {"userMetadata": "not json"}})
    _log(table, 3, {"txn": {"appId": "q@1", "version": 1}}, {"commitInfo": {}})
    _log(table, 4, {"commitInfo": {"userMetadata": once.marker("q@2", 2)}})

    def find(app, batch, after):
        return once.find(None, "t", str(table), app, batch, after=after, latest=4)

    assert find("q@1", 0, after=-1) == 1
    assert find("q@1", 0, after=1) is None  # only commits after the recorded version count
    assert find("q@1", 1, after=0) == 3  # a commit from before the journal: its Delta txn
    assert find("q@2", 2, after=0) == 4
    assert (find("q@1", 2, after=-1), find("q@2", 0, after=-1)) == (None, None)


# --- real Spark and Delta -----------------------------------------------------------------------

@pytest.fixture
def database(spark):
    spark.sql(f"DROP DATABASE IF EXISTS {DB} CASCADE")
    yield
    spark.sql(f"DROP DATABASE IF EXISTS {DB} CASCADE")


def _frame(spark, *rows):
    return spark.createDataFrame(list(rows), "id long, dt string")


def _commits(spark, table):
    location = deltalog.describe(spark, table).location
    latest = deltalog.latest_version(spark, table, location)
    return deltalog.commit_actions(spark, location, list(range(latest + 1)))


@pytest.mark.spark
def test_a_retry_finds_the_commit_of_its_earlier_attempt_or_appends(spark, database, tmp_path):
    journal = once.Journal.open(tmp_path, 0)
    sink = Sink(f"{DB}.m", "append_once", ("dt",))
    first = write(spark, sink, _frame(spark, (1, "2026-11-01"), (2, "2026-11-02")),
                  batch=BatchId("q@1", 0, journal))
    # the table is made empty (version 0), then the append carries the marker and no Delta txn
    assert (first.version, first.rows, first.skipped) == (1, 2, False)
    actions = [a for _, a in _commits(spark, sink.table)]
    assert not [a for a in actions if "txn" in a]
    assert [json.loads(a["commitInfo"].get("userMetadata") or "null") for a in actions if "commitInfo" in a] == [
        None, json.loads(once.marker("q@1", 0))]
    assert journal.recorded("q@1", sink.table, 0) == -1

    # a retry of batch 0 (e.g. after a crash before Spark committed it) is skipped, and says
    # what the earlier attempt wrote
    retry = write(spark, sink, _frame(spark, (1, "2026-11-01"), (2, "2026-11-02")),
                  batch=BatchId("q@1", 0, journal))
    assert (retry.version, retry.rows, retry.skipped, [p.spec for p in retry.partitions]) == (
        1, 2, True, ["dt=2026-11-01", "dt=2026-11-02"])

    # batch 1's attempt recorded itself but crashed before its append: the retry appends
    journal.record("q@1", sink.table, 1, 1)
    other = write(spark, sink, _frame(spark, (9, "2026-11-03")), batch=BatchId("q@2", 0))  # another writer
    assert other.version == 2
    done = write(spark, sink, _frame(spark, (3, "2026-11-02")), batch=BatchId("q@1", 1, journal))
    assert (done.version, done.rows, done.skipped) == (3, 1, False)
    assert write(spark, sink, _frame(spark, (3, "2026-11-02")), batch=BatchId("q@1", 1, journal)).skipped
    assert sorted(tuple(r) for r in spark.table(sink.table).collect()) == [
        (1, "2026-11-01"), (2, "2026-11-02"), (3, "2026-11-02"), (9, "2026-11-03")]


@pytest.mark.spark
def test_a_journaled_commit_log_append_is_not_repeated(spark, database, tmp_path):
    journal = once.Journal.open(tmp_path, 0)
    log = f"{DB}.commit_log"
    entries = [C.Entry("dw.m", "dt=2026-11-01", "write", "stream", "m", run_id="q@1", batch_id=4, rows=2)]
    assert C.append(spark, entries, batch=BatchId("q@1", 4, journal), table=log) == 1
    assert C.append(spark, entries, batch=BatchId("q@1", 4, journal), table=log) == 0
    assert C.append(spark, entries, batch=BatchId("q@1", 5, journal), table=log) == 1
    assert spark.table(log).count() == 2
    assert journal.recorded("q@1__commit_log", log, 4) is not None
