"""What a micro-batch's Delta source offsets say about the input rows it and its predecessors
were given, so the `incremental` runtime can read those rows from the input tables instead of
keeping a copy of them (docs/design.md §2.9: "the input tables themselves or compact state tables").

Spark writes each micro-batch's END offset per source to `<checkpoint>/offsets/<batch id>`
before it runs the batch; the batch's start is the previous batch's end. A Delta source's
offset is `(reservoirVersion v, index i, isStartingVersion s)`:

- `(v, -1, false)`: every file of every version before `v`, and nothing of `v` on: exactly the
  table as of version `v - 1` (Delta fails a stream on a commit that changes or removes rows,
  so the versions a stream passes are appends, or rewrites that change no rows);
- `(v, -1, true)`: nothing yet (the stream will start with the table's snapshot at `v`);
- `(v, i >= 0, _)`: part of a version (or of the starting snapshot): the first `i + 1` files
  in the order the source admits them. A micro-batch ends there when one commit has more files
  than `maxFilesPerTrigger` allows; `sqlflow.runtime.delta.source_files` names those files
  from the table's log, and the runtime keeps such batches' rows as those files, or as a copy
  (`sqlflow.runtime.incremental.older`).

`Delivered` names the first two cases; `None` is the third (or an offset it cannot read).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Offset:
    version: int
    index: int
    starting: bool
    table_id: str = ""  # the Delta table's id (`reservoirId`): which input, whatever its order


@dataclass(frozen=True)
class Delivered:
    """Rows given to the query so far: the table as of `version` (None: no rows)."""

    version: int | None


NOTHING = Delivered(None)


def read(checkpoint: Path, batch_id: int) -> list[Offset | None]:
    """The END offsets of micro-batch `batch_id`, one per source in the query's source order;
    `[]` when the file is not there (batch -1, or purged), None for a line that is not a Delta
    offset."""
    path = checkpoint / "offsets" / str(batch_id)
    if batch_id < 0 or not path.is_file():
        return []
    out: list[Offset | None] = []
    for line in path.read_text().splitlines()[2:]:  # "v1", the batch's metadata, then sources
        try:
            o = json.loads(line)
            out.append(Offset(int(o["reservoirVersion"]), int(o["index"]),
                              bool(o.get("isStartingVersion", False)), str(o.get("reservoirId", ""))))
        except (ValueError, KeyError, TypeError):
            out.append(None)
    return out


def next_batch(checkpoint: Path) -> int:
    """The first batch id the query's offset log does not hold (0 for a new query)."""
    folder = checkpoint / "offsets"
    ids = [int(n) for n in os.listdir(folder) if n.isdigit()] if folder.is_dir() else []
    return max(ids, default=-1) + 1


def delivered(offset: Offset | None) -> Delivered | None:
    """Which whole table version `offset` ends on; None when it ends inside one (or is
    unknown)."""
    if offset is None or offset.index != -1:
        return None
    return NOTHING if offset.starting else Delivered(offset.version - 1)


def start_of(checkpoint: Path, batch_id: int, k: int) -> Delivered | None:
    """What source `k` had delivered before micro-batch `batch_id` (see `delivered`)."""
    if batch_id == 0:
        return NOTHING
    lines = read(checkpoint, batch_id - 1)
    return delivered(lines[k]) if k < len(lines) else None


def end_of(checkpoint: Path, batch_id: int, k: int) -> Delivered | None:
    """What source `k` had delivered after micro-batch `batch_id` (see `delivered`)."""
    lines = read(checkpoint, batch_id)
    return delivered(lines[k]) if k < len(lines) else None


def damaged(checkpoint: Path) -> tuple[Path, str] | None:
    """The first file Spark reads to resume the query (the newest two `offsets/` files, the
    newest `commits/` file) that is not whole, with what is wrong; None when they are all
    whole. Spark writes `v<n>`, then one JSON line per entry (an offsets file: the batch's
    metadata, then one per source, `-` for a source without one); a file cut short by a crash
    or a copy, or edited, lacks a line or ends inside one (the newest offsets file has as many
    lines as the one before it: the same sources).

    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> (root / "offsets").mkdir()
    >>> _ = (root / "offsets" / "0").write_text('v1\\n{"batchWatermarkMs":0}\\n{"reservoirVersion":1}')
    >>> damaged(root) is None
    True
    >>> _ = (root / "offsets" / "1").write_text('v1\\n{"batchWatermarkMs":0}\\n{"reservoirVer')
    >>> damaged(root)[1]
    'line 3 is not whole JSON'
    >>> _ = (root / "offsets" / "1").write_text('v1\\n{"batchWatermarkMs":0}')
    >>> damaged(root)[1]
    'it has 2 lines, the one before it 3'
    """
    files = []
    for folder, keep in (("offsets", 2), ("commits", 1)):
        where = checkpoint / folder
        ids = sorted((int(n) for n in os.listdir(where) if n.isdigit()), reverse=True) if where.is_dir() else []
        files += [where / str(i) for i in ids[:keep]]
    sizes: dict[str, int] = {}
    for path in reversed(files):  # the older offsets file first: the newer has as many lines
        try:
            lines = path.read_text().splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            return path, f"it cannot be read ({exc})"
        if len(lines) < sizes.get(path.parent.name, 0):
            return path, f"it has {len(lines)} lines, the one before it {sizes[path.parent.name]}"
        sizes[path.parent.name] = len(lines)
        if not lines or not lines[0].startswith("v") or not lines[0][1:].isdigit():
            return path, "it does not start with Spark's version line `v1`"
        if len(lines) < 2:
            return path, "it ends after the version line"
        for n, line in enumerate(lines[1:], start=2):
            try:
                if line != "-":
                    json.loads(line)
            except ValueError:
                return path, f"line {n} is not whole JSON"
    return None
