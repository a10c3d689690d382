"""The state-table copies a running `incremental` query appended, held for its next micro-batches
(`sqlflow.runtime.incremental.copies`): when memory holds every copy a batch reads, and when
only the table does. JVM-free with stand-in frames (`standin.Frame`)."""

from __future__ import annotations

from functools import reduce

from sqlflow.runtime.incremental import copies
from standin import Frame


def read(c: copies.Copies, relation: str, since: int, batch_id: int):
    """The copied rows `c` serves for the batch (their union), None when the table must."""
    found = c.rows(relation, since, batch_id)
    return None if found is None else reduce(Frame.unionByName, found, Frame())


def test_a_query_reads_the_copies_it_appended_after_since_and_before_the_batch():
    c = copies.Copies()
    c.begin(0)
    assert read(c, "t", -1, 0) == []  # nothing copied yet: no rows, and no table read
    b0, b1 = Frame(["a", "b"]), Frame(["c"])
    assert c.add("t", 0, b0, b0, 2) and c.add("t", 1, b1, b1, 1)
    assert read(c, "t", -1, 1) == ["a", "b"]  # never the batch's own rows
    assert read(c, "t", -1, 2) == ["a", "b", "c"]
    assert read(c, "u", -1, 2) == []  # an input this query copied nothing of
    # a later batch starts on a whole version after batch 0: batch 0's copy is let go
    assert read(c, "t", 0, 2) == ["c"]
    assert b0.dropped and b0.compact.dropped and not b1.dropped
    c.clear()
    assert b1.dropped and b1.compact.dropped and c.held == {}


def test_copies_from_before_the_first_batch_are_read_from_the_table():
    """A restarted query (a replay after a crash) holds nothing of the earlier run's copies."""
    c = copies.Copies()
    assert read(c, "t", -1, 5) is None  # no batch begun
    c.begin(5)
    c.begin(6)  # the first batch is the one that counts
    assert read(c, "t", 3, 6) is None  # batch 4's copy may be in the table only
    b5 = Frame(["x"])
    assert c.add("t", 5, b5, b5, 1)
    assert read(c, "t", 3, 7) is None
    assert read(c, "t", 4, 7) == ["x"]  # every copy after batch 4: this object's


def test_past_max_rows_the_copies_are_let_go_and_the_table_serves_until_since_passes(monkeypatch):
    monkeypatch.setattr(copies, "MAX_ROWS", 3)
    c = copies.Copies()
    c.begin(0)
    b0 = Frame(["a", "b"])
    assert c.add("t", 0, b0, b0, 2)
    assert not c.add("t", 1, Frame(["c", "d"]), Frame(["c", "d"]), 2)  # 4 > 3 rows
    assert b0.dropped
    assert read(c, "t", -1, 2) is None and read(c, "t", 0, 2) is None
    b2 = Frame(["e"])
    assert c.add("t", 2, b2, b2, 1)
    assert read(c, "t", 1, 3) == ["e"]


def test_the_union_of_a_run_s_copies_grows_by_the_new_copy_and_is_rebuilt_when_since_moves():
    """`Copies.union`: each copy is projected and unioned once while its run goes on (the
    union the batch before read, plus the new copy); when `since` moves past a copy, the union
    is built again from the projections of the copies left (each copy projected once). Every
    union holds exactly `rows`' rows, in order."""
    c = copies.Copies()
    c.begin(0)
    projected: list[list[str]] = []

    def columns(frame):
        projected.append(list(frame))
        return Frame(frame)

    frames = [Frame([f"r{b}"]) for b in range(4)]
    for b, f in enumerate(frames):
        assert c.add("t", b, f, f, 1)
    first = c.union("t", c.rows("t", -1, 2), columns)  # copies of batches 0 and 1
    assert first == ["r0", "r1"] and projected == [["r0"], ["r1"]]
    second = c.union("t", c.rows("t", -1, 3), columns)
    assert second == ["r0", "r1", "r2"] and projected[2:] == [["r2"]]  # batch 2's copy only
    assert second.sources[0] is first  # built on the union the batch before read
    moved = c.union("t", c.rows("t", 0, 4), columns)  # batch 0's copy let go: rebuilt
    assert moved == ["r1", "r2", "r3"] and projected[3:] == [["r3"]]
    assert set(c.projected["t"]) == {id(f.compact) for f in frames[1:]}  # batch 0's let go
    assert c.union("u", [frames[3]], columns) == ["r3"]  # per input
    c.drop("t")
    assert "t" not in c.unions and "t" not in c.projected
    c.clear()  # the query ends: no union is kept, of any input
    assert c.unions == {} and c.projected == {}


