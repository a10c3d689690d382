"""The copies of a run of batches inside a version that a running `incremental` query made,
held in memory for its next micro-batches (docs/design.md §2.9): the state table's copies, or,
for a run kept as the input's own files (`older.Source.files`), the same rows read from them
(`MicroBatch._file_copies`) only when memory does not hold them.

A micro-batch that ends inside a commit of an input copies its clean new rows to the input's
state table (`sqlflow.runtime.incremental.state`), and the batches after it read those copies
back as older rows (`older.Source.since`): a Delta read of the state table each micro-batch, its
snapshot built again after every append. The rows this query appended are the clean new rows it
has just cached (`MicroBatch._new_rows`), so `Copies` keeps them, per input and batch id, and a
micro-batch whose copies were all appended by this object reads them from memory instead: the
same rows (the state table holds nothing else for those batch ids: one append per batch id,
idempotent), without a snapshot.

What the table holds that memory may not: copies of batches before this object's first
micro-batch (an earlier run of the query, a replay after a crash), and the batches of an input
let go to bound memory (`MAX_ROWS`). `floor` is, per input, the newest batch id whose copy may
be only in the table; a micro-batch reading copies after `since` is served from memory only
when `since >= floor`, else it reads the table, as before. Nothing of it is in the checkpoint.

The union of a run's copies is built once per copy (`union`): the next micro-batch of the run
adds the one copy the batch before made to the union that batch read. Built again at every
batch, the n-th batch of a run made n - 1 unions by name, each a JVM call that analyses the
plan so far (0.02-0.04 s a batch at 20 batches a commit, `bench/interval_join.py --batches
20`, 2026-12-04).

A micro-batch reads only the copies whose range of a prune column (`held.Extent`, from the
stats pass of the batch that made them) meets the rows it can match (`rows(keep=...)`): the
others would give it no row under its prune filter. Read, a run's n-th batch joined a union of
n - 1 copies, a task and a plan node each (the sink's join 0.26 s at the second batch, 0.67 s
at the 16th). Left out, a batch of that run read 0 to 11 of its copies per input, as far as
its new rows' range reached (`bench/interval_join.py --rows 1000000 --batches 20`,
2026-12-06: 14.6 and 13.9 s against 16.8 and 20.0 s).

Where the query looks the input's held rows up by key on the driver (`MicroBatch._keyed`),
each copy keeps its rows' key columns there too (`Copy.keys`: the batch took them to the
driver anyway, `MicroBatch._copy_keys`), and a micro-batch also leaves out the copies that
hold none of the keys its new rows of the other input look up (`rows(wanted=...)`): the join
is an inner equi-join on those keys, so such a copy gives it no row. Over the same 17
batches the copies read fell from 149 to 57 (2026-12-07).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame

from sqlflow.runtime.incremental import held

MAX_ROWS = held.MAX_ROWS  # copied rows held per input; more lets them go (the table serves)
_COPY = "__sqlflow_copy"  # the batch id beside a copy's keys (`Copy.keys`)


@dataclass
class Copy:
    batch: int
    piece: held.Piece
    # the copy's rows' key columns on the driver, with its batch id as `_COPY` (None: not known)
    keys: pa.Table | None = None


class Copies:
    """The copies one query's micro-batches appended, per input relation."""

    def __init__(self) -> None:
        self.first: int | None = None  # the first micro-batch this object ran
        self.floor: dict[str, int] = {}  # relation -> newest batch whose copy may be only in the table
        self.held: dict[str, list[Copy]] = {}
        # relation -> the frames `union` joined last (from `rows`) and their union
        self.unions: dict[str, tuple[tuple[DataFrame, ...], DataFrame]] = {}
        # relation -> id(held frame) -> (the frame, its projection by `union`'s `columns`)
        self.projected: dict[str, dict[int, tuple[DataFrame, DataFrame]]] = {}

    def begin(self, batch_id: int) -> None:
        """Micro-batch `batch_id` starts: copies of batches before this object's first are in
        the table only."""
        if self.first is None:
            self.first = batch_id

    def rows(self, relation: str, since: int, batch_id: int,
             keep: list[tuple[str, int, int]] | None = None,
             wanted: Callable[[], pa.Table] | None = None) -> list[DataFrame] | None:
        """The copies of `relation` of the batches after `since` and before `batch_id`, as the
        frames whose union they are ([] when there are none); None when some may be only in
        the state table. Copies of batches up to `since` are let go: no later micro-batch
        reads them (`since` only grows within a query). `keep`: the rows the batch can match
        (`MicroBatch._keep`; None: every row); a copy whose range lies outside it is left out
        of this batch's union (`held.disjoint`) and kept for later ones. `wanted`: the keys the
        batch's new rows of the other input look this input's older rows up by (named as this
        input's columns, `MicroBatch._wanted`); a copy whose keys are known and hold none of
        them is left out too (`_matched`)."""
        if self.first is None or since < self.floor.get(relation, self.first - 1):
            return None
        kept = []
        for c in self.held.get(relation, []):
            if c.batch <= since:
                c.piece.release()
            else:
                kept.append(c)
        self.held[relation] = kept
        found = [c for c in kept if c.batch < batch_id and not held.disjoint(c.piece.extent, keep)]
        if wanted is not None and any(c.keys is not None for c in found):
            hit = _matched([c.keys for c in found if c.keys is not None], wanted())
            if hit is not None:
                found = [c for c in found if c.keys is None or c.batch in hit]
        return [c.piece.kept for c in found]

    def union(self, relation: str, frames: list[DataFrame],
              columns: Callable[[DataFrame], DataFrame]) -> DataFrame:
        """The union by name of `frames` (`rows`' answer, not empty), each projected by
        `columns` (the same projection at every call for `relation`): the union the previous
        call built when its frames begin `frames` (the same run: `rows` only adds copies until
        its `since` moves), with the new frames added; else built again from the frames'
        projections, each made once per copy (`projected`)."""
        assert frames, "a union of no copies"
        done: tuple[DataFrame, ...] = ()
        frame: DataFrame | None = None
        memo = self.unions.get(relation)
        if memo is not None and _begins(frames, memo[0]):
            done, frame = memo
        made = self.projected.setdefault(relation, {})
        for f in frames[len(done):]:
            if id(f) not in made:
                made[id(f)] = (f, columns(f))
            part = made[id(f)][1]
            frame = part if frame is None else frame.unionByName(part)
        assert frame is not None
        self.unions[relation] = (tuple(frames), frame)
        live = {id(c.piece.kept) for c in self.held.get(relation, [])}
        for gone in [i for i in made if i not in live]:  # copies let go
            del made[gone]
        return frame

    def add(self, relation: str, batch_id: int, cached: DataFrame, clean: DataFrame, rows: int,
            extent: held.Extent | None = None, keys: pa.Table | None = None) -> bool:
        """Micro-batch `batch_id` appended `clean` to `relation`'s state table, `rows` rows read
        from `cached` (`extent`: the range of their prune columns, when known; `keys`: the
        same rows' key columns on the driver, when there), and held as one cached partition
        (`held.compact`). True when it is held: the caller must not unpersist `cached`. Over
        `MAX_ROWS` the input's copies are let go and the table serves the batches up to this
        one."""
        copies = self.held.setdefault(relation, [])
        if sum(c.piece.rows for c in copies) + rows > MAX_ROWS:
            self.drop(relation)
            self.floor[relation] = batch_id
            return False
        if keys is not None and _COPY in keys.column_names:  # (a key column of that name)
            keys = None
        marked = None if keys is None else keys.append_column(
            _COPY, pa.array(np.full(keys.num_rows, batch_id, np.int64)))
        copies.append(Copy(batch_id, held.Piece(cached, held.compact(clean), rows, extent), marked))
        return True

    def drop(self, relation: str) -> None:
        self.unions.pop(relation, None)
        self.projected.pop(relation, None)
        for c in self.held.pop(relation, []):
            c.piece.release()

    def clear(self) -> None:
        for relation in list(self.held):
            self.drop(relation)
        self.unions.clear()
        self.projected.clear()


def _matched(tables: list[pa.Table], wanted: pa.Table) -> set[int] | None:
    """The batch ids of the copies (their `Copy.keys`) that hold a row of `wanted`'s keys (a
    NULL key matches nothing, as in the join); None when Arrow cannot join them (a key type
    its hash join does not take): the caller then reads every copy, as without keys.

    One hash join of all the copies' keys against `wanted` (Arrow's semi join: 14 ms for 9
    copies of 50,000 keys against 50,000, where a filter by `is_in` on the most selective
    column and a semi join of the rows left took 70-85 ms, 2026-12-07)."""
    columns = wanted.column_names
    held = pa.concat_tables([t.select([*columns, _COPY]) for t in tables])
    try:
        found = held.join(wanted, keys=columns, join_type="left semi")
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError):
        return None
    return set(pc.unique(found[_COPY]).to_pylist())


def _begins(frames: list[DataFrame], head: tuple[DataFrame, ...]) -> bool:
    """Whether `frames` begins with the very frames of `head`."""
    return len(head) <= len(frames) and all(a is b for a, b in zip(head, frames[:len(head)], strict=True))
