"""The checksum file (`_delta_log/<version>.crc`) of a blind append that delta-rs committed,
derived from the version before's, as Spark's Delta writer derives its own (docs/design.md §2.9).

Spark's Delta writer puts beside every commit a checksum file: the table's protocol, metadata,
size, file count and file-size histogram after it. delta-rs writes none. A reader that moves
a table's snapshot to such a version must rebuild its protocol and metadata from the log: a
Spark job. A Delta stream source does that on every trigger for each input that gained a
commit (its `latestOffset` lists the new commits, then updates the table's snapshot when the
listing passed the one it has): 0.15-0.25 s a source a trigger on two cores, measured in
`bench/latency.py`'s queries, where the inputs gain two commits a second. sqlflow's small
appends go through delta-rs (`local_append`), so every stream that reads a table another
model of the project streams into paid it.

After such an append, `write` derives the new version's checksum from the version before's,
the way Delta derives one incrementally (`Checksum.computeNewChecksum`): size and file count
grow by the commit's `add` actions, each file counted in its histogram bin; protocol, metadata,
transactions and domain metadata stay as they were; the list of files and the last manifest
commit are left out (Delta's incremental checksum leaves them out too unless configured). A
compaction of small files (`small_files`, a delta-rs `OPTIMIZE` commit: `remove` and `add`
actions that change no data, each with its size) is derived the same way, its removed files
taken out of size, count and histogram.
It writes nothing when it cannot be sure of the result: the version before has no checksum
(or one in a shape it does not know), the commit holds anything but `add` actions of new data
files (or a compaction's actions) and `commitInfo`, a file carries a deletion vector, a removed
file's size is missing or not in the histogram, or the table records deletion-vector counts or
in-commit timestamps. The file is written under a temporary name and linked into place only if
it is not there, so a reader never sees half of one. A checksum that is not written costs
the next reader that Spark job, nothing else.
"""

from __future__ import annotations

import bisect
import json
import os
import uuid
from pathlib import Path
from typing import Any

from sqlflow.runtime.delta import deltalog, logfiles

# checksum fields whose value an append of plain files leaves as it is
_KEPT = {"numMetadata", "numProtocol", "setTransactions", "domainMetadata", "metadata", "protocol"}
# fields this append may derive (or leave out); a checksum with any other field is not derived
_DERIVED = {"txnId", "tableSizeBytes", "numFiles", "fileSizeHistogram", "histogramOpt", "allFiles",
            "lastManifestCommit"}
# fields of deletion vectors and in-commit timestamps: derived only when absent or null
_ABSENT = {"numDeletedRecordsOpt", "numDeletionVectorsOpt", "deletedRecordCountsHistogramOpt",
           "inCommitTimestampOpt"}


def write(folder: str, version: int) -> bool:
    """Write the checksum of `version` of the Delta table in `folder` (a blind append of data
    files, just committed); False, having written nothing, when it cannot be derived for sure
    (see the module docstring) or is already there."""
    log = os.path.join(folder, "_delta_log")
    target = os.path.join(log, f"{version:020d}.crc")
    if version < 1 or os.path.exists(target):
        return False
    before = deltalog.checksum(log, version - 1)  # {}: none, or not one
    if not before:
        return False
    try:
        actions = logfiles.commit(Path(log), version)
    except (OSError, ValueError):
        return False
    after = derive(before, actions)
    if after is None:
        return False
    return _publish(log, target, json.dumps(after, separators=(",", ":")))


