"""What a model with a dimension join pays to ask the commit log which dimension partitions are
ready (issue 23: fixed cost of a backfill and of a micro-batch), side by side: Spark's read of
the log (`commitlog.ready_partitions_read`: the rows, each table's latest `refresh`, their join)
against the log's own files (`commitlog_ready`: the Delta log replayed and each data file read
with pyarrow, once per process).

    .venv/bin/python bench/commitlog_ready.py [--appends 60,300] [--rounds 5]

In a temp warehouse it appends to a commit log, one Delta commit each, as models do: mostly
`write` rows of a few partitions, every tenth append a dimension's `commit` rows. At each size
of `--appends` it asks for the READY partitions of two dimensions `--rounds` times each way,
alternating: Spark; the files with the process's cache emptied (a backfill's first question);
the files again with nothing new (a micro-batch's question). Every answer is compared with
Spark's. It prints the medians and the ratios. A benchmark, not a test: nothing asserts a time.
Its last line is machine-readable:

    commitlog_ready: appends=<n> spark=<s> files_cold=<s> files_warm=<s> cold_ratio=<x> warm_ratio=<x>
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from sqlflow.engine.session import build_session
from sqlflow.project.profiles import load_target
from sqlflow.runtime.delta import commitlog as C
from sqlflow.runtime.delta import commitlog_ready, deltalog

ROOT = Path(__file__).resolve().parents[1]

LOG = "bench_ready.commit_log"
DIMS = ["dim.dim_ad", "dim.dim_user"]


def entries(n: int) -> list[C.Entry]:
    """The rows of append number `n`: a dimension's day made ready, or a model's write."""
    if n % 10 == 0:
        return [C.Entry(DIMS[n // 10 % 2], f"dt=2026-11-{n // 20 % 28 + 1:02d}", "commit", "marker")]
    return [C.Entry("dw.model", f"dt=2026-11-01/hour={h}", "write", "stream", "model", batch_id=n, rows=100)
            for h in range(n % 3 + 1)]


def timed(fn):
    began = time.perf_counter()
    out = fn()
    return time.perf_counter() - began, out


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    args.add_argument("--appends", default="60,300")
    args.add_argument("--rounds", type=int, default=5)
    opts = args.parse_args()
    sizes = sorted(int(n) for n in opts.appends.split(","))
    with tempfile.TemporaryDirectory(prefix="sqlflow-bench-ready-") as tmp:
        target = load_target(ROOT, "sqlflow", "local")
        spark = build_session(target, ROOT, {
            "spark.sql.warehouse.dir": f"{tmp}/warehouse",
            "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={tmp}/metastore_db;create=true",
            "spark.driver.extraJavaOptions": f"-Dderby.system.home={tmp}"})
        spark.sparkContext.setLogLevel("ERROR")
        C.ensure(spark, LOG)
        location = deltalog.describe(spark, LOG).location
        done, last = 0, ""
        for size in sizes:
            began = time.perf_counter()
            while done < size:
                C.append(spark, entries(done), table=LOG)
                done += 1
            print(f"{size} appends ({time.perf_counter() - began:.0f} s to append)", flush=True)
            got: dict[str, list[float]] = {"spark": [], "files_cold": [], "files_warm": []}
            for _ in range(opts.rounds):
                s, want = timed(lambda: C.ready_partitions_read(spark, DIMS, table=LOG))
                commitlog_ready._rows.clear()
                cold, a = timed(lambda: commitlog_ready.ready_partitions_of(spark, location, DIMS))
                warm, b = timed(lambda: commitlog_ready.ready_partitions_of(spark, location, DIMS))
                if not (a == b == want):
                    raise SystemExit(f"bench: the files' answer differs from Spark's: {a} / {b} / {want}")
                for k, v in (("spark", s), ("files_cold", cold), ("files_warm", warm)):
                    got[k].append(v)
                print(f"  spark {s:.3f} s  files cold {cold:.3f} s  files warm {warm:.3f} s", flush=True)
            med = {k: statistics.median(v) for k, v in got.items()}
            last = (f"commitlog_ready: appends={size} spark={med['spark']:.3f} files_cold={med['files_cold']:.3f} "
                    f"files_warm={med['files_warm']:.3f} cold_ratio={med['spark'] / med['files_cold']:.1f} "
                    f"warm_ratio={med['spark'] / med['files_warm']:.1f}")
            print(f"  median: {last}", flush=True)
        spark.stop()
        print(last)


if __name__ == "__main__":
    main()
