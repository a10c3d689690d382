"""The fixed cost of one small micro-batch of the `incremental` interval join (issue 23: a
micro-batch of 1,000 new rows should cost at most 0.5 s), side by side with the hand-written
Spark stateful join under the same trigger.

    .venv/bin/python bench/microbatch_cost.py [--rows 1000] [--batches 8] [--rounds 1]
                                              [--trigger "4 seconds"] [--only sqlflow|hand]
                                              [--profile]

Copies the project to a temp folder, builds the two staging tables (small, then emptied),
and per round runs ONE query of `dwd_ad_clicks_attributed` with a processing-time trigger
(as the stream service runs it), then the hand-written stateful join (`withWatermark` on both
sides, the interval condition, a partitioned Delta sink), each on a fresh sink and
checkpoint. For each query, `--batches` times: right after a trigger boundary (Spark fires
processing-time triggers on multiples of the interval) it appends `--rows` new rows (half
impressions, half clicks of those impressions: every click finds its impression) and waits
until the query has processed them: one micro-batch that starts and ends on whole input
versions, as a real-time one does (two when the appends straddle a boundary: such batches
are printed but left out of the medians).

Per micro-batch it prints: the seconds Spark reports (`durationMs`: triggerExecution and its
parts addBatch, latestOffset, getBatch, queryPlanning, walCommit, commitOffsets), for sqlflow
the seconds of each phase of `MicroBatch._batch` (`BatchReport.phases`), the Spark jobs the
micro-batch ran (the query's job group), the classes Spark's code generation compiled (the
JVM's, the bench's own Spark appends included) and the Delta commits it made per table (new
`_delta_log/<v>.json` files in the warehouse, the input tables left out). Then the median of
each over the micro-batches after the first two (they pay the JVM's warm-up), both queries
side by side with their ratio. Before the numbers it checks that each query wrote exactly the
batch join of its inputs (EXCEPT ALL both ways). `--profile` adds a cProfile of sqlflow's
micro-batches after the first two by cumulative time (on the foreachBatch thread: the py4j
calls show which Spark/Delta/catalog calls the time goes to). A benchmark, not a test:
nothing asserts a time. With `--rounds` above 1 it also prints each query's median and the
median over the rounds after the first (`warm`): the first query of a process runs while the
JVM still compiles Spark's planning code (0.58-0.69 s a micro-batch against 0.33-0.54 s for
the queries after it, 2026-12-02), as a service's queries do only in their first minutes.
Its last line is machine-readable:

    microbatch: sqlflow_p50=<s> hand_p50=<s> ratio=<sqlflow/hand> jobs=<n> commits=<n>
                sqlflow_warm_p50=<s> hand_warm_p50=<s>   (one line; nan with one round)
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import faulthandler
import io
import os
import pstats
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlparse

sys.path.insert(0, str(Path(__file__).resolve().parent))
from interval_join import COLUMNS, MODEL, OUT, copy_project, joined  # noqa: E402
from latency import CLICKS, IMPS, DeltaInputs, _seconds, compiled, empty_inputs, hand_query  # noqa: E402

SPARK_PARTS = ("triggerExecution", "addBatch", "latestOffset", "getBatch", "queryPlanning",
               "walCommit", "commitOffsets")


@dataclass
class Batch:
    """One micro-batch as measured: rows in, Spark's durations (s), sqlflow's phases (s), the
    Spark jobs it ran and the Delta commits it made per table."""

    batch_id: int
    rows: int
    spark: dict[str, float] = field(default_factory=dict)
    phases: dict[str, float] = field(default_factory=dict)
    seconds: float | None = None  # sqlflow: the foreachBatch function's own wall time
    jobs: int = 0
    compiled: int = 0  # classes Spark's code generation compiled (the whole JVM's)
    commits: dict[str, int] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)  # sqlflow: py4j round trips per phase


@dataclass
class Run:
    name: str
    batches: list[Batch] = field(default_factory=list)
    differs: str | None = None

    def steady(self, rows: int) -> list[Batch]:
        """The micro-batches after the first two that took all of a round's rows; when the
        appends always straddled a trigger (a loaded machine), every one after the first two."""
        return [b for b in self.batches[2:] if b.rows == rows] or self.batches[2:]


def main() -> int:
    faulthandler.register(signal.SIGUSR1)  # `kill -USR1 <pid>` prints where the bench is
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1000, help="new input rows per micro-batch")
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=1, help="sqlflow then hand-written, this many times")
    parser.add_argument("--trigger", default="4 seconds", help="both queries' processing-time trigger")
    parser.add_argument("--only", default="", help="`sqlflow` or `hand`: measure one of them")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--profile-out", default="", help="also save the profile's stats to this file")
    parser.add_argument("--keep", default="", help="build the project in this folder and keep it")
    parser.add_argument("--reuse", default="", help="a folder --keep built: skip the set-up")
    args = parser.parse_args()
    if args.reuse:
        return bench(Path(args.reuse), args, fresh=False)
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="sqlflow_mbcost_"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        return bench(copy_project(folder), args)
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)


def bench(project: Path, args, fresh: bool = True) -> int:
    from sqlflow.compiler import compile_project
    from sqlflow.demo.generate import generate
    from sqlflow.engine.context import Context
    from sqlflow.runtime.batch import run_batch

    ctx = Context.discover(project)
    spark = ctx.spark
    spark.sparkContext.setLogLevel("ERROR")
    stream_plans = compile_project(project, mode="stream", target=ctx.target)
    if fresh:
        generate(spark, rows=2000, seed=1, days=1)
        batch_plans = compile_project(project, mode="batch", target=ctx.target)
        for model in ("stg_ad_clicks", "stg_ad_impressions"):
            run_batch(ctx, batch_plans.plans[model])
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {OUT}")
    plan = stream_plans.plans[MODEL]
    side = plan.sources[0]
    lateness = f"{side.allowed_lateness_us + side.future_tolerance_us} microseconds"
    profile = cProfile.Profile() if args.profile else None
    who = [w for w in ("sqlflow", "hand") if not args.only or args.only == w]
    runs: dict[str, list[Run]] = {w: [] for w in who}
    load = [os.getloadavg()[0]]
    for n in range(args.rounds):
        for w in who:
            name = f"mbcost_{w}_{os.getpid()}_{n}"  # new per process: --reuse keeps the folder
            table, checkpoint = f"{OUT}.{name}", project / ".sqlflow" / name
            print(f"round {n + 1}: {w}", flush=True)
            if w == "sqlflow":
                run = run_sqlflow(ctx, plan, table, checkpoint, args, profile)
            else:
                run = run_hand(spark, table, checkpoint, args, lateness)
            runs[w].append(run)
            load.append(os.getloadavg()[0])
            if run.differs:
                print(f"  {run.name} DIFFERS: {run.differs}", flush=True)
    print(f"\nload average (1 min) during the runs: {min(load):.1f}-{max(load):.1f}")
    steady = {w: [b for r in rs for b in r.steady(args.rows)] for w, rs in runs.items()}
    summary(steady, args.rows)
    if profile is not None:
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats("cumulative").print_stats(45)
        if args.profile_out:
            profile.dump_stats(args.profile_out)
        print(out.getvalue())
    warm = per_query(runs, args.rows)
    s, h = steady.get("sqlflow") or [], steady.get("hand") or []
    sp, hp = _trigger(s), _trigger(h)
    jobs = _median([b.jobs for b in s])
    commits = _median([sum(b.commits.values()) for b in s])
    print(f"microbatch: sqlflow_p50={sp:.3f} hand_p50={hp:.3f} "
          f"ratio={sp / hp if hp else float('nan'):.2f} jobs={jobs:g} commits={commits:g} "
          f"sqlflow_warm_p50={warm.get('sqlflow', float('nan')):.3f} "
          f"hand_warm_p50={warm.get('hand', float('nan')):.3f}")
    return 1 if any(r.differs for rs in runs.values() for r in rs) else 0


def run_sqlflow(ctx, plan, table: str, checkpoint: Path, args, profile) -> Run:
    from sqlflow.runtime.incremental import microbatch, stream

    plan = dataclasses.replace(
        plan, sink=dataclasses.replace(plan.sink, table=table, checkpoint=str(checkpoint)),
        quarantine=f"{table}__quarantine")
    empty_inputs(ctx.spark)
    original = microbatch.MicroBatch._batch

    def profiled(self, df, batch_id):
        if profile is not None and batch_id >= 2:
            profile.enable()
        try:
            return original(self, df, batch_id)
        finally:
            if profile is not None:
                profile.disable()

    microbatch.MicroBatch._batch = profiled  # type: ignore[method-assign]
    try:
        with Py4jCalls() as calls:
            query, fn = stream.start(ctx, plan, trigger=args.trigger)  # ONE query, as a service runs it
                # the input rows per batch id as the micro-batches counted them (Spark's
            # numInputRows misses new rows read from the table, not through the envelope)
            run = drive(ctx.spark, Run("sqlflow incremental"), query, args, table,
                        lambda: {r.batch_id: sum(n for _, n in r.rows_in)
                                 for r in list(fn.reports) if r.kind == "batch"})
    finally:
        microbatch.MicroBatch._batch = original  # type: ignore[method-assign]
    if fn.error is not None:
        raise fn.error
    reports = {r.batch_id: r for r in fn.reports if r.kind == "batch"}
    for b in run.batches:
        r = reports.get(b.batch_id)
        if r is not None:
            b.phases, b.seconds = dict(r.phases), r.seconds
            b.calls = calls.per_batch.get(b.batch_id, {})
            print(f"  batch {b.batch_id} phases: " + " ".join(f"{k} {v:.2f}" for k, v in b.phases.items())
                  + f"; py4j calls {sum(b.calls.values())}", flush=True)
    return run


class Py4jCalls:
    """Counts the py4j round trips of each micro-batch's foreachBatch thread, per phase
    (`batchfn.Phases`; `(outside phases)` for the rest): every DataFrame, Column and catalog
    call of the driver is one or more of them."""

    def __init__(self) -> None:
        self.per_batch: dict[int, dict[str, int]] = {}

    def __enter__(self):
        import threading

        from py4j import clientserver

        from sqlflow.runtime import batchfn
        from sqlflow.runtime.incremental import microbatch

        self.targets = [(clientserver.ClientServerConnection, "send_command"),
                        (batchfn.Phases, "__call__"), (microbatch.MicroBatch, "_batch")]
        self.saved = [getattr(c, n) for c, n in self.targets]
        send, phase_call, batch = self.saved
        local, me = threading.local(), self

        def counted_send(conn, command, *a, **k):
            counts = getattr(local, "counts", None)
            if counts is not None:
                key = local.phase[-1] if local.phase else "(outside phases)"
                counts[key] = counts.get(key, 0) + 1
            return send(conn, command, *a, **k)

        from contextlib import contextmanager

        @contextmanager
        def phased(phases, name):
            local.phase = getattr(local, "phase", [])
            local.phase.append(name)
            try:
                with phase_call(phases, name):
                    yield
            finally:
                local.phase.pop()

        def counted_batch(fn, df, batch_id):
            local.counts, local.phase = me.per_batch.setdefault(batch_id, {}), []
            try:
                return batch(fn, df, batch_id)
            finally:
                local.counts = None

        for (c, n), f in zip(self.targets, (counted_send, phased, counted_batch), strict=True):
            setattr(c, n, f)
        return self

    def __exit__(self, *exc) -> None:
        for (c, n), f in zip(self.targets, self.saved, strict=True):
            setattr(c, n, f)


def run_hand(spark, table: str, checkpoint: Path, args, lateness: str) -> Run:
    query = hand_query(spark, table, checkpoint, args.trigger, lateness)
    return drive(spark, Run("hand stateful"), query, args, table,
                 lambda: {p["batchId"]: p["numInputRows"] for p in query.recentProgress
                          if "addBatch" in p["durationMs"]})


def drive(spark, run: Run, query, args, table: str, rows_in: Callable[[], dict[int, int]]) -> Run:
    """Append a round's rows right after each trigger boundary, wait until the query has
    processed them (`rows_in`: input rows per batch id so far), and measure its micro-batches;
    then check its rows."""
    interval = _seconds(args.trigger)
    rows = DeltaInputs(spark, seed=1, disorder=2.0)
    group = str(query.runId)
    tracker = spark.sparkContext.statusTracker()
    warehouse = Path(unquote(urlparse(spark.conf.get("spark.sql.warehouse.dir")).path))
    seen: set[int] = set()
    jobs_before = set(tracker.getJobIdsForGroup(group))
    compiled_before = compiled(spark)
    logs_before = delta_logs(warehouse)
    try:
        for i in range(args.batches):
            boundary = (time.time() // interval + 1) * interval
            time.sleep(max(0.0, boundary - time.time()) + 0.05)
            now = time.time()
            rows.append(i, args.rows // 2, now, False, i)
            rows.append(i, args.rows - args.rows // 2, now + 1, True, i)
            while query.isActive and sum(rows_in().values()) < (i + 1) * args.rows:
                time.sleep(0.1)
            if query.exception() is not None:
                raise RuntimeError(str(query.exception()).splitlines()[0])
            counted = rows_in()
            # sqlflow reports a batch from inside it; Spark's progress of it comes after its
            # commit: wait for that too, or its jobs would be counted with the next batch's
            until = time.monotonic() + 30
            while query.isActive and time.monotonic() < until and \
                    not set(counted) <= {p["batchId"] for p in query.recentProgress}:
                time.sleep(0.05)
            new = [p for p in query.recentProgress
                   if p["batchId"] not in seen and counted.get(p["batchId"])]
            jobs_now, logs_now = set(tracker.getJobIdsForGroup(group)), delta_logs(warehouse)
            compiled_now = compiled(spark)
            commits = {t: logs_now[t] - logs_before.get(t, 0) for t in logs_now
                       if logs_now[t] != logs_before.get(t, 0) and t not in (IMPS, CLICKS)}
            for j, p in enumerate(new):
                seen.add(p["batchId"])
                b = Batch(p["batchId"], counted[p["batchId"]],
                          {k: p["durationMs"].get(k, 0) / 1000 for k in SPARK_PARTS})
                if j == len(new) - 1:  # jobs and commits between two waits: the last batch's
                    b.jobs, b.commits = len(jobs_now - jobs_before), commits
                    b.compiled = compiled_now - compiled_before
                run.batches.append(b)
            jobs_before, logs_before, compiled_before = jobs_now, logs_now, compiled_now
    finally:
        query.stop()
    for b in run.batches:
        spark_s = " ".join(f"{k} {v:.2f}" for k, v in b.spark.items() if v)
        print(f"  batch {b.batch_id}: {b.rows:,} rows; spark: {spark_s}; jobs {b.jobs}; compiled {b.compiled}; commits "
              + (", ".join(f"{t} {n}" for t, n in sorted(b.commits.items())) or "none"), flush=True)
    truth = joined(spark.table(CLICKS), spark.table(IMPS)).select(*COLUMNS)
    got = spark.table(table).select(*COLUMNS)
    missing, extra = truth.exceptAll(got).count(), got.exceptAll(truth).count()
    if missing or extra:
        run.differs = f"{missing:,} rows missing, {extra:,} extra against the batch join of its inputs"
    return run


def delta_logs(warehouse: Path) -> dict[str, int]:
    """`db.table` -> commits in its `_delta_log`, for every Delta table under the warehouse."""
    out: dict[str, int] = {}
    for db in warehouse.iterdir() if warehouse.is_dir() else ():
        for folder in (db.iterdir() if db.is_dir() else ()):
            log = folder / "_delta_log"
            if log.is_dir():
                name = f"{db.name.removesuffix('.db')}.{folder.name}"
                out[name] = sum(1 for n in os.listdir(log) if n.endswith(".json") and n[:-5].isdigit())
    return out


def summary(steady: dict[str, list[Batch]], rows: int) -> None:
    """The medians of each query's micro-batches, side by side."""
    print("\nmedian over the micro-batches after each query's first two "
          + ", ".join(f"({w}: {len(bs)}, rows {sorted({b.rows for b in bs})})" for w, bs in steady.items()))
    names = list(steady)
    print(f"{'':<28}" + "".join(f"{n:>12}" for n in names) + (f"{'ratio':>9}" if len(names) > 1 else ""))

    def line(label: str, values: list[float]) -> None:  # ratio: the first run over the last
        ratio = f"{values[0] / values[-1]:>9.2f}" if len(values) > 1 and values[-1] else ""
        print(f"{label:<28}" + "".join(f"{v:>12.3f}" for v in values) + ratio)

    for k in SPARK_PARTS:
        line(f"spark {k}", [_median([b.spark.get(k, 0.0) for b in steady[n]]) for n in names])
    line("spark jobs", [_median([b.jobs for b in steady[n]]) for n in names])
    line("classes compiled", [_median([b.compiled for b in steady[n]]) for n in names])
    line("delta commits", [_median([sum(b.commits.values()) for b in steady[n]]) for n in names])
    for w in [n for n in names if n.startswith("sqlflow")]:
        phases_of(w, steady[w])


