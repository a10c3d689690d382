"""READY (docs/design.md §2.3) from the commit log's own files, without a Spark job.

Every model joining a dimension that sets `ready_marker` asks which of its partitions have a
`commit` row before each backfill and each micro-batch (`snapshot.pin` syncs the markers
against it, then pins the READY view the model's SQL reads at one log version, by Spark as
before). Over Spark that question is three jobs over every file of the log (the rows, the
latest `refresh` per table, their join): about 1.5 s on the two-core machine
(`bench/commitlog_ready.py`).

Here the log's live files come from its `_delta_log` (`logfiles.live_files`: the newest
checkpoint and the commits after it) and each data file is read with pyarrow once per process,
keeping only its `commit` and `refresh` rows: a Delta data file never changes after its commit,
so a later question reads only the files added since. The rules are the Spark reader's
(`commitlog_files.ready_partitions`, checked against it in tests/runtime/test_commitlog.py).
None (the caller asks Spark) when the log is not a local folder (Spark Connect, a cluster's
remote file system) or uses a Delta feature `logfiles` does not replay.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from sqlflow.runtime.delta import commitlog_files, deltalog, logfiles

COLUMNS = ["table", "partition", "kind", "committed_at"]
KINDS = ("commit", "refresh")

# data file (absolute path) -> its `commit` and `refresh` rows; entries of files no longer live
# in their log are dropped at the next read of that log
_rows: dict[str, list[dict[str, Any]]] = {}
_lock = threading.Lock()


def ready_partitions_of(spark: SparkSession, location: str | None,
                        tables: Sequence[str]) -> dict[str, set[str]] | None:
    """READY of each of `tables` (keys lower-cased) from the files of the log at `location`;
    None when they cannot be read here."""
    log = deltalog.local_log(spark, location)
    if log is None:
        return None
    folder = Path(log).parent
    try:
        live = logfiles.live_files(folder)
        rows = []
        for path in sorted(live):
            rows += _kept_rows(folder, path)
    except (logfiles.Unsupported, OSError):
        return None
    _forget_dead(folder, live)
    return commitlog_files.ready_partitions(rows, tables)


def _kept_rows(folder: Path, path: str) -> list[dict[str, Any]]:
    key = str(folder / path)
    with _lock:
        found = _rows.get(key)
    if found is None:
        found = [r for r in logfiles.file_rows(folder, path, COLUMNS) if r["kind"] in KINDS]
        with _lock:
            _rows[key] = found
    return found


def _forget_dead(folder: Path, live: dict[str, Any]) -> None:
    prefix = str(folder) + "/"
    keep = {str(folder / p) for p in live}
    with _lock:
        for key in [k for k in _rows if k.startswith(prefix) and k not in keep]:
            del _rows[key]

