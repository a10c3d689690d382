"""The older rows a running `incremental` query holds between micro-batches
(`sqlflow.runtime.incremental.held`): the rules that say when a held run is exactly the input
table as of a version, JVM-free with stand-in frames (a frame is the list of its rows' names,
a union concatenates them)."""

from __future__ import annotations

from functools import reduce

import pytest

from sqlflow.runtime.incremental import held
from standin import Frame


def rows(h: held.Held, relation: str, version: int, batch_id: int):
    """The rows `h` holds for the batch (the union of its parts, read by a job: `Frame.run`),
    None when no run reaches."""
    parts = h.parts(relation, version, batch_id)
    if parts is None:
        return None
    union = reduce(Frame.unionByName, parts, Frame())
    union.run()
    return union


def table(*names):
    """A `start` reader of a table's rows."""
    return lambda: Frame(names)


def test_a_run_is_the_table_plus_each_following_batch_until_one_does_not_follow():
    h = held.Held()
    assert h.parts("t", 3, 1) is None  # nothing held: the caller reads the table as of 3
    h.start("t", 3, table("v1", "v2", "v3"), 1)
    b1, b2 = Frame(["v4", "v5"]), Frame(["v6"])
    assert h.extend("t", 1, 3, 5, b1, b1, 2)  # batch 1 read versions 4..5
    assert rows(h, "t", 5, 2) == ["v1", "v2", "v3", "v4", "v5"]
    assert not h.extend("t", 2, 5, 5, Frame(), Frame(), 0)  # nothing new: nothing to keep
    assert h.extend("t", 3, 5, 6, b2, b2, 1)
    assert rows(h, "t", 6, 4) == ["v1", "v2", "v3", "v4", "v5", "v6"]
    # a batch that ends inside a version (None) breaks the run: its cached rows are released
    assert not h.extend("t", 4, 6, None, Frame(["v7"]), Frame(["v7"]), 1)
    assert rows(h, "t", 6, 5) is None and b1.dropped and b2.dropped


def test_each_held_batch_is_one_cached_partition_released_with_the_run():
    """A batch's new rows come from the few small files of each commit, one task per file: a
    held batch is one cached partition, so a later join scans one task per batch."""
    h = held.Held()
    h.start("t", 3, table("v1"), 1)
    new = Frame(["v4", "v5"])
    assert h.extend("t", 1, 3, 4, new, new, 2)
    assert new.compact is not None and new.compact.partitions == 1 and new.compact.persisted
    assert rows(h, "t", 4, 2) == ["v1", "v4", "v5"]
    h.clear()
    assert new.dropped and new.compact.dropped


def test_a_batch_reads_the_held_batches_in_a_task_per_task_rows_not_one_per_batch(monkeypatch):
    h = held.Held()
    h.start("t", 0, table("v0"), 1)
    for batch, names in enumerate((["a", "b"], ["c"], ["d", "e"]), start=1):
        frame = Frame(names)
        assert h.extend("t", batch, batch - 1, batch, frame, frame, len(names))
    parts = h.parts("t", 3, 4)
    assert parts[0] == ["v0"]  # the table as of the run's base, as it was
    assert parts[1:] == [["a", "b", "c", "d", "e"]] and parts[1].partitions == 1
    monkeypatch.setattr(held, "TASK_ROWS", 4)  # 5 rows held: two tasks
    parts = h.parts("t", 3, 4)
    assert parts[1:] == [["a", "b", "c", "d", "e"]] and parts[1].partitions == 2
    monkeypatch.setattr(held, "TASK_ROWS", 2)  # three tasks: one per batch, as held
    parts = h.parts("t", 3, 4)
    assert parts[1:] == [["a", "b"], ["c"], ["d", "e"]]
    assert all(p.partitions == 1 and p.compact is None for p in parts[1:])  # each its own one


def test_the_union_of_the_held_batches_grows_by_the_batches_added_since_the_last_read(monkeypatch):
    """Each read unions only the batches added since the last one (a union built afresh cost a
    `unionByName` per held batch each micro-batch); a batch let go starts it again from the
    pieces held then: the rows are the held ones in every case."""
    calls = []
    union = Frame.unionByName
    monkeypatch.setattr(Frame, "unionByName", lambda a, b: calls.append(1) or union(a, b))
    h = held.Held()
    h.start("t", 0, table(), 1)
    for batch, (name, t) in enumerate((("a", 1), ("b", 5), ("c", 9)), start=1):
        frame = Frame([name])
        assert h.extend("t", batch, batch - 1, batch, frame, frame, 1, extent={"t": (t, t)})
        calls.clear()
        assert h.parts("t", batch, batch + 1)[-1] == ["a", "b", "c"][:batch]
        assert len(calls) == (batch > 1)  # the one batch added since the last read
    calls.clear()
    assert h.parts("t", 3, 4)[-1] == ["a", "b", "c"] and not calls  # nothing new: no union
    assert h.evict("t", {"t": 3}) == 1  # "a" goes: the union is built again without it
    assert h.parts("t", 3, 4, lows={"t": 3})[-1] == ["b", "c"]
    last = Frame(["d"])
    assert h.extend("t", 4, 3, 4, last, last, 1, extent={"t": (12, 12)})
    assert h.parts("t", 4, 5, lows={"t": 3})[-1] == ["b", "c", "d"]


