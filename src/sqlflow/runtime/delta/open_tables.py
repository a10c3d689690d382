"""The `deltalake.DeltaTable` of a local Delta table, kept between the appends of one thread.

Loading a `DeltaTable` replays the log from its newest checkpoint: 20-90 ms on the two-core
machine for a commit log or a sink a few dozen commits past a checkpoint, paid twice per
stream micro-batch (the sink's append and the commit log's, `local_append`). A table kept from
the thread's previous append is brought up to date instead (`update_incremental`: only the
commits written since, by this process, by Spark or by anyone), which is the same snapshot.

A kept table is trusted only while its folder holds the same table: the `_delta_log` folder is
the same one (its inode) and the commit file of the version the table was at when last handed
out is still the one that was there (its size and modification time; a commit file is never
rewritten, and the newest is never cleaned up). A table dropped and created again in the same
folder fails one of those and is loaded afresh: never a commit numbered after an older
table's log. A write through a kept table that fails lets it go (`forget`).

Kept per thread (each model of the stream service runs in a thread of its own, so no table is
shared between threads), at most `KEPT` per thread, the least recently used let go first.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import Any

KEPT = 8

_local = threading.local()


def table(folder: str) -> Any:
    """The `deltalake.DeltaTable` in `folder` at its latest version. Raises what `DeltaTable`
    raises for a folder that is not a Delta table."""
    from deltalake import DeltaTable  # 0.2 s first import

    kept = _kept()
    found = kept.pop(folder, None)
    held = None
    if found is not None and found[2] and _mark(folder, found[1]) == found[2]:
        held = found[0]
        try:
            held.update_incremental()
        except Exception:  # noqa: BLE001 - whatever it is, a fresh load says it properly
            held = None
    if held is None:
        held = DeltaTable(folder)
    version = held.version()
    kept[folder] = (held, version, _mark(folder, version))
    while len(kept) > KEPT:
        kept.popitem(last=False)
    return held


def forget(folder: str) -> None:
    """Let the table in `folder` go (a write through it failed: its state is not trusted)."""
    _kept().pop(folder, None)


def _kept() -> OrderedDict[str, tuple[Any, int, tuple[int, ...]]]:
    """This thread's tables: folder -> (table, the version it was marked at, `_mark` then)."""
    if not hasattr(_local, "tables"):
        _local.tables = OrderedDict()
    return _local.tables


def _mark(folder: str, version: int) -> tuple[int, ...]:
    """What tells the table in `folder` from another one there: the `_delta_log` folder's
    device and inode, and the size and modification time of its commit `version` (a commit
    file is never rewritten); () when either is missing (then no kept table matches)."""
    log = os.path.join(folder, "_delta_log")
    try:
        where = os.stat(log)
        commit = os.stat(os.path.join(log, f"{version:020d}.json"))
    except OSError:
        return ()
    return (where.st_dev, where.st_ino, commit.st_size, commit.st_mtime_ns)
