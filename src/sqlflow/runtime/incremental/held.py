"""The older rows an `incremental` query holds between its micro-batches, so that a micro-batch
does not build a new Delta snapshot of each input to read them (docs/design.md §2.9).

A micro-batch reads each joined input's older rows as of the version it starts on
(`sqlflow.runtime.incremental.older`). Delta builds the snapshot of a version afresh for every
read of it (the log replayed, the file list and its statistics computed: Spark jobs), and it
caches only the table's latest snapshot; every micro-batch of a running stream starts on a
newer version, so each paid for a new snapshot of each input. A `Run` keeps, per input, the
clean rows of the table as of one version `base` (the snapshot built once) and the clean new
rows of each later micro-batch that started and ended on whole versions, in order, up to
version `end`. The table as of `end` is exactly the table as of `base` plus those rows: the
versions a stream passes are appends, or rewrites that change no rows (Delta fails a stream on
any other commit, `sqlflow.runtime.offsets`). So a micro-batch whose older rows are the table
as of `end` reads the run instead: the same rows, from memory.

Nothing of it is in the checkpoint: a restarted query (a replay after a crash) starts with no
run, reads the table as of the version the batch starts on, as the batch did: the same rows
again. A run is dropped, and the next micro-batch reads the table again, when a micro-batch does
not follow on from it (it starts or ends inside a version, or somewhere else), or when it would
hold more than `MAX_ROWS` new rows that nothing lets go (memory). A run whose input the caller
prunes (`extend(bounded=True)`: it calls `evict` after each batch in which the other side
brought rows) holds the rows later batches can still match, plus at most one merged piece's
span below them: what a new run's window of the table would cache after a drop
(`sqlflow.runtime.incremental.window`, which has no limit), so its size drops nothing. While
the other side brings no rows nothing is evicted and the run grows by this input's new rows;
the next batch that brings some lets the unmatchable ones go (held rows spill to disk, as
Spark's cached and checkpointed blocks do, rather than fail). A drop there saved no memory and
cost a batch of 11 s, that read the table again and cached the same rows (20,000 rows/s, a
20-minute interval, the run past 2 million rows of an input after 200 s; `bench/latency.py
--seconds 330`, 2026-12-02).

Each batch's rows are held as one cached partition (`compact`): a micro-batch's new rows are
read from the few small files each commit adds, one task per file, and a union of 16 batches of
them planned 8-16 tasks per batch into every later join (88 tasks of about 17 ms for 1,000 new
rows at a load of 9, `bench/microbatch_cost.py`, 2026-11-26). Held, each batch is one task read
from memory, and a micro-batch reads them in a task per `TASK_ROWS` held rows (`_read`: one
task while they are few), not one per batch: a task cost about 27 ms (its deserialisation and
scheduling, more than reading a few thousand cached rows), and the tasks grew by one with every
batch until the merge below (2026-11-29). The held batches are merged in tiers (`_merge`): every
`MAX_BATCHES` batches into one partition, a local checkpoint (a tier-1 piece), every
`MAX_BATCHES` tier-1 pieces into one of tier 2, and so on; a merged piece is filled by the next
batch's join and its batches' own caches released once it is (`_filled`). So the union a
micro-batch plans stays narrow (at most `MAX_BATCHES` pieces a tier) and the run goes on (it
was dropped there before, and the next micro-batch built a new Delta snapshot of the input: a
slow batch every 16). A merged piece holds only the batches merged into it, never the run's
older pieces: its event-time extent is its own batches', so `evict` lets whole old pieces go
as the stream moves on, and neither its plan nor its lineage (which every task of a join
deserializes) grows with the run's age. One
merged piece for the whole run, each merge nesting the previous one, reached back to the run's
start: it could never be let go, and its lineage grew by every batch (24.5k -> 102k characters
from batch 16 to 80, 2026-12-02). Between merges the union of the held pieces is kept and grown
by each new one (`_coalesced`). For a batch whose new rows came from the micro-batch itself, both
caches are kept until the run drops or merges them (the one partition is filled at the next
batch's join, from the other).

A query's first micro-batch, whose new rows of an input are its table as of a version
(`older.new_rows`), starts the run of that input on them (`MicroBatch._seed`): `read` gives
the frame that batch built, so the second batch builds no snapshot of the version the first
one read.

A run may hold its batches on the driver instead (`start(keyed=<its key columns>)`, the
embedded `local` target: `sqlflow.runtime.incremental.keyed`): each batch's clean rows as an
Arrow table (`key_index.Rows`) in a store that indexes their keys (`key_index.Store`), none of
the Spark caches above, and a micro-batch reads of them only what its `probe` looks up by
key. Such a run is dropped by a batch whose rows are not on the driver (`extend` without
`table`), and by a micro-batch with no probe while it holds batches.

The table as of `base` is read only when a micro-batch needs it (`parts(base=True)`): once a
running query's new rows are past every row of that version, the caller leaves it out
(`sqlflow.runtime.delta.file_stats`), and a read never made builds no Delta snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame

from sqlflow.runtime.incremental.key_index import Rows, Store

MAX_ROWS = 2_000_000  # new rows held per input that `evict` does not bound; more starts a new run
MAX_BATCHES = 16  # held pieces of one tier merged into one partition of the next (`_merge`)
TASK_ROWS = 100_000  # held rows a micro-batch reads in one task at least (`_read`)
MAX_BYTES = 2 << 30  # Arrow bytes a run held on the driver may hold (`extend`; then Spark's caches)

Extent = dict[str, tuple[int, int]]  # column (lower case) -> (min, max) µs of a piece's rows


@dataclass
class Piece:
    """One held batch (tier 0) or merged pieces (a tier above theirs): `kept`, its clean rows
    as held, read from `cached`; its row count and, where known, the range of its prune columns
    (`evict`); `merged`, the pieces merged into it whose caches stay until a batch has read
    (filled) it."""

    cached: DataFrame
    kept: DataFrame
    rows: int
    extent: Extent | None = None
    tier: int = 0
    merged: list[Piece] = field(default_factory=list)

    def release(self) -> None:
        """Uncache the piece: its held rows, then the rows they were computed from (when those
        are not the same frame), and the pieces merged into it not yet released."""
        self.kept.unpersist()
        if self.cached is not self.kept:
            self.cached.unpersist()
        _release(self.merged)


@dataclass
class Run:
    base: int             # the input table's version the run starts on
    read: Callable[[], DataFrame]  # the table's clean rows as of `base` (read once, when asked)
    end: int              # the version the run reaches: `base` plus `pieces`
    batch: int            # the newest micro-batch id it holds (or started in)
    pieces: list[Piece] = field(default_factory=list)
    rows: int = 0
    evicted: dict[str, int] = field(default_factory=dict)  # column -> rows below it were let go
    window: Any = None  # the base's rows later batches can match, cached (`window.Window`)
    served: bool = False  # a micro-batch asked for the run since its last merge (`parts`)
    tables: Store | None = None  # a run looked up by key: its batches, held here (`key_index`)
    _table: DataFrame | None = None
    _together: tuple[DataFrame, list[Piece]] | None = None  # a union of pieces (`_coalesced`)

    def table(self) -> DataFrame:
        """The table as of `base` (its snapshot built at the first call only)."""
        if self._table is None:
            self._table = self.read()
        return self._table


class Held:
    """The runs of one query's micro-batches, per input relation."""

    def __init__(self) -> None:
        self.runs: dict[str, Run] = {}
        self.on_driver = True  # runs may be held on the driver (until one outgrows `MAX_BYTES`)

    def parts(self, relation: str, version: int, batch_id: int, *,
              base: Callable[[Run], list[DataFrame]] = lambda run: [run.table()],
              lows: dict[str, int] | None = None,
              probe: Callable[[Store], DataFrame | None] | None = None) -> list[DataFrame] | None:
        """The clean rows of `relation` as of `version`, held for micro-batch `batch_id`, as
        the frames whose union they are: what `base(run)` gives of the table as of the run's
        base version (by default the table; the caller may leave it out, or give the rows of
        it the batch can match) and the held batches (of a run looked up by key, what
        `probe(store)` gives of them: the rows the batch can match). None when no run reaches
        exactly there (the caller `start`s one), when the batch may need rows the run let go
        (`lows`, the lowest value per column the batch keeps, None: it keeps every row, below a
        column's eviction floor, `evict`), or when a run looked up by key holds batches and
        the batch has no `probe`."""
        run = self.runs.get(relation)
        if run is not None and run.end == version and run.batch < batch_id and _serves(run, lows):
            if run.tables is None:
                run.served = True
                return base(run) + _read(run)
            if probe is not None or not run.tables:
                found = probe(run.tables) if probe is not None else None
                return base(run) + ([found] if found is not None else [])
        self.drop(relation)
        return None

    def start(self, relation: str, version: int, read: Callable[[], DataFrame], batch_id: int,
              *, keyed: Sequence[str] = ()) -> None:
        """A run from `read()`, the clean rows of `relation` as of `version` (called when a
        micro-batch first needs them), for micro-batch `batch_id` on; `keyed`: its batches
        held on the driver and looked up by these key columns (`key_index`,
        `extend(table=...)`)."""
        self.drop(relation)
        store = Store(keyed) if keyed and self.on_driver else None
        self.runs[relation] = Run(version, read, version, batch_id - 1, tables=store)

    def extend(self, relation: str, batch_id: int, start: int | None, end: int | None,
               cached: DataFrame, clean: DataFrame, rows: int, extent: Extent | None = None,
               bounded: bool = False, table: pa.Table | None = None) -> bool:
        """After micro-batch `batch_id` committed: its new rows of `relation` were the versions
        after `start` up to `end` (None: it started or ended inside a version), `clean` of them
        clean, read from `cached` (`rows` rows; `extent`: the range of their prune columns,
        when known; `bounded`: the caller lets go of the rows no later batch can match, by
        `evict`, so `MAX_ROWS` does not apply; `table`: the clean rows on the driver, which a
        run looked up by key holds, and without which it is dropped). True when the run keeps
        `cached`: the caller must not unpersist it. A run on the driver that would hold more
        than `MAX_BYTES` is dropped, and every run of this object is held in Spark's caches
        from then on (they spill to disk; the driver's memory does not)."""
        run = self.runs.get(relation)
        if run is None:
            return False
        if start is None or end is None or run.end != start or run.batch >= batch_id:
            self.drop(relation)
            return False
        if start == end or not rows:  # nothing new on this input: the same rows
            run.end, run.batch = end, batch_id
            return False
        if (run.rows + rows > MAX_ROWS and not bounded) or (run.tables is not None and table is None):
            self.drop(relation)
            return False
        if run.tables is not None:
            assert table is not None  # (dropped above)
            run.rows, run.end, run.batch = run.rows + rows, end, batch_id
            run.tables.add(Rows(table, rows, extent))
            if run.tables.nbytes > MAX_BYTES:
                self.on_driver = False
                self.drop(relation)
            return False
        for p in run.pieces:  # a merged piece a batch's join filled needs its batches no more
            if p.merged and _filled(p.kept, run.served):
                _release(p.merged)
        tier = 0
        while sum(p.tier == tier for p in run.pieces) >= MAX_BATCHES:
            _merge(run, tier)
            tier += 1
        run.pieces.append(Piece(cached, compact(clean), rows, extent))
        run.rows, run.end, run.batch = run.rows + rows, end, batch_id
        return True

    def evict(self, relation: str, floors: dict[str, int]) -> int:
        """Let go of the held batches no later micro-batch can match: those whose every row
        lies below `floors` (column -> µs; the caller's bound on what later batches keep,
        one per prune column of the input) in every column. A later batch that reaches below
        a floor after all finds the run unable to serve it (`parts`) and reads the table.
        Returns the rows let go."""
        run = self.runs.get(relation)
        if run is None or not floors:
            return 0
        gone = [p for p in run.pieces if _below(p.extent, floors)]
        dropped = [r for r in run.tables or () if _below(r.extent, floors)]
        if not gone and not dropped:
            return 0
        for p in gone:
            p.release()  # and the pieces merged into it, their rows gone with it
        run.pieces = [p for p in run.pieces if p not in gone]
        if run.tables is not None:
            run.tables.remove(dropped)
        let_go = sum(p.rows for p in gone) + sum(r.rows for r in dropped)
        run.rows -= let_go
        for column, low in floors.items():
            run.evicted[column] = max(run.evicted.get(column, low), low)
        return let_go

    def drop(self, relation: str) -> None:
        run = self.runs.pop(relation, None)
        if run is not None and run.window is not None:
            run.window.release()
        for p in run.pieces if run else ():
            p.release()

    def clear(self) -> None:
        for relation in list(self.runs):
            self.drop(relation)