def test_a_run_serves_only_the_version_it_reaches_and_later_batches():
    h = held.Held()
    h.start("t", 3, table("v1"), 1)
    assert h.extend("t", 1, 3, 4, Frame(["v4"]), Frame(["v4"]), 1)
    assert rows(h, "t", 3, 2) is None  # another version: the table is read again
    h.start("t", 3, table("v1"), 1)
    assert h.extend("t", 1, 3, 4, Frame(["v4"]), Frame(["v4"]), 1)
    assert rows(h, "t", 4, 1) is None  # batch 1 again (a replay) never sees its own rows as old
    h.start("t", 3, table("v1"), 2)
    assert not h.extend("t", 2, 2, 4, Frame(["x"]), Frame(["x"]), 1)  # a gap: starts at 2, not 3
    assert rows(h, "t", 4, 3) is None


def test_a_run_is_dropped_rather_than_grow_past_its_limits(monkeypatch):
    monkeypatch.setattr(held, "MAX_ROWS", 3)
    h = held.Held()
    h.start("t", 0, table(), 1)
    first = Frame(["a", "b"])
    assert h.extend("t", 1, 0, 1, first, first, 2)
    assert not h.extend("t", 2, 1, 2, Frame(["c", "d"]), Frame(["c", "d"]), 2)  # 4 > 3 rows
    assert first.dropped and rows(h, "t", 2, 3) is None


def test_a_run_the_caller_bounds_by_evict_is_not_dropped_for_its_size(monkeypatch):
    """`bounded`: the caller lets go of the rows no later batch can match, so the run holds what
    a new run's window would cache after a drop (the same rows, read again): no limit."""
    monkeypatch.setattr(held, "MAX_ROWS", 3)
    h = held.Held()
    h.start("t", 0, table(), 1)
    for batch, names in enumerate((["a", "b"], ["c", "d"], ["e"]), start=1):
        new = Frame(names)
        assert h.extend("t", batch, batch - 1, batch, new, new, len(names), bounded=True)
    assert h.runs["t"].rows == 5 and rows(h, "t", 3, 4) == ["a", "b", "c", "d", "e"]


def test_a_query_that_ends_releases_every_held_batch():
    """`MicroBatch.release` (a query's end, or the service starting it again) clears the runs:
    nothing it cached stays in Spark's memory, and a later batch reads the table again."""
    h = held.Held()
    h.start("a", 1, table("a1"), 1)
    h.start("b", 7, table("b1"), 1)
    pieces = [Frame(["a2"]), Frame(["b2"])]
    assert h.extend("a", 1, 1, 2, pieces[0], pieces[0], 1)
    assert h.extend("b", 1, 7, 8, pieces[1], pieces[1], 1)
    h.clear()
    assert all(p.dropped for p in pieces) and h.runs == {}
    assert rows(h, "a", 2, 2) is None


def test_every_max_batches_the_held_batches_become_one_partition_and_the_run_goes_on(monkeypatch):
    """A run no longer ends after `MAX_BATCHES` batches (the next batch then read a new Delta
    snapshot of the input): the held batches are merged into one cached partition, filled by
    the next batch that reads the run (no job of its own), their own caches released only
    after that batch; the rows stay the table's."""
    monkeypatch.setattr(held, "MAX_BATCHES", 2)
    monkeypatch.setattr(held, "TASK_ROWS", 1)  # a task per held batch: each seen below
    h = held.Held()
    h.start("t", 0, table("v0"), 1)
    pieces = [Frame([f"v{i}"]) for i in (1, 2, 3, 4)]
    for i, piece in enumerate(pieces[:3], start=1):
        assert h.extend("t", i, i - 1, i, piece, piece, 1)
    merged = h.runs["t"].pieces[0].kept
    assert merged.checkpointed and merged.partitions == 1 and not merged.counted
    assert not any(p.dropped for p in pieces[:3])  # the merged partition is not filled yet
    assert len(h.parts("t", 3, 4)) == 3  # the table, the merged batches, the newest batch
    assert sorted(rows(h, "t", 3, 4)) == ["v0", "v1", "v2", "v3"]
    assert h.extend("t", 4, 3, 4, pieces[3], pieces[3], 1)  # after batch 4 read the run
    assert pieces[0].dropped and pieces[1].dropped and not pieces[2].dropped and not merged.dropped
    assert sorted(rows(h, "t", 4, 5)) == ["v0", "v1", "v2", "v3", "v4"]


