"""`log_stats.prove_clean` and the log reading under it (`input_logs._commit_adds`,
`logfiles.plain_columns`), on hand-written Delta statistics and log folders: no JVM. What a
micro-batch counts without a Spark job must be proven by every file's statistics, each bound
widened by Delta's millisecond truncation; anything unsaid is "not proven"."""

from __future__ import annotations

import json
from pathlib import Path

from sqlflow.runtime.delta import logfiles
from sqlflow.runtime.incremental import input_logs, log_stats

S = 1_000_000  # µs
MINUTE = 60 * S
RULE = log_stats.Rule("t", "i", lateness_us=10 * MINUTE, future_us=5 * MINUTE, ranged=("t",))


def iso(us: int) -> str:
    """µs since the epoch as Delta records a timestamp statistic: to the millisecond, truncated."""
    seconds, rest = divmod(us, S)
    minutes, second = divmod(seconds, 60)
    return f"1970-01-01T00:{minutes:02d}:{second:02d}.{rest // 1000:03d}Z"


def add(rows: int, t: tuple[int, int] | None, i: tuple[int, int] | None, *, t_nulls: int = 0,
        i_nulls: int = 0, stats: bool = True) -> dict:
    """An `add` action whose statistics say `rows` rows, `t` and `i` between the given µs."""
    if not stats:
        return {"path": "f.parquet", "dataChange": True}
    found: dict = {"numRecords": rows, "nullCount": {"t": t_nulls, "i": i_nulls},
                   "minValues": {}, "maxValues": {}}
    for name, span in (("t", t), ("i", i)):
        if span is not None:
            found["minValues"][name], found["maxValues"][name] = iso(span[0]), iso(span[1])
    return {"path": "f.parquet", "dataChange": True, "stats": json.dumps(found)}


def test_files_within_lateness_and_tolerance_are_proven_clean_with_widened_ranges():
    adds = [add(4, (20 * MINUTE + 1_234, 21 * MINUTE), (21 * MINUTE, 22 * MINUTE + 999)),
            add(0, None, None),  # an empty file says nothing and needs nothing
            add(2, (25 * MINUTE, 26 * MINUTE + 5_678), (26 * MINUTE, 27 * MINUTE))]
    found = log_stats.prove_clean(adds, RULE)
    assert found is not None
    assert found.rows == 6
    # the recorded minimum 20:00.001 (truncated from .001234) less a millisecond; the recorded
    # maximum 26:00.005 plus 999 µs holds the true 26:00.005678
    assert found.ranges == {"t": (20 * MINUTE + 1_000 - 1_000, 26 * MINUTE + 5_000 + 999)}
    assert found.newest_ingest_us == 27 * MINUTE  # as recorded: the newest ingest of the files


def test_a_file_that_may_hold_a_late_future_or_untimed_row_is_not_proven():
    late = add(3, (10 * MINUTE, 12 * MINUTE), (11 * MINUTE, 20 * MINUTE))  # 10:00 vs 20:00 - 10 min
    future = add(3, (20 * MINUTE, 25 * MINUTE), (19 * MINUTE, 20 * MINUTE))  # 25:00 vs 19:00 + 5 min
    untimed = add(3, (20 * MINUTE, 21 * MINUTE), (20 * MINUTE, 21 * MINUTE), t_nulls=1)
    clean = add(3, (20 * MINUTE, 21 * MINUTE), (20 * MINUTE, 21 * MINUTE))
    for bad in (late, future, untimed):
        assert log_stats.prove_clean([clean, bad], RULE) is None
    assert log_stats.prove_clean([clean], RULE) is not None


def test_a_row_exactly_at_the_limit_is_not_proven_within_a_millisecond():
    """Exactly 10 minutes late is clean, but the statistics are a millisecond coarse: a file
    whose event and ingest times come within two milliseconds of the limit is counted by
    Spark (the exact rule), never guessed."""
    at_limit = add(1, (20 * MINUTE, 20 * MINUTE), (30 * MINUTE, 30 * MINUTE))
    assert log_stats.prove_clean([at_limit], RULE) is None
    roomy = add(1, (20 * MINUTE + 2_000, 20 * MINUTE + 2_000), (30 * MINUTE, 30 * MINUTE))
    assert log_stats.prove_clean([roomy], RULE) is not None


def test_statistics_that_do_not_say_are_not_a_proof():
    assert log_stats.prove_clean([add(3, None, None, stats=False)], RULE) is None
    assert log_stats.prove_clean([add(3, None, (0, MINUTE))], RULE) is None  # no event-time bounds
    assert log_stats.prove_clean([add(3, (MINUTE, MINUTE), None)], RULE) is None  # ingest unknown
    no_nulls = json.loads(add(3, (MINUTE, MINUTE), (MINUTE, MINUTE))["stats"])
    del no_nulls["nullCount"]
    assert log_stats.prove_clean([{"stats": json.dumps(no_nulls)}], RULE) is None


