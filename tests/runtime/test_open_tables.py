"""`open_tables`: a thread's `deltalake.DeltaTable` kept between its appends, brought up to date,
and let go when its folder holds another table (no JVM: delta-rs writes the tables)."""

from __future__ import annotations

import shutil
import threading

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from sqlflow.runtime.delta import open_tables


def rows(*values: int) -> pa.Table:
    return pa.table({"n": pa.array(values, pa.int64())})


def append(folder: str, *values: int) -> None:
    """An append through the kept table, as `local_append` makes it."""
    write_deltalake(open_tables.table(folder), rows(*values), mode="append")


def read(folder: str) -> list[int]:
    return sorted(DeltaTable(folder).to_pyarrow_table().column("n").to_pylist())


@pytest.fixture(autouse=True)
def empty_cache():
    open_tables._kept().clear()
    yield
    open_tables._kept().clear()


def test_a_kept_table_is_reused_and_sees_what_other_writers_committed(tmp_path):
    folder = str(tmp_path / "t")
    write_deltalake(folder, rows(1))
    append(folder, 2)
    kept = open_tables.table(folder)
    write_deltalake(folder, rows(3), mode="append")  # another writer (a fresh load of its own)
    again = open_tables.table(folder)
    assert again is kept
    assert again.version() == 2
    write_deltalake(again, rows(4), mode="append")
    assert read(folder) == [1, 2, 3, 4]
    assert DeltaTable(folder).version() == 3


def test_a_table_created_again_in_the_same_folder_is_loaded_afresh(tmp_path):
    folder = str(tmp_path / "t")
    write_deltalake(folder, rows(1))
    append(folder, 2)
    append(folder, 3)  # the kept table is at version 2
    old = open_tables.table(folder)
    shutil.rmtree(folder)
    for v in range(4):  # a new table whose log reaches past the old one's version
        write_deltalake(folder, rows(10 + v), mode="append")
    new = open_tables.table(folder)
    assert new is not old
    assert new.version() == 3
    write_deltalake(new, rows(20), mode="append")
    assert read(folder) == [10, 11, 12, 13, 20]
    assert DeltaTable(folder).history()[0]["version"] == 4  # no gap in the new log


def test_a_table_whose_write_failed_is_loaded_again(tmp_path):
    folder = str(tmp_path / "t")
    write_deltalake(folder, rows(1))
    kept = open_tables.table(folder)
    assert open_tables.table(folder) is kept
    open_tables.forget(folder)
    assert open_tables.table(folder) is not kept


def test_each_thread_keeps_its_own_tables_and_at_most_kept_of_them(tmp_path):
    folders = [str(tmp_path / f"t{i}") for i in range(open_tables.KEPT + 1)]
    for f in folders:
        write_deltalake(f, rows(1))
        append(f, 2)
    assert list(open_tables._kept()) == folders[1:]  # the least recently used let go
    mine = open_tables.table(folders[-1])
    theirs = []
    worker = threading.Thread(target=lambda: theirs.append(open_tables.table(folders[-1])))
    worker.start()
    worker.join()
    assert theirs and theirs[0] is not mine
    assert open_tables.table(folders[-1]) is mine