def per_query(runs: dict[str, list[Run]], rows: int) -> dict[str, float]:
    """Print each query's median micro-batch (Spark's triggerExecution, after its first two);
    return, per run kind, the median over the queries after the process's first round: the
    JVM has compiled Spark's planning code by then, as in a service that has run a while."""
    print("\nmedian micro-batch per query (s): "
          + "; ".join(f"{w} " + " ".join(f"{_trigger(r.steady(rows)):.3f}" for r in rs) for w, rs in runs.items()))
    warm = {w: _trigger([b for r in rs[1:] for b in r.steady(rows)]) for w, rs in runs.items() if len(rs) > 1}
    if warm:
        print("after the first round: " + ", ".join(f"{w} {v:.3f}" for w, v in warm.items()))
    return warm


def _trigger(batches: list[Batch]) -> float:
    return _median([b.spark.get("triggerExecution", 0.0) for b in batches])


def phases_of(w: str, s: list[Batch]) -> None:
    if s:
        print(f"{w} foreachBatch phases (median s):")
        phases = list(dict.fromkeys(k for b in s for k in b.phases))
        print(f"  {'phase':<26}{'seconds':>12}{'py4j calls':>12}")
        for k in [*phases, "(outside phases)"]:
            print(f"  {k:<26}{_median([b.phases.get(k, 0.0) for b in s]):>12.3f}"
                  f"{_median([b.calls.get(k, 0) for b in s]):>12g}")
        print(f"  {'(foreachBatch in all)':<26}{_median([b.seconds or 0.0 for b in s]):>12.3f}"
              f"{_median([sum(b.calls.values()) for b in s]):>12g}")
        tables = sorted({t for b in s for t in b.commits})
        print(f"{w} Delta commits per micro-batch (median): "
              + ", ".join(f"{t} {_median([b.commits.get(t, 0) for b in s]):g}" for t in tables))


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


if __name__ == "__main__":
    sys.exit(main())