def _below(extent: Extent | None, floors: dict[str, int]) -> bool:
    """Whether every row of a piece of range `extent` lies below `floors` in every column.

    >>> _below({"t": (1, 5)}, {"t": 6}), _below({"t": (1, 6)}, {"t": 6}), _below(None, {"t": 6})
    (True, False, False)
    """
    return extent is not None and all(c in extent and extent[c][1] < low for c, low in floors.items())


def disjoint(extent: Extent | None, keep: list[tuple[str, int, int]] | None) -> bool:
    """Whether no row of a piece of range `extent` is among the rows `keep` keeps (a row is
    kept when one of its `(column, low, high)` holds the row's µs in that column; None: every
    row), so a batch that keeps only those may leave the piece out. False when a column's
    range is not known.

    >>> keep = [("T", 10, 20)]
    >>> disjoint({"t": (1, 9)}, keep), disjoint({"t": (21, 30)}, keep), disjoint({"t": (5, 10)}, keep)
    (True, True, False)
    >>> disjoint({"t": (1, 9)}, None), disjoint(None, keep), disjoint({"u": (1, 9)}, keep)
    (False, False, False)
    """
    if keep is None or extent is None:
        return False
    spans = [extent.get(column.lower()) for column, _, _ in keep]
    return all(span is not None and (span[1] < low or span[0] > high)
               for span, (_, low, high) in zip(spans, keep, strict=True))


