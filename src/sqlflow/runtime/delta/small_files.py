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
commit against the commits since (an append by another thread, process or Spark adds files
and does not conflict; a compaction that lost a race with another one fails, and nothing is
lost: the next one merges those files). delta-rs merges only files below `TARGET`, into bins
of up to `TARGET` bytes, so a merged file stops growing there and is left alone after: a
compaction rewrites the recent files, not the whole log. Its checksum file is derived like an
append's (`version_checksum`).

A failed compaction leaves the log as it was and is not the append's failure: the row is
already committed. The next due compaction tries again.

Not bounded here: the log's commit files themselves (`_delta_log/*.json`), kept for Delta's
`logRetentionDuration` (30 days); delta-rs lists them on every append, which still adds about
0.5 ms per 100 versions.
"""

from __future__ import annotations

from sqlflow.runtime.delta import open_tables, version_checksum

EVERY = 50  # versions of a log between compactions
TARGET = 2 * 1024 * 1024  # bytes: a merged file grows to this, then stays as it is


def appended(folder: str, version: int) -> bool:
    """After an append that made `version` of the Delta table in `folder`: merge its small
    files when the version is a multiple of `EVERY` (`compact`). True when a compaction
    committed."""
    return version % EVERY == 0 and compact(folder)


def compact(folder: str) -> bool:
    """Merge the small files of the Delta table in `folder` (see the module docstring); True
    when a compaction committed, False when there was nothing to merge or it failed."""
    from deltalake.exceptions import DeltaError

    try:
        table = open_tables.table(folder)  # the thread's table the append just went through
        metrics = table.optimize.compact(target_size=TARGET)
    except (DeltaError, OSError):  # lost a race with another compaction, or a file went missing
        open_tables.forget(folder)
        return False
    if not metrics.get("numFilesRemoved"):
        return False
    version_checksum.write(folder, table.version())
    return True
