"""What a delta-rs append to the commit log costs as the log grows, with its small files merged
every `small_files.EVERY` versions (`sqlflow.runtime.delta.small_files`) and without. JVM-free.

    .venv/bin/python bench/small_files.py [--appends 1500] [--window 300] [--rounds 2]

Each round makes two fresh logs (the commit log's schema and properties) and appends one
commit-log row at a time to each, alternating between them, as one stream micro-batch does
(`local_append.append`, through the thread's kept table, its checksum derived). `merged`
compacts as `commitlog.append` does; `plain` never does. Printed per `--window` appends: the
mean seconds of an append of each, the compactions' mean, and `merged / plain`. Both logs must
hold the same rows at the end (checked). A benchmark, not a test: nothing asserts a time.
Last line:

    small_files: appends=<n> plain_last=<s> merged_last=<s> compact=<s> files_plain=<n> files_merged=<n>
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
from sqlflow.runtime.delta import commitlog, local_append, open_tables, small_files  # noqa: E402


def make_log(folder: Path) -> str:
    """An empty Delta table of the commit log's columns and properties, written by delta-rs."""
    import pyarrow as pa
    from deltalake import write_deltalake

    empty = local_append._arrow([], commitlog.SCHEMA)
    write_deltalake(str(folder), pa.Table.from_batches([], schema=empty.schema),
                    configuration={"delta.checkpointInterval": str(commitlog.CHECKPOINT_INTERVAL)})
    return str(folder)


def append(folder: str, i: int) -> None:
    """One commit-log row appended as `local_append.append` appends it, without the Spark
    session it takes only to find the table's folder (here known)."""
    entry = commitlog.Entry(f"dw.t{i % 7}", f"dt=2026-11-01/hour={i % 24}", "write", "stream",
                            "m", "run", i, rows=i)
    table = open_tables.table(folder)
    local_append._commit(folder, table, local_append._arrow([entry.as_row(datetime(2026, 11, 1))],
                                                            commitlog.SCHEMA), None)


def run(root: Path, appends: int) -> dict[str, list]:
    plain, merged = make_log(root / "plain"), make_log(root / "merged")
    out: dict[str, list] = {"plain": [], "merged": [], "compact": []}
    for i in range(appends):
        for name, folder in (("plain", plain), ("merged", merged)):
            start = time.perf_counter()
            append(folder, i)
            out[name].append(time.perf_counter() - start)
            if name == "merged":
                version = open_tables.table(folder).version()
                start = time.perf_counter()
                if small_files.appended(folder, version):
                    out["compact"].append(time.perf_counter() - start)
    from deltalake import DeltaTable

    rows = [sorted(DeltaTable(f).to_pyarrow_table().column("batch_id").to_pylist()) for f in (plain, merged)]
    assert rows[0] == rows[1] == list(range(appends)), "the two logs hold different rows"
    out["files"] = [len(DeltaTable(f).file_uris()) for f in (plain, merged)]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--appends", type=int, default=1500)
    parser.add_argument("--window", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    results = []
    for r in range(args.rounds):
        root = Path(tempfile.mkdtemp(prefix="sqlflow-small-files-"))
        try:
            results.append(run(root, args.appends))
        finally:
            shutil.rmtree(root, ignore_errors=True)
        print(f"round {r + 1}: live files plain={results[-1]['files'][0]} merged={results[-1]['files'][1]}")
    print(f"{'appends':>10} {'plain s':>9} {'merged s':>9} {'merged/plain':>13}")
    last = (0.0, 0.0)
    for start in range(0, args.appends, args.window):
        plain = statistics.mean(x for res in results for x in res["plain"][start:start + args.window])
        merged = statistics.mean(x for res in results for x in res["merged"][start:start + args.window])
        last = (plain, merged)
        print(f"{start + args.window:>10} {plain:>9.4f} {merged:>9.4f} {merged / plain:>12.2f}x")
    compact = statistics.mean(x for res in results for x in res["compact"]) if results[0]["compact"] else 0.0
    print(f"compactions: {sum(len(res['compact']) for res in results)}, mean {compact:.4f} s")
    print(f"small_files: appends={args.appends} plain_last={last[0]:.4f} merged_last={last[1]:.4f} "
          f"compact={compact:.4f} files_plain={results[-1]['files'][0]} files_merged={results[-1]['files'][1]}")


if __name__ == "__main__":
    main()
