"""A held run's batches on the driver and an index of their join keys, so a lookup costs in
proportion to the keys it asks for, not to the rows held (docs/design.md §2.9, "Held rows
looked up by key").

`keyed.matching` alone probed every held row against the new keys: 0.03-0.1 µs a row, 0.27 s
at 12 million held rows, what a 20-minute interval at 10,000 impressions a second holds
(`bench/key_index.py`; over a 330-s run of `bench/latency.py` the lookup's phase grew from 0.10
s to 0.23 s a micro-batch, 2026-12-03). `Store` keeps, beside the tables, each held row's 64-bit hash of its
key columns and its place (batch serial, row), sorted by hash in segments: a new batch adds a
segment, and the two newest merge while the newer is at least half the older's size and the
merge stays under `MAX_SEGMENT` entries (a merge sorts, so a bigger one would stall a
micro-batch), so a few segments of recent batches and one per `MAX_SEGMENT` older rows. A
lookup hashes the new keys, finds their hashes in each segment by binary search, takes those
rows from their tables, and keeps the ones whose keys are equal (`keyed.matching`): two keys
with one hash are told apart there, so the rows are exactly those a scan finds. A segment
holds consecutive batches; one whose batches are all evicted goes, and an evicted batch's
entries in a segment that keeps others are skipped (their serial is gone) until it merges or
more than half of all entries are dead, when the segments holding dead entries are filtered.
Memory: 16 bytes a held row, counted in `nbytes`.

The hash: integers, dates, timestamps and booleans by value, strings by Python's `hash` (the
index lives in one process), the columns combined by a multiply-xor. Rows with a NULL key are
not indexed: they match nothing.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sqlflow.runtime.incremental import keyed

_ROW_BITS = 32  # a place: serial << 32 | row
MAX_SEGMENT = 1 << 19  # entries a merge makes at most (sorting more would stall a micro-batch)
_MIX = np.uint64(0x100000001B3)


@dataclass(eq=False)  # (a run finds its batches by identity, never by their rows)
class Rows:
    """One held batch of a run looked up by key: its clean rows on the driver, their count and
    the range of their prune columns, where known."""

    table: pa.Table
    rows: int
    extent: Any = None  # held.Extent
    serial: int = -1  # its number in the store (`Store.add`)
    indexed: int = 0  # its rows in the index (those with no NULL key)


@dataclass
class Segment:
    hashes: np.ndarray  # uint64, sorted
    places: np.ndarray  # int64: serial << 32 | row, in the order of `hashes`
    first: int  # the serials of the batches it indexes: first..last
    last: int


class Store:
    """The held batches of one run looked up by `columns` (this input's key columns)."""

    def __init__(self, columns: Sequence[str]):
        self.columns = tuple(columns)
        self.batches: dict[int, Rows] = {}
        self.nbytes = 0
        self._serial = 0
        self._segments: list[Segment] = []
        self._entries = 0  # in the segments, dead ones included
        self._live = 0

    def __iter__(self) -> Iterator[Rows]:
        return iter(list(self.batches.values()))

    def __len__(self) -> int:
        return len(self.batches)

    def add(self, rows: Rows) -> None:
        """Hold one batch and index its keys."""
        rows.serial, self._serial = self._serial, self._serial + 1
        self.batches[rows.serial] = rows
        hashes, valid = hash_keys(rows.table, self.columns)
        at = np.flatnonzero(valid).astype(np.int64)
        hashes, rows.indexed = hashes[at], len(at)
        order = np.argsort(hashes, kind="stable")
        places = (np.int64(rows.serial) << _ROW_BITS) | at[order]
        self._segments.append(Segment(hashes[order], places, rows.serial, rows.serial))
        self._entries += len(at)
        self._live += len(at)
        self.nbytes += rows.table.nbytes + 16 * len(at)
        while len(self._segments) > 1:
            older, newer = self._segments[-2], self._segments[-1]
            size = len(older.hashes) + len(newer.hashes)
            if 2 * len(newer.hashes) < len(older.hashes) or size > MAX_SEGMENT:
                break
            self._segments[-2:] = [self._merged(older, newer)]

    def remove(self, gone: Sequence[Rows]) -> None:
        """Let go of held batches (module doc: how their index entries go)."""
        for r in gone:
            if self.batches.pop(r.serial, None) is not None:
                self._live -= r.indexed
                self.nbytes -= r.table.nbytes + 16 * r.indexed
        kept = []
        for seg in self._segments:
            if any(s in self.batches for s in range(seg.first, seg.last + 1)):
                kept.append(seg)
            else:
                self._entries -= len(seg.hashes)
        self._segments = kept
        if 2 * self._live < self._entries:
            self._segments = [self._merged(seg) for seg in self._segments]

    def matching(self, keys: pa.Table) -> pa.Table | None:
        """The held rows whose key columns equal a row of `keys` (named as `columns`, no NULL
        key); None when nothing is held."""
        if not self.batches:
            return None
        first = next(iter(self.batches.values())).table
        if keys.num_rows == 0:
            return first.slice(0, 0)
        wanted = np.unique(hash_keys(keys.select(list(self.columns)), self.columns)[0])
        places = [_find(seg.hashes, seg.places, wanted) for seg in self._segments]
        # sorted by place: each batch's rows in one run, in row order
        found = np.sort(np.concatenate(places)) if places else np.empty(0, np.int64)
        taken = []
        for part in np.split(found, np.flatnonzero(np.diff(found >> _ROW_BITS)) + 1) if len(found) else ():
            batch = self.batches.get(int(part[0] >> _ROW_BITS))
            if batch is not None:
                taken.append(batch.table.take(pa.array(part & ((1 << _ROW_BITS) - 1))))
        if not taken:
            return first.slice(0, 0)
        return keyed.matching(taken, keys)

    def _merged(self, *segments: Segment) -> Segment:
        """One segment of `segments`' live entries, sorted by hash."""
        hashes = np.concatenate([s.hashes for s in segments]) if len(segments) > 1 else segments[0].hashes
        places = np.concatenate([s.places for s in segments]) if len(segments) > 1 else segments[0].places
        first, last = min(s.first for s in segments), max(s.last for s in segments)
        serials = [s for s in range(first, last + 1) if s in self.batches]
        if len(serials) < last - first + 1:  # some batches evicted: their entries go
            alive = np.isin(places >> _ROW_BITS, np.array(serials, np.int64))
            self._entries -= int(np.count_nonzero(~alive))
            hashes, places = hashes[alive], places[alive]
        if len(segments) > 1:
            order = np.argsort(hashes, kind="stable")  # runs already sorted: close to linear
            hashes, places = hashes[order], places[order]
        return Segment(hashes, places, first, last)


def _find(hashes: np.ndarray, at: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """The places of `hashes` (sorted) equal to one of `wanted`."""
    lo = np.searchsorted(hashes, wanted, "left")
    hi = np.searchsorted(hashes, wanted, "right")
    counts = hi - lo
    some = counts > 0
    lo, counts = lo[some], counts[some]
    if not len(lo):
        return np.empty(0, np.int64)
    # every index in [lo, lo + count) of each hit, without a Python loop
    starts = np.repeat(lo - np.cumsum(counts) + counts, counts)
    return at[starts + np.arange(int(counts.sum()))]


def hash_keys(table: pa.Table, columns: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Each row's 64-bit hash of `columns` (uint64) and whether none of them is NULL."""
    n = table.num_rows
    out = np.zeros(n, np.uint64)
    valid = np.ones(n, bool)
    for name in columns:
        column = table[name].combine_chunks() if isinstance(table[name], pa.ChunkedArray) else table[name]
        valid &= pc.is_valid(column).to_numpy(zero_copy_only=False)
        out = (out * _MIX) ^ _values(column)
    return out, valid


def _values(column: pa.Array) -> np.ndarray:
    kind = column.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return np.fromiter((hash(v) for v in column.to_pylist()), np.int64, len(column)).view(np.uint64)
    if pa.types.is_boolean(kind):
        column = column.cast(pa.int8())
    elif pa.types.is_date32(kind):
        column = column.cast(pa.int32())
    elif pa.types.is_timestamp(kind) or pa.types.is_date64(kind):
        column = column.cast(pa.int64())
    column = pc.fill_null(column.cast(pa.int64()), 0)
    return column.to_numpy(zero_copy_only=False).astype(np.int64).view(np.uint64)