def test_a_batch_leaves_out_the_copies_outside_the_rows_it_can_match():
    """`Copies.rows(keep=...)`: a copy whose range of a prune column lies wholly outside
    every kept range holds no row the batch keeps, so the batch does not read it; it stays
    held for a later batch whose range reaches it. A copy of unknown range is always read."""
    c = copies.Copies()
    c.begin(0)
    early, late, unknown = Frame(["e"]), Frame(["l"]), Frame(["u"])
    assert c.add("t", 0, early, early, 1, extent={"ts": (0, 99)})
    assert c.add("t", 1, late, late, 1, extent={"ts": (200, 299)})
    assert c.add("t", 2, unknown, unknown, 1)
    found = c.rows("t", -1, 3, keep=[("TS", 150, 250)])
    assert found == [late.compact, unknown.compact]
    assert c.rows("t", -1, 3, keep=[("ts", 50, 60), ("ts", 250, 260)]) == [early.compact, late.compact, unknown.compact]
    assert c.rows("t", -1, 3, keep=[("other", 0, 1)]) == [early.compact, late.compact, unknown.compact]
    assert c.rows("t", -1, 3) == [early.compact, late.compact, unknown.compact]  # no pruning
    assert not early.dropped  # left out, still held


def test_a_batch_leaves_out_the_copies_that_hold_none_of_the_keys_it_looks_up():
    """`Copies.rows(wanted=...)`: a copy whose key columns (taken to the driver with its
    rows) hold none of the keys the batch's new rows of the other input look this input up
    by gives the inner join no row, so the batch does not read it; a NULL key matches
    nothing; a copy whose keys are not known is always read; the keys are asked only when
    a copy is left after the range pruning."""
    import pyarrow as pa

    c = copies.Copies()
    c.begin(0)
    hit, miss, nulls, unknown = Frame(["h"]), Frame(["m"]), Frame(["n"]), Frame(["u"])
    keys = pa.schema([("req", pa.string()), ("ad", pa.int64())])
    assert c.add("t", 0, hit, hit, 2, keys=pa.table({"req": ["a", "b"], "ad": [1, 2]}, schema=keys))
    assert c.add("t", 1, miss, miss, 2, keys=pa.table({"req": ["a", "c"], "ad": [2, 1]}, schema=keys))
    assert c.add("t", 2, nulls, nulls, 1, keys=pa.table({"req": [None], "ad": [1]}, schema=keys))
    assert c.add("t", 3, unknown, unknown, 1)
    asked = []

    def wanted(rows):
        def keys_wanted():
            asked.append(1)
            return pa.table(rows, schema=keys)
        return keys_wanted

    # ("b", 2) is in batch 0's copy only; ("a", 1) too (batch 1 holds "a" with another ad)
    found = c.rows("t", -1, 4, wanted=wanted({"req": ["b", "a"], "ad": [2, 1]}))
    assert found == [hit.compact, unknown.compact]
    assert c.rows("t", -1, 4, wanted=wanted({"req": ["c"], "ad": [1]})) == [miss.compact, unknown.compact]
    assert c.rows("t", -1, 4, wanted=wanted({"req": [], "ad": []})) == [unknown.compact]
    assert c.rows("t", -1, 4) == [hit.compact, miss.compact, nulls.compact, unknown.compact]  # no lookup
    assert not miss.dropped and not nulls.dropped  # left out, still held
    asked.clear()
    early = Frame(["e"])
    d = copies.Copies()
    d.begin(0)
    assert d.add("t", 0, early, early, 1, extent={"ts": (0, 9)}, keys=pa.table({"req": ["a"], "ad": [1]}, schema=keys))
    assert d.rows("t", -1, 1, keep=[("ts", 50, 60)], wanted=wanted({"req": ["a"], "ad": [1]})) == []
    assert asked == []  # every copy out of range: no keys computed
