"""When each stream input of a running query last brought rows, read from the query's offset
log: what the idle-timeout steps need over Spark Connect (docs/deploy.md, "The stream service
over Connect").

Locally the micro-batch function notes it in memory as each batch runs (`MicroBatch.last_rows`,
`StatefulBatch.last_rows_at`); over Connect that memory is the server's Python worker's. Spark
writes each micro-batch's END offset per source to `<checkpoint>/offsets/<id>` before it runs
the batch, and a Delta source's offset (`reservoirVersion`, `index`, named by the table's id,
`reservoirId`) moves only when the batch reads more of that table: an input brought rows in
batch `b` when its offset there differs from batch `b - 1`'s (a commit without rows that still
moves the offset counts as rows: the input is idle later, never earlier). The time is when this
process first sees the offsets file (polled every half second by the stream service), never
before the batch began, so an input is found idle no earlier than the batch function would.
Watching starts after the last batch Spark committed: a batch planned but not committed is
the restart's replay, which runs in this run, as the batch function would count it.
"""

from __future__ import annotations

import time
from pathlib import Path

from pyspark.sql import SparkSession

from sqlflow.runtime import offsets
from sqlflow.runtime.delta import deltalog
from sqlflow.runtime.query import committed

# a source's end offset: (reservoirVersion, index, isStartingVersion) per Delta table id
Ends = dict[str, tuple[tuple[int, int, bool], ...]]


def ends(checkpoint: Path, batch_id: int) -> Ends | None:
    """The Delta sources' end offsets of micro-batch `batch_id` by table id; None when its
    offsets file is not there (never planned, or purged by Spark).

    >>> import tempfile
    >>> ck = Path(tempfile.mkdtemp())
    >>> (ck / "offsets").mkdir()
    >>> _ = (ck / "offsets" / "0").write_text('v1\\n{}\\n{"reservoirId":"a","reservoirVersion":3,'
    ...                                      '"index":-1,"isStartingVersion":false}\\n-')
    >>> ends(ck, 0), ends(ck, 1)
    ({'a': ((3, -1, False),)}, None)
    """
    if batch_id < 0 or not (checkpoint / "offsets" / str(batch_id)).is_file():
        return None
    out: dict[str, list[tuple[int, int, bool]]] = {}
    for o in offsets.read(checkpoint, batch_id):  # None: not a Delta source (no offset yet)
        if o is not None:
            out.setdefault(o.table_id, []).append((o.version, o.index, o.starting))
    return {k: tuple(v) for k, v in out.items()}


def brought(before: Ends | None, after: Ends, table_id: str) -> bool:
    """Whether the source `table_id` read rows between the offsets `before` (None: the query's
    start) and `after`. At the start, only an offset that holds nothing yet (`index -1` of the
    starting version) brought none.

    >>> brought({"a": ((3, -1, False),)}, {"a": ((3, -1, False),)}, "a")
    False
    >>> brought({"a": ((3, -1, False),)}, {"a": ((4, -1, False),)}, "a")
    True
    >>> brought(None, {"a": ((3, -1, True),)}, "a"), brought(None, {"a": ((3, 0, True),)}, "a")
    (False, True)
    """
    now = after.get(table_id)
    if now is None:
        return False
    if before is None:
        return any(not (starting and index == -1) for _, index, starting in now)
    return before.get(table_id) != now


def table_ids(spark: SparkSession, relations: list[str]) -> dict[str, str]:
    """Delta table id -> relation of each input (what the offsets name as `reservoirId`): from
    the log's checksum file when this process can read it, else asked of Spark."""
    out: dict[str, str] = {}
    for relation in dict.fromkeys(relations):
        info = deltalog.describe(spark, relation)
        latest = deltalog.latest_version(spark, relation, info.location) if info.location else None
        found = deltalog.table_id(spark, info.location, latest) if info.location and latest is not None else None
        if found is None:
            found = str(spark.sql(f"DESCRIBE DETAIL {deltalog.quote(relation)}").collect()[0]["id"])
        out[found] = relation
    return out


class InputActivity:
    """When each input of the query at `checkpoint` last brought rows (`last`: monotonic
    seconds, the start for an input that brought none since), and which did since the start
    (`brought`); `refresh` reads the offsets files written since the last look."""

    def __init__(self, checkpoint: Path, ids: dict[str, str], now: float | None = None):
        self.checkpoint, self.ids = checkpoint, ids
        began = time.monotonic() if now is None else now
        self.last = {relation: began for relation in ids.values()}
        self.brought: set[str] = set()
        self.seen = committed(checkpoint)  # a later batch is the restart's replay: this run's

    def refresh(self, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        newest = offsets.next_batch(self.checkpoint) - 1
        for b in range(self.seen + 1, newest + 1):
            after = ends(self.checkpoint, b)
            if after is None:
                continue
            before = ends(self.checkpoint, b - 1)
            for table_id, relation in self.ids.items():
                if brought(before, after, table_id):
                    self.last[relation] = now
                    self.brought.add(relation)
        self.seen = max(self.seen, newest)

    def idle(self, timeout_s: float, now: float | None = None) -> set[str]:
        """The inputs that brought no rows for `timeout_s` seconds."""
        now = time.monotonic() if now is None else now
        return {r for r, t in self.last.items() if now - t >= timeout_s}
