"""Small projects should not wait (issue 23, item 6): `sqlflow run --mode batch` of the whole demo
project against `dbt run` of the same project, on the same tables, side by side.

    .venv/bin/python bench/small_project.py [--rows 20000] [--rounds 3]

Copies the project to a temp folder (own warehouse and metastore), writes the demo's data with
`sqlflow demo generate --rows N`, then runs, `--rounds` times in turn, the two commands a user
types (`sqlflow run --mode batch` and `dbt run --profiles-dir profiles`, each a fresh process:
its JVM start is part of what the user waits for) and times each from start to exit. Both
rebuild every model over the same inputs (dbt and sqlflow may follow each other on one table,
docs/semantics.md "Table ownership"), so each round measures the same work. It prints every
round, the median of each command and the median of the per-round ratios (sqlflow / dbt; the
target is at most 1.0). A benchmark, not a test: nothing asserts a time; a command that fails
is printed with its last lines and the script exits 1.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def copy_project(folder: Path) -> Path:
    for name in ("dbt_project.yml", "models", "macros", "profiles", "udfs", "seeds", "tests/dbt"):
        src = ROOT / name
        if src.exists():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (shutil.copytree if src.is_dir() else shutil.copy)(src, folder / name)
    return folder


def timed(cmd: list[str], project: Path) -> float:
    began = time.monotonic()
    done = subprocess.run(cmd, cwd=project, capture_output=True, text=True)
    seconds = time.monotonic() - began
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise SystemExit(f"`{' '.join(cmd)}` failed (exit {done.returncode}):\n{tail}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=20_000, help="demo impressions to generate")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the temp project folder")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="sqlflow_small_"))
    project = copy_project(folder)
    sqlflow, dbt = str(BIN / "sqlflow"), str(BIN / "dbt")
    try:
        timed([sqlflow, "demo", "generate", "--rows", str(args.rows)], project)
        runs = {"sqlflow run --mode batch": [sqlflow, "run", "--mode", "batch"],
                "dbt run": [dbt, "run", "--profiles-dir", "profiles"]}
        seconds: dict[str, list[float]] = {name: [] for name in runs}
        for k in range(args.rounds):
            order = list(runs) if k % 2 == 0 else list(reversed(runs))  # neither always goes first
            for name in order:
                seconds[name].append(timed(runs[name], project))
            print(f"round {k + 1}: " + ", ".join(f"{n} {seconds[n][-1]:.1f}s" for n in runs), flush=True)
        s, d = seconds["sqlflow run --mode batch"], seconds["dbt run"]
        ratios = [a / b for a, b in zip(s, d, strict=True)]
        print(f"median: sqlflow run --mode batch {statistics.median(s):.1f}s, dbt run "
              f"{statistics.median(d):.1f}s; sqlflow / dbt per round: "
              + ", ".join(f"{r:.2f}" for r in ratios)
              + f"; median {statistics.median(ratios):.2f}x (target: at most 1.00x)")
        return 0
    finally:
        if args.keep:
            print(f"kept {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
