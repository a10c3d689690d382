"""Where a micro-batch's older rows come from (`sqlflow.runtime.offsets`, `sqlflow.runtime.incremental.older`):
pure file logic over a checkpoint's `offsets/` files, no JVM. The offsets written here have the
shapes a Delta source writes (checked against Delta 4.4 on real queries: a whole initial
snapshot delivered ends `(v + 1, -1, false)`, a snapshot or commit split by
`maxFilesPerTrigger` ends `(v, i, starting)`)."""

from __future__ import annotations

import json

from sqlflow.runtime import offsets
from sqlflow.runtime.incremental import older
from sqlflow.runtime.incremental.older import ALL_COPIES, Ledger, Source


def write_offsets(checkpoint, batch_id, *ends):
    """`offsets/<batch_id>` with one Delta offset per source: `(version, index, starting)`."""
    folder = checkpoint / "offsets"
    folder.mkdir(parents=True, exist_ok=True)
    lines = ["v1", json.dumps({"batchWatermarkMs": 0, "batchTimestampMs": 0})]
    lines += [json.dumps({"sourceVersion": 1, "reservoirId": "x", "reservoirVersion": v,
                          "index": i, "isStartingVersion": s}) for v, i, s in ends]
    (folder / str(batch_id)).write_text("\n".join(lines))


def test_offsets_name_whole_versions_only():
    assert offsets.delivered(offsets.Offset(7, -1, False)) == offsets.Delivered(6)
    assert offsets.delivered(offsets.Offset(7, -1, True)) == offsets.NOTHING
    assert offsets.delivered(offsets.Offset(7, 2, False)) is None
    assert offsets.delivered(offsets.Offset(7, 0, True)) is None
    assert offsets.delivered(None) is None


def test_start_and_end_of_a_batch_come_from_its_own_and_the_previous_offsets(tmp_path):
    write_offsets(tmp_path, 0, (3, -1, False), (5, 1, True))
    write_offsets(tmp_path, 1, (4, -1, False), (6, -1, False))
    assert offsets.start_of(tmp_path, 0, 0) == offsets.NOTHING  # a query's first batch
    assert offsets.end_of(tmp_path, 0, 0) == offsets.Delivered(2)
    assert offsets.end_of(tmp_path, 0, 1) is None  # inside the starting snapshot
    assert offsets.start_of(tmp_path, 1, 1) is None
    assert offsets.end_of(tmp_path, 1, 1) == offsets.Delivered(5)
    assert offsets.end_of(tmp_path, 2, 0) is None  # no offsets file (not written, or purged)
    (tmp_path / "offsets" / "1").write_text("v1\n{}\nnot json\n")
    assert offsets.read(tmp_path, 1) == [None]


def test_new_rows_are_a_table_version_only_from_nothing_to_a_whole_version(tmp_path):
    write_offsets(tmp_path, 0, (3, -1, False), (5, 1, True))
    write_offsets(tmp_path, 1, (3, -1, False), (6, -1, False))
    write_offsets(tmp_path, 2, (4, -1, False), (6, -1, False))
    assert older.new_rows(tmp_path, 0, 0) == (True, 2)       # the whole starting snapshot
    assert older.new_rows(tmp_path, 0, 1) == (False, None)   # part of a snapshot
    assert older.new_rows(tmp_path, 1, 0) == (True, None)    # nothing new on this input
    assert older.new_rows(tmp_path, 1, 1) == (False, None)   # the rest of a split snapshot
    assert older.new_rows(tmp_path, 2, 0) == (False, None)   # version 3: from the micro-batch
    assert older.new_rows(None, 0, 0) == (False, None)