def derive(before: Any, actions: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The checksum after `actions` (one commit) given the one `before` it; None when this
    module does not derive it (see the module docstring).

    >>> before = {"tableSizeBytes": 10, "numFiles": 1, "numMetadata": 1, "numProtocol": 1,
    ...           "metadata": {"id": "m"}, "protocol": {"minReaderVersion": 1},
    ...           "fileSizeHistogram": {"sortedBinBoundaries": [0, 8, 16],
    ...                                 "fileCounts": [0, 1, 0], "totalBytes": [0, 10, 0]}}
    >>> after = derive(before, [{"commitInfo": {"txnId": "t"}},
    ...                         {"add": {"path": "a", "size": 16, "dataChange": True}},
    ...                         {"add": {"path": "b", "size": 3, "dataChange": True}}])
    >>> after["tableSizeBytes"], after["numFiles"], after["txnId"], after["fileSizeHistogram"]["fileCounts"]
    (29, 3, 't', [1, 1, 1])
    >>> derive(before, [{"remove": {"path": "a"}}]) is None
    True
    >>> derive({**before, "numDeletionVectorsOpt": 0}, []) is None
    True
    """
    if not isinstance(before, dict) or not isinstance(before.get("metadata"), dict) \
            or not isinstance(before.get("protocol"), dict):
        return None
    if set(before) - _KEPT - _DERIVED - _ABSENT or any(before.get(k) is not None for k in _ABSENT):
        return None
    size, files = before.get("tableSizeBytes"), before.get("numFiles")
    if not isinstance(size, int) or not isinstance(files, int):
        return None
    after = {k: v for k, v in before.items() if k in _KEPT}
    histogram_key = next((k for k in ("fileSizeHistogram", "histogramOpt") if before.get(k) is not None), None)
    histogram = _copy_histogram(before[histogram_key]) if histogram_key else None
    if histogram_key and histogram is None:
        return None
    infos = [a["commitInfo"] for a in actions if isinstance(a, dict) and set(a) == {"commitInfo"}]
    txn = infos[-1].get("txnId") if infos and isinstance(infos[-1], dict) else None
    # a compaction (`small_files`) rewrites files: its adds and removes change no data
    rewrite = any(isinstance(i, dict) and i.get("operation") == "OPTIMIZE" for i in infos)
    for action in actions:
        if not isinstance(action, dict):
            return None
        if set(action) == {"commitInfo"}:
            continue
        kind = next(iter(action)) if len(action) == 1 else None
        file = action.get(kind) if kind in ("add", "remove") else None
        if not isinstance(file, dict) or file.get("deletionVector") is not None \
                or file.get("dataChange") is not (kind == "add" and not rewrite) \
                or not isinstance(file.get("size"), int) or (kind == "remove" and not rewrite):
            return None  # anything but a new data file, or a compaction's rewrite of files
        sign = 1 if kind == "add" else -1
        size += sign * file["size"]
        files += sign
        if histogram is not None and not _insert(histogram, file["size"], sign):
            return None
    if size < 0 or files < 0:
        return None
    after.update(tableSizeBytes=size, numFiles=files)
    if isinstance(txn, str):
        after["txnId"] = txn
    if histogram_key:
        after[histogram_key] = histogram
    return after


def _copy_histogram(found: Any) -> dict[str, list[int]] | None:
    """A copy of a file-size histogram to update; None when it is not one (three lists of
    integers of one length)."""
    if not isinstance(found, dict):
        return None
    copy: dict[str, list[int]] = {}
    for key in ("sortedBinBoundaries", "fileCounts", "totalBytes"):
        values = found.get(key)
        if not isinstance(values, list) or not all(isinstance(v, int) for v in values):
            return None
        copy[key] = list(values)
    return copy if len({len(v) for v in copy.values()}) == 1 else None


def _insert(histogram: dict[str, list[int]], size: int, sign: int = 1) -> bool:
    """Count a file of `size` bytes (`sign` -1: a removed one) in the bin whose lower boundary
    is the highest one at or below it (none below the lowest boundary), as Delta's histogram
    does; False when a removed file's bin did not hold it (the histogram was not the table's)."""
    index = bisect.bisect_right(histogram["sortedBinBoundaries"], size) - 1
    if index >= 0:
        histogram["fileCounts"][index] += sign
        histogram["totalBytes"][index] += sign * size
        return histogram["fileCounts"][index] >= 0 and histogram["totalBytes"][index] >= 0
    return True


def _publish(log: str, target: str, text: str) -> bool:
    """Create `target` with `text` whole, only if it does not exist."""
    temp = os.path.join(log, f".{os.path.basename(target)}.{uuid.uuid4().hex}.tmp")
    try:
        with open(temp, "w", encoding="utf-8") as f:
            f.write(text)
        os.link(temp, target)  # fails when it exists: never replaces a checksum
        return True
    except OSError:
        return False
    finally:
        try:
            os.unlink(temp)
        except OSError:
            pass