def _merge(run: Run, tier: int) -> None:
    """The run's held pieces of `tier` as one partition, a piece of the tier above, in their
    place (the pieces of a tier are consecutive: older pieces are of higher tiers). It is filled
    by the next micro-batch that reads the run (its join reads the pieces' caches once, into the
    one partition, instead of a Spark job of its own at the end of this micro-batch: a delay of
    0.7 s for the next micro-batch's rows at 30,000 rows a batch, `bench/latency.py --show`,
    2026-12-02). The pieces' caches are released once it is filled (`extend`,
    `_filled`), or with it.

    The partition is a local checkpoint, as the window of the table is
    (`sqlflow.runtime.incremental.window`): its plan is one scan of its blocks, cut from the
    batches it holds, so a join that reads it neither plans nor ships their lineage. Merged
    pieces kept as cached unions carried their batches' plans: over a 330-s run the plan read
    by every batch grew with the run (26k -> 150k characters over 96 batches against flat 27k;
    p50 5.20 s, p99 12.35 s against 3.41 s, 8.27 s, `bench/latency.py --seconds 330`,
    2026-12-03). Its blocks go when nothing refers to the frame any more (Spark's context
    cleaner; `unpersist` does nothing to them); an executor lost with them fails the batch, and
    the restarted query reads the table again."""
    group = [p for p in run.pieces if p.tier == tier]
    at = run.pieces.index(group[0])
    merged = _united([p.kept for p in group]).coalesce(1).localCheckpoint(eager=False)
    piece = Piece(merged, merged, sum(p.rows for p in group), _union([p.extent for p in group]),
                  tier + 1, group)
    run.pieces = [*run.pieces[:at], piece, *run.pieces[at + len(group):]]
    run.served = False


