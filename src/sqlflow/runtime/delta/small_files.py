"""The commit log's small files merged by the process that appends them (docs/design.md §2.9).

Every stream micro-batch of every model appends one commit-log row with delta-rs
(`local_append`): one small Parquet file each, 86,400 a day at a one-second trigger. A
delta-rs append costs in proportion to the files the table holds: 0.03 s over a log's first
300 one-row appends, 0.16 s over appends 900-1,200 (`bench/small_files.py`). Over a 330-s
`bench/latency.py` run the commit-log step of a micro-batch grew from 0.02 to 0.06-0.09 s.

So the append from this process (`local_append`) whose commit is a version of the log that is
a multiple of `EVERY` merges the log's small files into files of up to `TARGET` bytes
(`DeltaTable.optimize.compact`, delta-rs's bin-packing `OPTIMIZE`: about 0.05 s), and the
appends stay at 0.014-0.022 s. The compaction commit changes no data (its `add` and `remove`
actions say `dataChange: false`): every reader sees the same rows before and after it, and a
Delta stream source skips it. It only ever removes files it read, and delta-rs checks its
commit against the commits since: an append by another thread, process or Spark adds files
and does not conflict. Two compactions do not run at once: delta-rs (1.6) lets a commit whose
removes say `dataChange: false` through when a concurrent commit removed the same files, so
two compactions planned from the same version would both commit, and the rows of the files
they both merged would be in the log twice. A compaction therefore holds an exclusive lock on
a file in the table's folder (`LOCK`: a name with a leading `_`, which Delta readers and
`VACUUM` leave alone) and plans from the table's newest version once it holds it; one that
finds the lock taken does nothing (the one holding it merges those files). The lock is
`flock`: between the threads and processes of one machine, which is where `local_append`
writes from. delta-rs merges only files below `TARGET`, into bins
of up to `TARGET` bytes, so a merged file stops growing there and is left alone after: a
compaction rewrites the recent files, not the whole log. Its checksum file is derived like an
append's (`version_checksum`).

A failed compaction leaves the log as it was and is not the append's failure: the row is
already committed. The next due compaction tries again; it is said as a warning (a log whose
files are never merged makes every append slower), except a commit delta-rs refused for a
conflict it detects (a concurrent change of the table's metadata or protocol, or a delete),
which the next one retries past.

Not covered: a compaction outside sqlflow (Spark's `OPTIMIZE` of the commit log) takes no
lock, and delta-rs would let ours through beside it as beside another of ours.

Not bounded here: the log's commit files themselves (`_delta_log/*.json`), kept for Delta's
`logRetentionDuration` (30 days); delta-rs lists them on every append, which still adds about
0.5 ms per 100 versions.
"""

from __future__ import annotations

import fcntl
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager

from sqlflow.runtime.delta import open_tables, version_checksum

log = logging.getLogger("sqlflow")

EVERY = 50  # versions of a log between compactions
TARGET = 2 * 1024 * 1024  # bytes: a merged file grows to this, then stays as it is
LOCK = "_sqlflow_compaction.lock"  # in the table's folder (module doc)


def appended(folder: str, version: int) -> bool:
    """After an append that made `version` of the Delta table in `folder`: merge its small
    files when the version is a multiple of `EVERY` (`compact`). True when a compaction
    committed."""
    return version % EVERY == 0 and compact(folder)


def compact(folder: str) -> bool:
    """Merge the small files of the Delta table in `folder` (see the module docstring); True
    when a compaction committed, False when there was nothing to merge, another compaction
    was running or it failed."""
    from deltalake.exceptions import CommitFailedError, DeltaError

    with _alone(folder) as alone:
        if not alone:
            return False
        try:
            table = open_tables.table(folder)  # its newest version, read under the lock
            metrics = table.optimize.compact(target_size=TARGET)
        except CommitFailedError:  # a conflict delta-rs detects: the next compaction retries
            open_tables.forget(folder)
            return False
        except (DeltaError, OSError) as exc:
            open_tables.forget(folder)
            log.warning("commit log `%s`: merging its small files failed (%s); its rows are "
                        "committed and the next compaction, %d versions on, tries again. If this "
                        "repeats, every append gets slower as the files pile up: check that the "
                        "folder's files are readable and none was removed by hand",
                        folder, str(exc).splitlines()[0] if str(exc) else type(exc).__name__, EVERY)
            return False
        if not metrics.get("numFilesRemoved"):
            return False
        version_checksum.write(folder, table.version())
        return True


@contextmanager
def _alone(folder: str) -> Iterator[bool]:
    """Hold the exclusive lock on `folder`'s `LOCK` file while the block runs: True, or False
    at once when another thread or process holds it."""
    try:
        fd = os.open(os.path.join(folder, LOCK), os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        log.warning("commit log `%s`: cannot open its compaction lock (%s); its small files are "
                    "not merged, and every append gets slower as they pile up: check that the "
                    "folder is writable", folder, exc)
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        except OSError as exc:  # a file system without locks (some network ones)
            log.warning("commit log `%s`: cannot lock its compaction lock (%s); its small files "
                        "are not merged, and every append gets slower as they pile up: keep the "
                        "log on a file system with `flock`", folder, exc)
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