class ConnectFrame(Frame):
    """A stand-in DataFrame of a Spark Connect session: no JVM side to ask."""

    @property
    def _jdf(self):
        raise AttributeError("_jdf is not supported in Spark Connect")


def run_of(batches: list[Frame]) -> held.Held:
    """A run of table `t` (row `v0`) held on by `batches`, one micro-batch and version each."""
    h = held.Held()
    h.start("t", 0, table("v0"), 1)
    for i, batch in enumerate(batches, start=1):
        assert h.extend("t", i, i - 1, i, batch, batch, 1)
    return h


def test_merged_batches_stay_cached_until_a_job_has_filled_their_partition(monkeypatch):
    """A batch may ask for the run and never read the merged piece (Spark skips the scan of a
    join side it finds empty): the merged batches' caches stay until a batch's job has filled
    the partition, else the piece would be computed again from their source files later."""
    monkeypatch.setattr(held, "MAX_BATCHES", 2)
    monkeypatch.setattr(held, "TASK_ROWS", 1)
    pieces = [Frame([f"v{i}"]) for i in range(1, 6)]
    h = run_of(pieces[:3])
    merged = h.runs["t"].pieces[0].kept
    assert h.parts("t", 3, 4) is not None  # asked for, not read: nothing filled
    assert h.extend("t", 4, 3, 4, pieces[3], pieces[3], 1)
    assert not merged.filled and not any(p.dropped for p in pieces[:4])
    assert sorted(rows(h, "t", 4, 5)) == ["v0", "v1", "v2", "v3", "v4"]  # read: filled
    assert h.extend("t", 5, 4, 5, pieces[4], pieces[4], 1)
    assert merged.filled and pieces[0].dropped and pieces[1].dropped and not merged.dropped
    assert not any(p.dropped for p in pieces[2:])
    assert sorted(rows(h, "t", 5, 6)) == ["v0", "v1", "v2", "v3", "v4", "v5"]


def test_over_connect_a_batch_that_asked_for_the_run_is_taken_to_have_filled_it(monkeypatch):
    """Over Spark Connect the merged piece's plan is the server's: a batch that asked for the
    run releases the merged batches' caches at the next `extend`, as before; one that did not,
    does not."""
    monkeypatch.setattr(held, "MAX_BATCHES", 2)
    pieces = [ConnectFrame([f"v{i}"]) for i in range(1, 5)]
    h = run_of(pieces[:3])
    assert not any(p.dropped for p in pieces[:2])
    assert h.parts("t", 3, 4) is not None
    assert h.extend("t", 4, 3, 4, pieces[3], pieces[3], 1)
    assert pieces[0].dropped and pieces[1].dropped and not pieces[2].dropped


def test_a_union_of_no_frames_is_refused():
    with pytest.raises(ValueError, match="no frames"):
        held._united([])


def test_held_batches_merge_in_tiers_each_piece_holding_only_its_own_batches(monkeypatch):
    """Every `MAX_BATCHES` pieces of a tier become one piece of the tier above, in their place:
    at most `MAX_BATCHES` pieces a tier, older pieces of higher tiers, and no merged piece
    holds another merge's batches beside its own (one merged piece for the run, each merge
    nesting the one before, grew its lineage by every batch). Every read is the table's rows."""
    monkeypatch.setattr(held, "MAX_BATCHES", 2)
    h = held.Held()
    h.start("t", 0, table(), 1)
    for i in range(1, 12):
        new = Frame([f"v{i}"])
        assert h.extend("t", i, i - 1, i, new, new, 1, extent={"t": (10 * i, 10 * i)})
        assert rows(h, "t", i, i + 1) == [f"v{k}" for k in range(1, i + 1)]
        tiers = [p.tier for p in h.runs["t"].pieces]
        assert tiers == sorted(tiers, reverse=True) and all(tiers.count(t) <= 2 for t in tiers)
    pieces = h.runs["t"].pieces
    assert [(p.tier, list(p.kept), p.extent) for p in pieces] == [
        (3, [f"v{k}" for k in range(1, 9)], {"t": (10, 80)}),
        (1, ["v9", "v10"], {"t": (90, 100)}),
        (0, ["v11"], {"t": (110, 110)}),
    ]


