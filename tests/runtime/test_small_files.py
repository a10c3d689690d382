"""The commit log's compaction (`runtime.delta.small_files`) on real Delta tables written by
delta-rs, without a JVM: compactions never run at once (delta-rs lets two that merged the
same files both commit, and their rows would then be in the table twice), and a failed one
says so and leaves the table as it was."""

from __future__ import annotations

import fcntl
import logging
import os
import threading
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

from sqlflow.runtime.delta import open_tables, small_files

deltalake = pytest.importorskip("deltalake")


def _table(folder: Path, appends: int, start: int = 0) -> list[int]:
    """`appends` one-row appends (one small file each) to the Delta table in `folder` (created
    by the first), ids from `start`; the ids written."""
    for i in range(start, start + appends):
        deltalake.write_deltalake(str(folder), pa.table({"id": [i]}), mode="append")
    return list(range(start, start + appends))


def _ids(folder: Path) -> Counter:
    return Counter(deltalake.DeltaTable(str(folder)).to_pyarrow_table().column("id").to_pylist())


def _version(folder: Path) -> int:
    return deltalake.DeltaTable(str(folder)).version()


def test_a_compaction_does_nothing_while_another_holds_the_lock(tmp_path):
    folder = tmp_path / "log"
    ids = _table(folder, 6)
    fd = os.open(folder / small_files.LOCK, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # another process's compaction, running
        assert small_files.compact(str(folder)) is False
        assert _version(folder) == 5  # nothing committed
    finally:
        os.close(fd)
    assert small_files.compact(str(folder)) is True  # the lock let go: this one merges
    assert _version(folder) == 6
    assert _ids(folder) == Counter(ids)
    live = deltalake.DeltaTable(str(folder)).file_uris()
    assert len(live) == 1, live


def test_threads_compacting_at_once_keep_every_row_once(tmp_path):
    """Every thread loads the table at the same version and compacts at the same moment, as
    models of the stream service whose appends each made a version due for a compaction."""
    folder = tmp_path / "log"
    ids = _table(folder, 12)
    threads = 4
    ready = threading.Barrier(threads)
    done: list[bool] = []
    failed: list[BaseException] = []

    def compact() -> None:
        try:
            open_tables.table(str(folder))  # this thread's table, at the version all share
            ready.wait()
            done.append(small_files.compact(str(folder)))
        except BaseException as exc:  # noqa: BLE001 - reported below
            failed.append(exc)

    for _ in range(3):  # rounds: the race is a matter of timing
        started = [threading.Thread(target=compact) for _ in range(threads)]
        for t in started:
            t.start()
        for t in started:
            t.join()
        assert not failed, failed
        assert _ids(folder) == Counter(ids), "a row is in the table more than once, or lost"
        ids += _table(folder, 12, start=len(ids))
    assert any(done)


def test_a_failed_compaction_warns_and_leaves_the_table_as_it_was(tmp_path, caplog):
    folder = tmp_path / "log"
    _table(folder, 4)
    os.remove(sorted(folder.glob("*.parquet"))[0])  # a data file gone: the merge cannot read it
    with caplog.at_level(logging.WARNING, logger="sqlflow"):
        assert small_files.compact(str(folder)) is False
    assert _version(folder) == 3
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1, warned
    assert str(folder) in warned[0] and "merging its small files failed" in warned[0]
    assert "tries again" in warned[0]


def test_a_file_system_without_locks_skips_the_compaction_with_a_warning(tmp_path, caplog, monkeypatch):
    """`flock` refused (ENOLCK, as some network file systems answer): the append's compaction
    is skipped, said, and nothing reaches the append that called it."""
    import errno

    folder = tmp_path / "log"
    _table(folder, 3)

    def refused(fd, op):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(small_files.fcntl, "flock", refused)
    with caplog.at_level(logging.WARNING, logger="sqlflow"):
        assert small_files.appended(str(folder), small_files.EVERY) is False
    assert _version(folder) == 2
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and "No locks available" in warned[0] and str(folder) in warned[0], warned