def test_an_ingest_time_null_in_every_row_rules_out_nothing_and_is_no_newest():
    """A row with a NULL ingest time is neither late nor future (docs/design.md §2.1)."""
    found = log_stats.prove_clean([add(2, (MINUTE, MINUTE), None, i_nulls=2)], RULE)
    assert found is not None and found.rows == 2 and found.newest_ingest_us is None
    without = log_stats.Rule("t", None, lateness_us=0, future_us=0)
    assert log_stats.prove_clean([add(2, (MINUTE, 2 * MINUTE), (30 * MINUTE, 30 * MINUTE))], without) is not None


def _commit(log: Path, version: int, *actions: dict) -> None:
    log.mkdir(parents=True, exist_ok=True)
    (log / f"{version:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))


METADATA = {"metaData": {"id": "x", "format": {"provider": "parquet"}, "schemaString": "{}",
                         "partitionColumns": [], "configuration": {}}}


def test_the_files_a_batch_brought_are_the_data_changing_adds_of_its_commits(tmp_path):
    log = tmp_path / "_delta_log"
    _commit(log, 0, {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}, METADATA,
            {"add": {"path": "a", "size": 1, "dataChange": True}})
    _commit(log, 1, {"add": {"path": "b", "size": 2, "dataChange": True}})
    _commit(log, 2, {"remove": {"path": "a", "dataChange": False}},  # a compaction: no new rows
            {"add": {"path": "ab", "size": 3, "dataChange": False}})
    _commit(log, 3, {"add": {"path": "c", "size": 4}})
    assert [a["path"] for a in input_logs._commit_adds(str(log), None, 1)] == ["a", "b"]
    assert [a["path"] for a in input_logs._commit_adds(str(log), 1, 3)] == ["c"]
    assert input_logs._commit_adds(str(log), 3, 3) == []
    assert input_logs._summed(input_logs._commit_adds(str(log), None, 3)) == 7
    _commit(log, 4, {"remove": {"path": "b", "dataChange": True}})  # a delete: no plain append
    _commit(log, 5, METADATA)  # a schema change after the first commit
    _commit(log, 6, {"add": {"path": "d", "size": 5, "deletionVector": {"storageType": "u"}}})
    for v in (4, 5, 6):
        assert input_logs._commit_adds(str(log), v - 1, v) is None, v
    assert input_logs._commit_adds(str(log), 6, 7) is None  # a commit the log does not hold
    assert input_logs._commit_adds(str(log), -1, input_logs.SUMMED_COMMITS + 5) is None  # too many


def test_a_batch_reads_its_commits_once_for_its_size_and_its_files(tmp_path, monkeypatch):
    log = tmp_path / "_delta_log"
    _commit(log, 0, METADATA, {"add": {"path": "a", "size": 1}})
    _commit(log, 1, {"add": {"path": "b", "size": 2}})
    reads = []
    real = input_logs._commit_adds
    monkeypatch.setattr(input_logs, "_commit_adds", lambda *a: reads.append(a) or real(*a))
    logs = input_logs.InputLogs()
    for _ in range(2):  # `added_bytes`, then `new_files`, of one batch
        assert [a["path"] for a in logs._commit_adds(str(log), 0, 1)] == ["b"]
    assert [a["path"] for a in logs._commit_adds(str(log), None, 1)] == ["a", "b"]  # the next batch
    assert reads == [(str(log), 0, 1), (str(log), None, 1)]


def test_a_table_with_column_mapping_does_not_name_its_statistics_by_column(tmp_path):
    log = tmp_path / "_delta_log"
    _commit(log, 0, METADATA)
    _commit(log, 1, {"add": {"path": "a", "size": 1}})
    assert logfiles.plain_columns(tmp_path)
    mapped = json.loads(json.dumps(METADATA))
    mapped["metaData"]["configuration"] = {"delta.columnMapping.mode": "name"}
    _commit(log, 2, mapped)
    assert not logfiles.plain_columns(tmp_path)
    assert not logfiles.plain_columns(tmp_path / "nowhere")
    gap = tmp_path / "gap"
    _commit(gap / "_delta_log", 0, METADATA)
    _commit(gap / "_delta_log", 2, {"add": {"path": "a", "size": 1}})  # no commit 1: not read here
    assert not logfiles.plain_columns(gap)
    _commit(gap / "_delta_log", 1, {"add": {"path": "b", "size": 1}})
    assert logfiles.plain_columns(gap)