def test_a_merged_piece_every_later_batch_is_past_is_let_go_with_its_batches(monkeypatch):
    """`evict` lets an old merged piece go as the stream moves on (its extent is its own
    batches', not the run's since its start), with the caches of the pieces merged into it that
    no batch read yet; the newer pieces stay and serve the batches above the floor."""
    monkeypatch.setattr(held, "MAX_BATCHES", 2)
    h = held.Held()
    h.start("t", 0, table(), 1)
    frames = [Frame([f"v{i}"]) for i in range(1, 6)]
    for i, new in enumerate(frames, start=1):  # no batch reads the run: nothing filled
        assert h.extend("t", i, i - 1, i, new, new, 1, extent={"t": (10 * i, 10 * i)})
    old = h.runs["t"].pieces[0]
    assert old.tier == 2 and list(old.kept) == ["v1", "v2", "v3", "v4"]
    assert not any(f.dropped for f in frames)
    assert h.evict("t", {"t": 45}) == 4
    assert old.kept.dropped and all(f.dropped and f.compact.dropped for f in frames[:4])
    assert not frames[4].dropped and h.runs["t"].rows == 1
    assert reduce(Frame.unionByName, h.parts("t", 5, 6, lows={"t": 45})) == ["v5"]


def test_merged_batches_no_batch_read_are_released_with_the_run():
    """Batches merged but not yet read through their one partition keep their caches until
    the run drops: then every one of them is released, the merged partition too."""
    h = held.Held()
    h.start("t", 0, table("v0"), 1)
    pieces = [Frame([f"v{i}"]) for i in range(1, held.MAX_BATCHES + 2)]
    for i, piece in enumerate(pieces, start=1):
        assert h.extend("t", i, i - 1, i, piece, piece, 1)
    merged = h.runs["t"].pieces[0].kept
    assert merged.checkpointed and not any(p.dropped for p in pieces)
    h.drop("t")
    assert merged.dropped and all(p.dropped for p in pieces)


def test_the_table_is_read_only_when_a_batch_needs_it():
    """`parts(base=...)` False: the caller knows no row of the run's base version can match, so
    the table is left out, and a table never needed is never read (no Delta snapshot)."""
    reads = []

    def read():
        reads.append(1)
        return Frame(["v0"])

    asked = []

    def never(run):
        asked.append(run.base)
        return []

    h = held.Held()
    h.start("t", 0, read, 1)
    new = Frame(["v1"])
    assert h.parts("t", 0, 1, base=never) == []
    assert h.extend("t", 1, 0, 1, new, new, 1)
    assert h.parts("t", 1, 2, base=never) == [new.compact] and not reads
    assert asked == [0, 0]  # asked of the run's base version, not of the version it reaches
    assert sorted(rows(h, "t", 1, 2)) == ["v0", "v1"] and len(reads) == 1
    rows(h, "t", 1, 2)
    assert len(reads) == 1  # read once per run


def test_batches_no_later_batch_can_match_are_let_go_and_a_batch_below_them_reads_the_table():
    """`evict`: a held batch whose rows all lie below the floors (every prune column) goes, and
    its rows no longer count against `MAX_ROWS`; a batch that keeps rows from below a floor
    cannot be served by the run (None: the caller reads the table, every row)."""
    h = held.Held()
    h.start("t", 0, table(), 1)
    old, mid, new = Frame(["a"]), Frame(["b"]), Frame(["c"])
    assert h.extend("t", 1, 0, 1, old, old, 5, extent={"t": (100, 200)})
    assert h.extend("t", 2, 1, 2, mid, mid, 5, extent={"t": (150, 400)})
    assert h.extend("t", 3, 2, 3, new, new, 5, extent=None)  # unknown: never let go
    assert h.evict("t", {"t": 300}) == 5
    assert old.dropped and old.compact.dropped and not mid.dropped and h.runs["t"].rows == 10
    assert sorted(reduce(Frame.unionByName, h.parts("t", 3, 4, lows={"t": 300}))) == ["b", "c"]
    assert h.parts("t", 3, 4, lows={"t": 299}) is None  # it may need "a": the run is dropped
    assert mid.dropped and "t" not in h.runs


def test_a_batch_that_keeps_every_row_is_not_served_by_a_run_that_let_rows_go():
    h = held.Held()
    h.start("t", 0, table(), 1)
    first = Frame(["a"])
    assert h.extend("t", 1, 0, 1, first, first, 1, extent={"t": (1, 2)})
    assert h.evict("t", {"t": 10}) == 1
    assert h.parts("t", 1, 2, lows=None) is None  # no pruning: every older row is needed