def test_a_run_of_split_batches_reads_its_start_version_plus_its_copies(tmp_path):
    """Input 0: whole versions, then one commit split over batches 2-3, then whole again.
    Input 1: a starting snapshot split over batches 0-1. Input 2 is not joined."""
    ledger = Ledger(tmp_path, ["ods.a", "ods.b", None], copy_all=False)
    ends = [((3, -1, False), (5, 0, True), (1, -1, False)),
            ((3, -1, False), (6, -1, False), (1, -1, False)),
            ((4, 1, False), (6, -1, False), (1, -1, False)),
            ((4, 3, False), (7, -1, False), (1, -1, False)),
            ((5, -1, False), (7, -1, False), (1, -1, False))]
    seen = []
    for b, end in enumerate(ends):
        write_offsets(tmp_path, b, *end)
        before = ledger.before(b)
        after, copy = ledger.after(b, before)
        ledger.record(b, after)
        seen.append((before, copy))
    assert seen == [
        ({"ods.a": Source(None, -1), "ods.b": Source(None, -1)}, {"ods.b"}),
        ({"ods.a": Source(2, 0), "ods.b": Source(None, -1)}, set()),
        ({"ods.a": Source(2, 1), "ods.b": Source(5, 1)}, {"ods.a"}),
        ({"ods.a": Source(2, 1), "ods.b": Source(5, 2)}, {"ods.a"}),
        ({"ods.a": Source(2, 1), "ods.b": Source(6, 3)}, set()),
    ]
    # a replay of batch 4 reads what batch 4 read; records older than the last three are gone
    assert ledger.before(4) == seen[4][0]
    assert sorted(p.name for p in (tmp_path / older.FOLDER).iterdir()) == ["2", "3", "4"]


def test_a_checkpoint_without_records_reads_every_copy_inside_a_version(tmp_path):
    """Checkpoints written before the records copied every batch: a batch starting inside a
    version with no record of its predecessor reads all copies; a whole-version start reads
    the table."""
    ledger = Ledger(tmp_path, ["ods.a", "ods.b"], copy_all=False)
    write_offsets(tmp_path, 6, (9, 2, False), (4, -1, False))
    assert ledger.before(7) == {"ods.a": ALL_COPIES, "ods.b": Source(3, 6)}


def test_outer_joins_copy_every_batch_and_read_only_copies(tmp_path):
    ledger = Ledger(tmp_path, ["ods.a", "ods.b"], copy_all=True)
    write_offsets(tmp_path, 0, (3, -1, False), (4, -1, False))
    before = ledger.before(1)
    assert before == {"ods.a": ALL_COPIES, "ods.b": ALL_COPIES}
    assert ledger.after(1, before) == (before, {"ods.a", "ods.b"})
    ledger.record(1, before)
    assert not (tmp_path / older.FOLDER).exists()


def test_a_missing_or_broken_record_is_an_error_not_a_wrong_read(tmp_path):
    """Once a checkpoint has records, a batch starting inside a version must find its
    predecessor's: without it the batch would read the wrong older rows."""
    import pytest

    from sqlflow.errors import Location, SqlflowError

    ledger = Ledger(tmp_path, ["ods.a"], copy_all=False, location=Location("models/m.sql"))
    write_offsets(tmp_path, 0, (3, 1, False))
    ledger.record(0, {"ods.a": Source(None, -1)})
    assert ledger.before(1) == {"ods.a": Source(None, -1)}
    write_offsets(tmp_path, 4, (5, 0, False))
    with pytest.raises(SqlflowError, match="micro-batch 5 finds the older rows") as err:
        ledger.before(5)  # no record of batch 4
    assert "fresh checkpoint" in err.value.diagnostics[0].hint
    assert err.value.diagnostics[0].location == Location("models/m.sql")
    (tmp_path / older.FOLDER / "0").write_text("{not json")
    with pytest.raises(SqlflowError, match="cannot read"):
        ledger.before(1)


def test_a_run_kept_as_the_input_s_files_is_recorded_so_and_read_back_so(tmp_path):
    """The flag a run's first batch sets (`MicroBatch._by_files`) is written with the record
    and read back by the batches after it, as it is (a run of the state table has none: a
    record written before the flag, too)."""
    ledger = Ledger(tmp_path, ["ods.a", "ods.b"], copy_all=False)
    write_offsets(tmp_path, 0, (3, 1, False), (4, 0, False))
    ledger.record(0, {"ods.a": Source(2, -1, files=True), "ods.b": Source(3, -1)})
    assert json.loads((tmp_path / older.FOLDER / "0").read_text()) == {"ods.a": [2, -1, True], "ods.b": [3, -1]}
    assert ledger.before(1) == {"ods.a": Source(2, -1, files=True), "ods.b": Source(3, -1, files=False)}
    write_offsets(tmp_path, 1, (3, 2, False), (4, 1, False))
    after, copy = ledger.after(1, ledger.before(1))  # batch 1 ends inside both again: inherited
    assert copy == {"ods.a", "ods.b"}
    assert after == {"ods.a": Source(2, -1, files=True), "ods.b": Source(3, -1)}