def _filled(frame: DataFrame, served: bool) -> bool:
    """Whether the lazy local checkpoint `frame` (a merged piece) holds its rows: Spark marks
    it checkpointed once a job has computed every partition of it. A batch that asked for the
    run (`served`) need not have read it: Spark skips the scan of a join side it finds empty or
    not needed, and caches released then would leave the piece to be computed again from its
    batches' source files (which fail once vacuumed). Over Spark Connect the plan is the
    server's and cannot be asked: a batch that asked for the run is taken to have filled it."""
    jdf = getattr(frame, "_jdf", None)  # (Connect: an AttributeError, so None)
    if jdf is None:
        return served
    return bool(jdf.queryExecution().logical().rdd().isCheckpointed())


def _united(frames: list[DataFrame]) -> DataFrame:
    """The union of `frames` (by name, at least one), built as a balanced tree: each
    `unionByName` analyses the union it builds, so a chain re-analyses the first frames once
    per frame after them."""
    if not frames:
        raise ValueError("no frames to unite")
    if len(frames) == 1:
        return frames[0]
    half = len(frames) // 2
    return _united(frames[:half]).unionByName(_united(frames[half:]))


def _release(pieces: list[Piece]) -> None:
    """Uncache `pieces` and empty the list."""
    for p in pieces:
        p.release()
    pieces.clear()


