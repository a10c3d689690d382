"""How a running query on the embedded `local` target finds the held rows a micro-batch can
match (`sqlflow.runtime.incremental.key_index`): by its index of the held keys, against a probe
of every held row (`keyed.matching` over all of them, the lookup before the index). JVM-free.

    .venv/bin/python bench/key_index.py [--held 300000,3000000,12000000] [--batch 10000]
                                        [--new 10000] [--rounds 5] [--seed 1]

For each held size it holds `--batch`-row batches of impressions (`req_id` a string, `ad_id`,
`imp_ts`, `user_id`) until that many rows are held, as a run does one micro-batch at a time,
timing each `Store.add` (a batch's hashes sorted, segments merged). Then it draws `--new` keys
of rows of the newest 20 batches (clicks on recent impressions) and, side by side, `--rounds`
times each, looks them up by (`req_id`, `ad_id`): `scan` probes every held row, `index` uses
the store. Both must give the same rows (as multisets, checked). 12 million rows is a
20-minute interval at 10,000 impressions a second.

Printed per size: the add's median and worst seconds, the median seconds of each lookup and
`index / scan`. A benchmark, not a test: nothing asserts a time. Last line:

    key_index: sizes=<n,...> scan=<s,...> index=<s,...> add_max=<s,...>
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
from sqlflow.runtime.incremental import key_index, keyed  # noqa: E402

COLUMNS = ("req_id", "ad_id")


def batch(rng: np.random.Generator, k: int, n: int) -> pa.Table:
    return pa.table({
        "req_id": [f"req-{k}-{j}-{v}" for j, v in enumerate(rng.integers(0, 10**9, n))],
        "ad_id": pa.array(rng.integers(0, 1000, n)),
        "imp_ts": pa.array(rng.integers(0, 10**12, n)).cast(pa.timestamp("us", tz="UTC")),
        "user_id": pa.array(rng.integers(0, 10**6, n)),
    })


def timed(fn, rounds: int) -> tuple[float, pa.Table]:
    seconds, out = [], None
    for _ in range(rounds):
        began = time.perf_counter()
        out = fn()
        seconds.append(time.perf_counter() - began)
    assert out is not None
    return statistics.median(seconds), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--held", default="300000,3000000,12000000")
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--new", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    sizes = [int(s) for s in args.held.split(",")]
    key_index.hash_keys(batch(rng, -1, 10), COLUMNS)  # first calls' imports, not timed
    store, tables, adds = key_index.Store(COLUMNS), [], []
    got: dict[str, list[str]] = {"scan": [], "index": [], "add_max": []}
    print(f"{'held rows':>12} {'add p50 s':>10} {'add max s':>10} {'scan s':>8} {'index s':>8} {'index/scan':>10}")
    for size in sizes:
        while sum(t.num_rows for t in tables) < size:
            table = batch(rng, len(tables), args.batch)
            began = time.perf_counter()
            store.add(key_index.Rows(table, table.num_rows))
            adds.append(time.perf_counter() - began)
            tables.append(table)
        recent = pa.concat_tables(tables[-20:])
        picked = recent.take(pa.array(rng.choice(recent.num_rows, min(args.new, recent.num_rows), replace=False)))
        keys = keyed.keys_of(picked.select(list(COLUMNS)), tuple((c, c) for c in COLUMNS))
        scan, by_scan = timed(lambda keys=keys: keyed.matching(tables, keys), args.rounds)
        index, by_index = timed(lambda keys=keys: store.matching(keys), args.rounds)
        if Counter(map(repr, by_scan.to_pylist())) != Counter(map(repr, by_index.to_pylist())):
            raise SystemExit(f"the index and the scan found different rows at {size:,} held rows")
        worst = max(adds)
        print(f"{size:>12,} {statistics.median(adds):>10.4f} {worst:>10.4f} {scan:>8.4f} {index:>8.4f} "
              f"{index / scan:>10.2f}", flush=True)
        got["scan"].append(f"{scan:.4f}")
        got["index"].append(f"{index:.4f}")
        got["add_max"].append(f"{worst:.4f}")
    print(f"key_index: sizes={','.join(map(str, sizes))} scan={','.join(got['scan'])} "
          f"index={','.join(got['index'])} add_max={','.join(got['add_max'])}")


if __name__ == "__main__":
    main()
