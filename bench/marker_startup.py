"""The start-up cost of the truth check (issue 26; docs/semantics.md, "Faults: what is
guaranteed, what is refused, what an operator does"): how long a stream query's start spends
comparing its checkpoint with the newest markers in each table it writes, on the demo data.

    .venv/bin/python bench/marker_startup.py [--rows 20000] [--rounds 5] [--keep | --reuse FOLDER]

Copies the project to a temp folder (own warehouse, metastore and checkpoints), writes the
demo's data (`sqlflow demo generate --rows N`), runs every stream model and the routed group
once as a bounded stream (`sqlflow run --mode stream --trigger available-now`, in this process),
so each has a checkpoint and marked appends in its tables. Then, `--rounds` times, for each of
them it times exactly what a query start adds for the check, with the arguments the runtimes
pass: `sink_truth.reconcile` (the damaged-file check, then the markers read from `_delta_log`
of the sink, quarantine, state/progress tables, routed targets and the commit log) and,
separately, `input_rewrites.check` (each input's commits since the checkpoint). It prints each
round and the median and the worst per model and in total. A benchmark, not a test: nothing
asserts a time. The process's first catalog statement (the metastore opening, which any query
start pays, checked or not) is timed apart, before the rounds.
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

from small_project import copy_project  # bench/ is the script's folder
from sqlflow.cli.main import main as cli
from sqlflow.compiler import compile_project
from sqlflow.engine.context import Context
from sqlflow.planning.plan import COMMIT_LOG, RoutedPlan, StreamPlan
from sqlflow.runtime import input_rewrites
from sqlflow.runtime.delta import sink_truth
from sqlflow.runtime.incremental import state
from sqlflow.runtime.query import checkpoint_dir, query_id
from sqlflow.runtime.routed.routing import progress_table

BIN = Path(sys.executable).parent


def tables_and_apps(plan) -> tuple[list[str], tuple[str, ...]]:
    """What the plan's runtime passes to `reconcile` at query start (incremental, stateful and
    routed `start`)."""
    if isinstance(plan, RoutedPlan):
        return [*(t.sink.table for t in plan.targets), plan.quarantine, progress_table(plan), COMMIT_LOG], ()
    if plan.strategy == "stateful":
        return [plan.sink.table, plan.quarantine, COMMIT_LOG], ()
    states = [state.state_table(plan.sink.table, plan.model, b.relation)
              for b in plan.sources if b.read == "stream" and b.old_view]
    return [plan.sink.table, plan.quarantine, COMMIT_LOG, *states], tuple(states)


def one_check(ctx: Context, plan) -> tuple[float, float, int]:
    """Seconds of `reconcile` and of `input_rewrites.check` for one query start; the appends
    found to replay (0 after a clean stop)."""
    spark, checkpoint = ctx.spark, checkpoint_dir(ctx.project_dir, plan)
    tables, extra = tables_and_apps(plan)
    began = time.monotonic()
    replay = sink_truth.reconcile(spark, checkpoint, tables, (f"{plan.model}@{query_id(checkpoint)}", *extra),
                                  what=f"model `{plan.model}`", path=plan.path, rebuild="--full-refresh")
    markers = time.monotonic() - began
    began = time.monotonic()
    input_rewrites.check(spark, checkpoint, [b.relation for b in plan.sources], what=f"model `{plan.model}`",
                         path=plan.path, rebuild="--full-refresh")
    return markers, time.monotonic() - began, len(replay)


def prepare(project: Path, rows: int) -> None:
    """The demo's data, then one bounded stream run of every stream model and the group."""
    done = subprocess.run([str(BIN / "sqlflow"), "demo", "generate", "--rows", str(rows)],
                          cwd=project, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"demo generate failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    began = time.monotonic()
    try:
        cli(["--project-dir", str(project), "run", "--mode", "stream", "--trigger", "available-now"],
            standalone_mode=False)
    except SystemExit as exc:
        if exc.code:
            raise
    print(f"stream run of the demo: {time.monotonic() - began:.1f}s", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=20_000, help="demo impressions to generate")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--keep", action="store_true", help="keep the temp project folder")
    parser.add_argument("--reuse", type=Path, default=None,
                        help="a folder an earlier run kept (--keep): time its queries again, no new run")
    args = parser.parse_args()
    folder = args.reuse or Path(tempfile.mkdtemp(prefix="sqlflow_markers_"))
    project = folder if args.reuse else copy_project(folder)
    try:
        if not args.reuse:
            prepare(project, args.rows)
        ctx = Context.discover(project)
        result = compile_project(project, mode="stream", target=ctx.target)
        result.raise_if_errors()
        plans = {name: p for name, p in result.plans.items()
                 if (isinstance(p, StreamPlan) or isinstance(p, RoutedPlan))
                 and checkpoint_dir(project, p).joinpath("metadata").exists()}
        began = time.monotonic()
        ctx.spark.sql("SHOW DATABASES").collect()  # opens the metastore: every process's first statement pays it
        print(f"the process's first catalog statement (not the check): {time.monotonic() - began:.2f}s", flush=True)
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in plans}
        totals: list[float] = []
        for k in range(args.rounds):
            total = 0.0
            for name, plan in plans.items():
                markers, inputs, replay = one_check(ctx, plan)
                assert replay == 0, f"{name}: {replay} appends to replay after a clean stop"
                times[name].append((markers, inputs))
                total += markers + inputs
            totals.append(total)
            print(f"round {k + 1}: " + ", ".join(f"{n} {t[-1][0]:.3f}+{t[-1][1]:.3f}s" for n, t in times.items())
                  + f"; all queries {total:.2f}s", flush=True)
        print("per query start, markers + input commits (median / worst of the rounds; the "
              "first round reads each log cold):")
        for name, t in times.items():
            both = [m + i for m, i in t]
            print(f"  {name}: markers {statistics.median(m for m, _ in t):.3f}s, inputs "
                  f"{statistics.median(i for _, i in t):.3f}s; together {statistics.median(both):.3f}s "
                  f"(worst {max(both):.3f}s)")
        print(f"all {len(plans)} queries together: median {statistics.median(totals):.2f}s, worst "
              f"{max(totals):.2f}s")
        return 0
    finally:
        if args.keep or args.reuse:
            print(f"kept {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
