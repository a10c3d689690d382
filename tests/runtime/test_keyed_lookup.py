"""Held rows looked up by join key on the driver (`sqlflow.runtime.incremental.keyed`), and the
held runs that keep their batches that way (`held.Held.start(keyed=("k",))`): JVM-free, with
Arrow tables and stand-in frames. Each lookup is compared with a plain Python join of the same
rows: it must hand over every held row a new row's keys equal, and only those."""

from __future__ import annotations

import random
from collections import Counter
from datetime import datetime, timezone

import pyarrow as pa
import pytest
from pyspark.sql.types import (
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from sqlflow.planning.plan import KeyPair
from sqlflow.runtime.incremental import held, key_index, keyed
from standin import Frame

IMPS = StructType([StructField("req_id", StringType()), StructField("ad_id", LongType()),
                   StructField("imp_ts", TimestampType()), StructField("price", DoubleType())])
CLICKS = StructType([StructField("REQ_ID", StringType()), StructField("ad_id", LongType()),
                     StructField("click_ts", TimestampType()), StructField("price", DoubleType())])


def test_only_plain_columns_of_one_exactly_compared_type_are_looked_up_by():
    pairs = [KeyPair("req_id", "c", "req_id"), KeyPair("ad_id", "c", "AD_ID"),
             KeyPair("price", "c", "price"),  # floating point: Spark's NaN = NaN
             KeyPair("upper(req_id)", "c", "req_id"),  # an expression
             KeyPair("ad_id", "c", "click_ts")]  # two types
    assert keyed.usable(pairs, IMPS, CLICKS) == (("req_id", "REQ_ID"), ("ad_id", "ad_id"))
    lcase = StructType([StructField("req_id", StringType("UTF8_LCASE"))])
    assert keyed.usable([KeyPair("req_id", "c", "req_id")], lcase, lcase) == ()  # 'A' = 'a' there


def test_the_new_keys_are_distinct_renamed_and_never_null():
    new = pa.table({"REQ_ID": ["a", "a", None, "b", "b"], "ad_id": [1, 1, 2, None, 3]})
    keys = keyed.keys_of(new, (("req_id", "REQ_ID"), ("ad_id", "ad_id")))
    assert keys.column_names == ["req_id", "ad_id"]
    assert sorted(zip(*keys.to_pydict().values(), strict=True)) == [("a", 1), ("b", 3)]


def _imps(rng: random.Random, n: int, start: int) -> pa.Table:
    at = datetime(2026, 12, 3, tzinfo=timezone.utc)
    return pa.table({
        "req_id": [rng.choice(["r1", "r2", "r3", None]) for _ in range(n)],
        "ad_id": [rng.choice([1, 2, None]) for _ in range(n)],
        "imp_ts": pa.array([at] * n, pa.timestamp("us", tz="UTC")),
        "tags": pa.array([{"n": start + i, "s": [start + i]} for i in range(n)],
                         pa.struct([("n", pa.int64()), ("s", pa.list_(pa.int64()))])),
    })


@pytest.mark.parametrize("columns", [["req_id"], ["req_id", "ad_id"]])
@pytest.mark.parametrize("seed", range(4))
def test_a_lookup_hands_over_exactly_the_held_rows_a_new_key_equals(seed, columns):
    rng = random.Random(seed)
    held_tables = [_imps(rng, rng.randint(0, 30), 1000 * k) for k in range(rng.randint(1, 5))]
    n = rng.randint(0, 6)
    new = pa.table({c: [rng.choice(v) for _ in range(n)]
                    for c, v in (("req_id", ["r1", "r2", "r9", None]), ("ad_id", [1, 2, 7, None]))})
    found = keyed.matching(held_tables, keyed.keys_of(new.select(columns), tuple((c, c) for c in columns)))
    wanted = {tuple(r[c] for c in columns) for r in new.to_pylist() if all(r[c] is not None for c in columns)}
    expected = [r for t in held_tables for r in t.to_pylist() if tuple(r[c] for c in columns) in wanted]
    assert found is not None and found.schema == held_tables[0].schema
    assert Counter(map(repr, found.to_pylist())) == Counter(map(repr, expected))


def test_nothing_held_is_no_frame_and_no_new_key_matches_no_row():
    keys = keyed.keys_of(pa.table({"k": pa.array([], pa.string())}), (("k", "k"),))
    assert keyed.matching([], keys) is None
    assert keyed.matching([pa.table({"k": ["a"]})], keys).num_rows == 0


def probe_of(new_keys: list[str]):
    """A `parts` probe: the held rows whose `k` is one of `new_keys`, as a stand-in frame."""
    keys = keyed.keys_of(pa.table({"k": new_keys}), (("k", "k"),))

    def probe(store):
        found = store.matching(keys)
        return None if found is None or not found.num_rows else Frame(found["k"].to_pylist())
    return probe


def test_a_run_held_by_key_hands_over_the_base_and_the_matching_held_rows():
    h = held.Held()
    h.start("t", 3, lambda: Frame(["base"]), 1, keyed=("k",))
    b1, b2 = Frame(["a", "b"]), Frame(["c"])
    # the batch's frames are not kept: the run holds the rows on the driver
    assert not h.extend("t", 1, 3, 4, b1, b1, 2, table=pa.table({"k": ["a", "b"]}))
    assert not h.extend("t", 2, 4, 5, b2, b2, 1, table=pa.table({"k": ["c"]}))
    parts = h.parts("t", 5, 3, probe=probe_of(["b", "c", "z"]))
    assert parts is not None and [list(p) for p in parts] == [["base"], ["b", "c"]]
    assert h.parts("t", 5, 3, probe=probe_of(["z"])) == [["base"]]  # nothing held matches
    assert b1.compact is None and b2.compact is None  # no Spark cache made for them


def test_a_run_held_by_key_without_the_batch_rows_or_a_probe_is_dropped():
    h = held.Held()
    h.start("t", 3, lambda: Frame(["base"]), 1, keyed=("k",))
    assert h.parts("t", 3, 1) == [["base"]]  # nothing held yet: no probe needed
    assert not h.extend("t", 1, 3, 4, Frame(["a"]), Frame(["a"]), 1, table=pa.table({"k": ["a"]}))
    assert h.parts("t", 4, 2) is None and "t" not in h.runs  # held rows, no probe: read the table
    h.start("t", 4, lambda: Frame(["base"]), 2, keyed=("k",))
    assert not h.extend("t", 2, 4, 5, Frame(["b"]), Frame(["b"]), 1)  # a batch not on the driver
    assert "t" not in h.runs


def test_held_rows_below_the_floors_are_let_go_from_a_run_held_by_key():
    h = held.Held()
    h.start("t", 3, lambda: Frame(), 1, keyed=("k",))
    h.extend("t", 1, 3, 4, Frame(), Frame(), 1, extent={"t": (0, 10)}, table=pa.table({"k": ["old"]}),
             bounded=True)
    h.extend("t", 2, 4, 5, Frame(), Frame(), 1, extent={"t": (20, 30)}, table=pa.table({"k": ["new"]}),
             bounded=True)
    assert h.evict("t", {"t": 15}) == 1 and h.runs["t"].rows == 1
    assert h.parts("t", 5, 3, lows={"t": 15}, probe=probe_of(["old", "new"])) == [[], ["new"]]
    assert h.parts("t", 5, 3, lows={"t": 5}, probe=probe_of(["old"])) is None  # below a floor


def test_a_run_that_outgrows_the_driver_is_dropped_and_later_runs_are_held_in_spark(monkeypatch):
    monkeypatch.setattr(held, "MAX_BYTES", 100)
    h = held.Held()
    h.start("t", 3, lambda: Frame(["base"]), 1, keyed=("k",))
    assert not h.extend("t", 1, 3, 4, Frame(), Frame(), 1, table=pa.table({"k": ["a"]}))
    assert h.runs["t"].tables is not None
    big = pa.table({"k": ["x" * 200]})
    assert not h.extend("t", 2, 4, 5, Frame(), Frame(), 1, table=big)
    assert "t" not in h.runs and not h.on_driver
    h.start("t", 5, lambda: Frame(["base"]), 3, keyed=("k",))
    new = Frame(["b"])
    assert h.runs["t"].tables is None and h.extend("t", 3, 5, 6, new, new, 1, table=pa.table({"k": ["b"]}))
    assert rows_of(h.parts("t", 6, 4)) == ["base", "b"]  # the batch cached in Spark, as a cluster's


def rows_of(parts):
    return [r for p in parts for r in p]


def _reference(tables, new, columns):
    wanted = {tuple(r[c] for c in columns) for r in new.to_pylist() if all(r[c] is not None for c in columns)}
    return [r for t in tables for r in t.to_pylist() if tuple(r[c] for c in columns) in wanted]


@pytest.mark.parametrize("columns", [["req_id"], ["req_id", "ad_id"], ["ad_id", "imp_ts"]])
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("buckets,cap", [(None, None), (3, None), (None, 50)])
def test_the_key_index_hands_over_exactly_what_a_scan_does_as_batches_come_and_go(
        seed, columns, buckets, cap, monkeypatch):
    """Batches added and evicted in random order (segments merged, dead entries filtered), a
    lookup after each step equals a plain Python join of the live batches. `buckets`: every
    key hashed into 3 values, so most rows share a hash with keys they do not equal (the exact
    check must tell them apart). `cap`: segments of at most 50 entries (many segments)."""
    if cap is not None:
        monkeypatch.setattr(key_index, "MAX_SEGMENT", cap)
    if buckets is not None:
        real = key_index.hash_keys

        def colliding(table, names):
            hashes, valid = real(table, names)
            return hashes % key_index.np.uint64(buckets), valid
        monkeypatch.setattr(key_index, "hash_keys", colliding)
    rng = random.Random(seed)
    store, live = key_index.Store(columns), []
    for step in range(40):
        if live and rng.random() < 0.3:
            gone = rng.sample(live, rng.randint(1, len(live)))
            store.remove(gone)
            live = [r for r in live if r not in gone]
        else:
            table = _imps(rng, rng.randint(0, 40), 1000 * step)
            rows = key_index.Rows(table, table.num_rows)
            store.add(rows)
            live.append(rows)
        n = rng.randint(0, 8)
        new = pa.table({c: [rng.choice(v) for _ in range(n)] for c, v in (
            ("req_id", ["r1", "r2", "r9", None]), ("ad_id", [1, 2, 7, None]),
            ("imp_ts", pa.array([datetime(2026, 12, 3, tzinfo=timezone.utc), None] * 2,
                                pa.timestamp("us", tz="UTC")).to_pylist()))})
        new = new.cast(pa.schema([("req_id", pa.string()), ("ad_id", pa.int64()),
                                  ("imp_ts", pa.timestamp("us", tz="UTC"))]))
        found = store.matching(keyed.keys_of(new.select(columns), tuple((c, c) for c in columns)))
        assert len(store) == len(live) and (found is None) == (not live)
        assert store._entries <= 2 * sum(r.indexed for r in live)  # dead entries are dropped
        if found is not None:
            expected = _reference([r.table for r in live], new, columns)
            assert Counter(map(repr, found.to_pylist())) == Counter(map(repr, expected))
    assert store.nbytes == sum(r.table.nbytes + 16 * r.indexed for r in live)