def _read(run: Run) -> list[DataFrame]:
    """The run's held batches as a micro-batch reads them: a task per `TASK_ROWS` rows they
    hold (one while they are few), never more than one per batch."""
    tasks = max(1, -(-run.rows // TASK_ROWS))
    if len(run.pieces) > tasks:
        return [_coalesced(run, tasks)]
    return [p.kept for p in run.pieces]


def _coalesced(run: Run, tasks: int) -> DataFrame:
    """The run's held pieces as one frame of `tasks` partitions. The union is kept in the run
    and grown by the pieces appended since; when the pieces are no longer an extension of the
    ones it holds (a merge replaced some, or `evict` let some go) it is built again, as a
    balanced tree (`_united`). A union built afresh each micro-batch cost one `unionByName` per
    held batch, each analysing the whole union again (about 30 ms a call on a loaded two-core
    machine, 2026-11-29)."""
    frame, used = run._together or (None, [])
    if frame is None or len(used) > len(run.pieces) or any(
            a is not b for a, b in zip(used, run.pieces[:len(used)], strict=True)):
        frame, used = _united([p.kept for p in run.pieces]), run.pieces
    for p in run.pieces[len(used):]:
        frame = frame.unionByName(p.kept)
    run._together = (frame, list(run.pieces))
    return frame.coalesce(tasks)


def _union(extents: list[Extent | None]) -> Extent | None:
    """The range of several pieces' rows together (None when one is unknown).

    >>> _union([{"t": (5, 9)}, {"t": (1, 6), "u": (0, 0)}])
    {'t': (1, 9)}
    >>> _union([{"t": (5, 9)}, None]) is None
    True
    """
    if any(e is None for e in extents) or not extents:
        return None
    known = [e for e in extents if e is not None]
    columns = set.intersection(*(set(e) for e in known))
    return {c: (min(e[c][0] for e in known), max(e[c][1] for e in known)) for c in sorted(columns)}


def _serves(run: Run, lows: dict[str, int] | None) -> bool:
    """Whether the run still holds every row a batch keeping from `lows` on needs.

    >>> run = Run(0, lambda: None, 0, 0, evicted={"t": 100})
    >>> _serves(run, {"t": 100}), _serves(run, {"t": 99}), _serves(run, None), _serves(run, {})
    (True, False, False, True)
    """
    if not run.evicted:
        return True
    if lows is None:
        return False
    return all(lows.get(c, low) >= low for c, low in run.evicted.items())


def compact(clean: DataFrame) -> DataFrame:
    """A batch's clean new rows as held: one partition (at most `MAX_ROWS` small rows), cached
    at its first read, the next micro-batch's join. `cached`, the rows it is computed from,
    stays cached beside it until the run drops both."""
    return clean.coalesce(1).persist()
