"""A Delta table's rows read straight from its files, without a JVM (pyarrow).

`sqlflow status` must not start Spark (docs/design.md §2.11), yet it reports what the commit
log (a Delta table) says. This module replays a local table's `_delta_log/` the way Delta
defines a snapshot: the newest classic checkpoint named by `_last_checkpoint` (one parquet
file, or its numbered parts), then every `<version>.json` commit after it, `add` actions
adding a data file and `remove` actions removing one; the live files are read with pyarrow,
and partition columns come from each file's `partitionValues`.

It reads only what it can read exactly: a table whose files carry deletion vectors, a V2
(UUID-named) checkpoint, column mapping or a log with a gap between versions is reported as
`Unsupported`, and the caller says so instead of guessing. Like `deltalog`, it trusts that a
commit file appears atomically (a rename), so a reader never sees half a commit.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import unquote


class Unsupported(Exception):
    """The table uses a Delta feature this reader does not replay; read it with Spark."""


def _checkpoint(log: Path, at: int | None = None) -> tuple[int, list[Path]] | None:
    """The newest checkpoint's version and parquet parts (`_last_checkpoint`), or None. `at`:
    the newest checkpoint at or before that version instead (a single-part classic one, found
    by its file name, when `_last_checkpoint` names a later one)."""
    try:
        last = json.loads((log / "_last_checkpoint").read_text())
    except FileNotFoundError:
        last = None
    if last is not None and at is not None and int(last["version"]) > at:
        older = [int(p.name[:20]) for p in log.glob("*.checkpoint.parquet") if p.name[:20].isdigit()]
        older = [v for v in older if v <= at]
        last = {"version": max(older)} if older else None
    if last is None:
        return None
    version = int(last["version"])
    if last.get("v2Checkpoint"):
        raise Unsupported(f"checkpoint {version} is a V2 checkpoint")
    parts = last.get("parts")
    if parts:
        files = [log / f"{version:020d}.checkpoint.{k:010d}.{parts:010d}.parquet"
                 for k in range(1, parts + 1)]
    else:
        files = [log / f"{version:020d}.checkpoint.parquet"]
    if not all(f.is_file() for f in files):
        raise Unsupported(f"checkpoint {version} is not a classic checkpoint")
    return version, files


def _map(value: Any) -> dict[str, Any]:
    """A Delta map field: a dict in a JSON commit, a list of pairs in a checkpoint (pyarrow)."""
    return dict(value) if isinstance(value, list) else dict(value or {})


def _apply(files: dict[str, dict[str, Any]], action: dict[str, Any]) -> None:
    if "add" in action and action["add"]:
        add = action["add"]
        if add.get("deletionVector"):
            raise Unsupported("a data file has a deletion vector")
        files[unquote(add["path"])] = add
    elif "remove" in action and action["remove"]:
        files.pop(unquote(action["remove"]["path"]), None)
    elif "metaData" in action and action["metaData"]:
        config = _map(action["metaData"].get("configuration"))
        if config.get("delta.columnMapping.mode", "none") != "none":
            raise Unsupported("the table uses column mapping")


def _segment(log: Path, version: int | None = None) -> tuple[tuple[int, list[Path]] | None, list[int]]:
    """What a snapshot of the table at its latest version (or at `version`) is replayed from:
    the newest checkpoint at or before it (`_checkpoint`) and the versions of the commits after
    it, in order. Raises Unsupported for a gap in them or a `version` the log no longer holds."""
    versions = sorted(int(p.name[:-5]) for p in log.iterdir()
                      if p.name.endswith(".json") and p.name[:-5].isdigit())
    if version is not None:
        versions = [v for v in versions if v <= version]
    found = _checkpoint(log, version)
    start = 0 if found is None else found[0] + 1
    todo = [v for v in versions if v >= start]
    if todo != list(range(start, start + len(todo))) or not todo and found is None:
        raise Unsupported(f"the log's versions after {start - 1} are not contiguous")
    if version is not None and (todo[-1] if todo else start - 1) != version:
        raise Unsupported(f"the log holds no version {version}")
    return found, todo


def commit(log: Path, version: int) -> list[dict[str, Any]]:
    """The actions of commit `version` of the `_delta_log` folder `log`, in order (OSError: no
    such commit file; ValueError: a line that is not JSON)."""
    text = (log / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def live_adds(table_dir: Path, version: int | None = None) -> dict[str, dict[str, Any]]:
    """Data file path (relative to the table) -> its `add` action (partition values, size,
    statistics), at the latest version or at `version`. Raises FileNotFoundError when the
    folder is not a Delta table, Unsupported (above), and Unsupported for a `version` the log
    no longer holds."""
    found, todo = _segment(table_dir / "_delta_log", version)
    files: dict[str, dict[str, Any]] = {}
    if found is not None:
        import pyarrow.parquet as pq

        for part in found[1]:
            for row in pq.read_table(part, columns=["add", "remove", "metaData"]).to_pylist():
                _apply(files, {k: v for k, v in row.items() if v})
    for v in todo:
        for action in commit(table_dir / "_delta_log", v):
            _apply(files, action)
    return files


def plain_columns(table_dir: Path) -> bool:
    """Whether the local Delta table at `table_dir` names its columns in its data files and
    statistics as its schema does: no column mapping in its newest metadata (the newest
    commit's that has one, else the newest checkpoint's). False when that cannot be read here."""
    metadata = newest(table_dir, "metaData")
    return metadata is not None and _unmapped(metadata)


def _unmapped(metadata: dict[str, Any]) -> bool:
    """Whether a `metaData` action leaves column mapping off."""
    return _map(metadata.get("configuration")).get("delta.columnMapping.mode", "none") == "none"


# reader features whose tables' data files a plain Parquet read gives the same rows as Delta's
# (a file with a deletion vector is refused file by file: `_apply`, `source_files.plain_commit`)
PLAIN_READER_FEATURES = frozenset({"timestampNtz", "deletionVectors", "vacuumProtocolCheck"})


def plain_parquet(table_dir: Path) -> list[str] | None:
    """The partition columns (in order) of the local Delta table at `table_dir` when a plain
    Parquet read of its data files (with its schema, partition values from their folders)
    gives the rows Delta reads from them: no column mapping (as `plain_columns`) and a newest
    protocol that asks readers for nothing else (reader version 1, or only
    `PLAIN_READER_FEATURES`). None when not, or when that cannot be read here."""
    protocol, metadata = newest(table_dir, "protocol"), newest(table_dir, "metaData")
    if protocol is None or metadata is None or not _unmapped(metadata):
        return None
    version = protocol.get("minReaderVersion")
    features = set(protocol.get("readerFeatures") or [])
    columns = metadata.get("partitionColumns")
    if not isinstance(version, int) or version > 1 and not features <= PLAIN_READER_FEATURES \
            or not isinstance(columns, list) or not all(isinstance(c, str) for c in columns):
        return None
    return list(columns)


def newest(table_dir: Path, kind: str) -> dict[str, Any] | None:
    """The newest action of `kind` (`metaData`, `protocol`) of the local Delta table at
    `table_dir`: the newest commit's that has one, else the newest checkpoint's; None when
    there is none or the log cannot be read here."""
    log = table_dir / "_delta_log"
    found_action: dict[str, Any] | None = None
    try:
        found, todo = _segment(log)
        for v in reversed(todo):
            found_action = next((a[kind] for a in commit(log, v) if isinstance(a, dict) and a.get(kind)), None)
            if found_action is not None:
                return found_action
        if found is not None:
            import pyarrow.parquet as pq

            for part in found[1]:
                rows = pq.read_table(part, columns=[kind]).column(kind).to_pylist()
                found_action = next((m for m in rows if m), found_action)
    except (Unsupported, OSError, ValueError, KeyError):
        return None
    return found_action


def live_files(table_dir: Path) -> dict[str, dict[str, Any]]:
    """Data file path (relative to the table) -> its partition values, at the latest version
    (`live_adds`)."""
    return {path: _map(add.get("partitionValues")) for path, add in live_adds(table_dir).items()}


def read_rows(table_dir: Path) -> list[dict[str, Any]]:
    """Every row of the local Delta table at `table_dir`, as dicts (column name -> value;
    a partition column's value is its string from the log, as Delta stores it)."""
    rows: list[dict[str, Any]] = []
    for path, partition in sorted(live_files(table_dir).items()):
        rows += [{**row, **partition} for row in file_rows(table_dir, path)]
    return rows


def file_rows(table_dir: Path, path: str, columns: list[str] | None = None) -> list[dict[str, Any]]:
    """The rows of one data file of the table (a path `live_files` returned), its data columns
    only (`columns`: these of them)."""
    import pyarrow.parquet as pq

    if "://" in path or path.startswith("/"):
        raise Unsupported(f"data file {path} is outside the table's folder")
    return pq.ParquetFile(table_dir / path).read(columns=columns).to_pylist()
