"""Interval-join throughput and memory: sqlflow's plans against hand-written PySpark (docs/design.md §2.9).

    .venv/bin/python bench/interval_join.py [--rows 200000] [--batches 0] [--rounds 2] [--seed 42]
                                            [--inputs DIR]

Copies the project to a temp folder (its own warehouse and metastore), generates the ad data
with the demo generator (`--rows` impressions; clicks scale with it), builds the two staging
tables with their batch plans (`--inputs DIR`: in a folder under DIR named by the data's
arguments, kept, and reused by a later run with the same arguments and the same generator,
sources yml and staging models: the project files copied again, the earlier run's tables,
checkpoints and commit-log rows dropped), then measures, in
this one process and on one SparkSession, the
20-minute click-to-impression join `dwd_ad_clicks_attributed` five ways:

  batch plan            sqlflow's backfill (`run_batch`)
  incremental stream    sqlflow's default stream plan, a bounded catch-up run (available-now)
  stateful stream       the same model with `stream_strategy: stateful`, bounded
  hand stateful stream  PySpark: `withWatermark` on both sides (delay: the inputs' allowed
                        lateness + future tolerance) + the interval join, bounded
  hand batch            PySpark: the same join over static reads

A catch-up run is measured as a user runs it: by default (`--batches 0`) every stream run
sizes its micro-batches as it does without configuration (the Delta source's default of 1000
files per trigger, for sqlflow and the hand-written join alike). `--batches N` makes every
stream run read both inputs with the same `maxFilesPerTrigger` instead (about N micro-batches),
which shows the fixed cost of a micro-batch. Every run is measured `--rounds` times (default
2, each round runs them all in order) and its fastest round is reported: the first round of
whichever run comes first pays the JVM's warm-up (class loading, JIT, code generation). A stream
run starts on a fresh table and checkpoint each round; the two batch runs write the table they
wrote the round before (the first round creates it), as a backfill after an outage does. Throughput is input rows (both sides) per second of wall time, timed
from after a `System.gc()` before each run to its end. Peak memory is
the JVM heap in use (`Runtime.totalMemory() - freeMemory()`, read through py4j every 100 ms
from a second Python thread, after that `System.gc()`): in local mode the driver
JVM is the executor too, so it includes Spark's in-memory join state; it counts garbage not yet
collected, so read it as an upper bound and compare the runs with each other.
`--retained-every S` adds one round after the timed ones in which the sampler also asks for a
full collection every S seconds and reads the heap right after it: the most the run retained
(live objects, no garbage), the figure for "state on disk, not in the heap"; the pauses slow
that round, so it is not timed (its rows are checked like every round's).

Then it checks that every run produced the same rows as the batch plan (both directions of
EXCEPT ALL, every column) and prints the ratios with their targets: the default stream plan at
least 3x the hand-written stateful join, and within 2x of the batch plan; the batch plan at
least 1x the hand-written batch join (the other ratios are printed for comparison, without a
target). Under the first and the last it prints the same ratio round by round, and the seconds that target allows the incremental run, next to what the same input costs
with no stream work at all (the batch plan, the hand-written batch join) and what the run
spent on stream-only work (state appends, commit log, query start and stop). A run that fails is
reported with its error and the others still run; the script exits 1 if any run failed or
differs. A benchmark, not a test: nothing here asserts a time.

`--peers flink` also runs the join in Flink SQL (bench/peers/flink_interval_join.py, PyFlink
in its own environment, `--flink-python`): Spark exports the two staging tables once, before
any timing, as one CSV file each sorted by ingest time (the order their rows arrived in); Flink
runs the join `--rounds` times as an event-time stream (watermarks delayed by the same
allowed lateness + future tolerance) and as a batch job, in a second process with the same
cores. Its rows are compared with the batch plan's like every run's (missing and extra rows
are printed; a difference of a peer is reported, not an exit status), and the script prints
the catch-up `incremental` run over Flink's stream (target: at least 3x) and the batch plan
over Flink's batch job. Without PyFlink it says how to install it and exits 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

MODEL = "dwd_ad_clicks_attributed"
STATEFUL = "bench_attributed_stateful"
INPUTS = ("dw.stg_ad_clicks", "dw.stg_ad_impressions")
OUT = "bench"
STATEFUL_TARGET = 3.0  # the default stream plan's catch-up against the hand-written stateful join
BATCHES_TARGET = 2.0  # the same with small micro-batches, `--batches N` (issue 23, item 2)
BATCH_TARGET = 1.0  # the batch plan against the hand-written batch join (issue 23, item 4)
FLINK_TARGET = 3.0  # the default stream plan against Flink SQL's streaming interval join
PEER = ROOT / "bench" / "peers" / "flink_interval_join.py"
BATCH_RUNS = ("batch plan", "hand batch")  # measured writing the table they wrote the round before
COLUMNS = ("req_id", "ad_id", "user_id", "click_ts", "ingest_ts", "imp_ts", "imp_user_id", "dt", "hour")


@dataclass
class Measure:
    name: str
    table: str
    rows_in: int = 0
    rows_out: int = 0
    seconds: float = 0.0
    peak_heap_mb: float = 0.0
    live_heap_mb: float = 0.0  # the most the heap held right after a collection (`HeapSampler`)
    retained_heap_mb: float | None = None  # the most a full collection left, `--retained-every` round
    batches: int | None = None
    error: str | None = None
    differs: str | None = None
    peer: bool = False  # another engine's run, in its own process: no heap figure, no exit status

    @property
    def rows_per_s(self) -> float:
        return self.rows_in / self.seconds if self.seconds else 0.0


class HeapSampler:
    """Peak JVM heap while a run is going, sampled every `every` seconds via py4j: `peak`, the
    heap in use (live rows and garbage not yet collected: it grows with the heap the JVM may
    use before it collects), and `live`, the most the heap held right after a collection (the
    garbage collectors' last `GcInfo`, summed over the heap's pools): at most what the run
    kept (after a young collection the old generation may still hold garbage a later mixed
    collection reclaims). A collection between two samples that is not the last is not seen;
    the one the sampler asks for at the start is.

    With `full_every` (seconds) it also asks for a full collection (`System.gc()`, stop the
    world) that often and once at the end, and reads the heap right after each: `retained`,
    the most the run held while it went (live objects only, no garbage of either generation),
    the figure that shows state held in the heap (issue 23, item 5). The pauses slow the run:
    time such a run apart."""

    def __init__(self, spark, every: float = 0.1, full_every: float = 0.0):
        self.jvm, self.every, self.full_every = spark.sparkContext._jvm, every, full_every
        self.peak, self.live, self.retained, self._stop = 0, 0, 0, threading.Event()
        self._next_full = 0.0
        management = self.jvm.java.lang.management.ManagementFactory
        self._collectors = list(management.getGarbageCollectorMXBeans())
        self._pools = {p.getName() for p in management.getMemoryPoolMXBeans()
                       if p.getType().toString() == "Heap memory"}
        self._seen = [-1] * len(self._collectors)

    def used(self) -> int:
        rt = self.jvm.java.lang.Runtime.getRuntime()
        return rt.totalMemory() - rt.freeMemory()

    def after_collections(self) -> int:
        """The heap in use after each collector's newest collection not seen before (the most
        of them; 0: none since the last call)."""
        most = 0
        for i, collector in enumerate(self._collectors):
            count = collector.getCollectionCount()
            if count == self._seen[i]:
                continue
            self._seen[i] = count
            info = collector.getLastGcInfo()
            if info is None:
                continue
            after = info.getMemoryUsageAfterGc()
            most = max(most, sum(after.get(name).getUsed() for name in after.keySet() if name in self._pools))
        return most

    def __enter__(self):
        self.jvm.java.lang.System.gc()
        self.peak = self.used()
        self.live = self.after_collections()
        self._next_full = time.monotonic() + self.full_every
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        self.peak = max(self.peak, self.used())
        self.live = max(self.live, self.after_collections())
        if self.full_every and time.monotonic() >= self._next_full:
            self.jvm.java.lang.System.gc()
            self.retained = max(self.retained, self.used())
            self._next_full = time.monotonic() + self.full_every

    def _poll(self) -> None:
        while not self._stop.wait(self.every):
            try:
                self._sample()
            except Exception:  # the JVM is busy shutting a query down: skip a sample
                pass

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self._next_full = 0.0  # and one full collection at the end: a run shorter than `full_every`
        self._sample()


def explicit_gc_flags(spark) -> str:
    """The JVM flags that turn `System.gc()` into something other than a full collection (then
    `HeapSampler` cannot read a retained heap)."""
    jvm = spark.sparkContext._jvm
    bean = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
        jvm.com.sun.management.HotSpotDiagnosticMXBean._java_lang_class)
    return ", ".join(f"-XX:+{name}" for name in ("DisableExplicitGC", "ExplicitGCInvokesConcurrent")
                     if bean.getVMOption(name).getValue() == "true")


def copy_project(folder: Path) -> Path:
    """This checkout's project files into `folder` (replacing any there; data under `.sqlflow/` stays)."""
    for name in ("dbt_project.yml", "models", "macros", "profiles", "udfs"):
        src, dst = ROOT / name, folder / name
        if src.is_dir():
            shutil.rmtree(dst, ignore_errors=True)
            shutil.copytree(src, dst)
        else:
            shutil.copy(src, dst)
    text = (folder / "models/dwd" / f"{MODEL}.sql").read_text()
    config = "materialized='streaming_table',"
    if config not in text:
        raise SystemExit(f"bench: cannot find `{config}` in {MODEL}.sql to derive the stateful copy")
    (folder / "models/dwd" / f"{STATEFUL}.sql").write_text(
        text.replace(config, f"{config} stream_strategy='stateful',", 1))
    return folder


def inputs_fingerprint() -> str:
    """What made a kept input (`--inputs`): a hash of the demo generator's code, the sources'
    yml and the staging models, so inputs made by other ones are made again."""
    import hashlib

    digest = hashlib.sha256()
    files = [*sorted((ROOT / "src/sqlflow/demo").glob("*.py")), ROOT / "models/sources.yml",
             *sorted((ROOT / "models/staging").glob("*"))]
    for path in files:
        digest.update(path.relative_to(ROOT).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _whole_inputs(marker: Path) -> bool:
    """Whether `marker` says its folder's inputs were built whole by this generator, sources yml
    and staging models (`inputs_fingerprint`): an interrupted build wrote none, a torn one
    cannot be read."""
    try:
        kept = json.loads(marker.read_text())
    except (OSError, ValueError):
        return False
    return (isinstance(kept, dict) and kept.get("made_by") == inputs_fingerprint()
            and "commit_log_version" in kept)


def timed(m: Measure, spark, run: Callable[[], int | None], full_every: float = 0.0) -> Measure:
    """Run `run` (returns its micro-batch count, or None), sampling the heap; keep the error.
    The clock starts after the sampler's `System.gc()`: the harness's collection of earlier
    runs' garbage is not the run's time. With `full_every`, the sampler's full collections
    (`HeapSampler`) give `retained_heap_mb` and slow the run: its time is not a measure."""
    began = None
    try:
        with HeapSampler(spark, full_every=full_every) as heap:
            began = time.monotonic()
            m.batches = run()
            m.seconds = time.monotonic() - began
        m.peak_heap_mb, m.live_heap_mb = heap.peak / 2**20, heap.live / 2**20
        if full_every:
            m.retained_heap_mb = heap.retained / 2**20
    except Exception as exc:  # a failed run is a result too: report it and go on
        m.error = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if "--debug" in sys.argv:
            traceback.print_exc()
        m.seconds = time.monotonic() - began if began is not None else 0.0
    if m.error is None:
        m.rows_out = spark.table(m.table).count()
    return m


def condition():
    from pyspark.sql import functions as F

    return ((F.col("c.req_id") == F.col("i.req_id")) & (F.col("c.ad_id") == F.col("i.ad_id"))
            & F.col("i.imp_ts").between(F.col("c.click_ts") - F.expr("INTERVAL 20 MINUTES"),
                                        F.col("c.click_ts")))


def joined(clicks, imps):
    """The model's SELECT list over the joined frames (aliases `c` and `i`)."""
    from pyspark.sql import functions as F

    return clicks.alias("c").join(imps.alias("i"), condition(), "inner").select(
        "c.req_id", "c.ad_id", "c.user_id", "c.click_ts", "c.ingest_ts", "i.imp_ts",
        F.col("i.user_id").alias("imp_user_id"),
        F.date_format("c.click_ts", "yyyy-MM-dd").alias("dt"),
        F.date_format("c.click_ts", "HH").alias("hour"))


def hand_batch(spark, table: str) -> None:
    joined(spark.table(INPUTS[0]), spark.table(INPUTS[1])).write.format("delta") \
        .mode("overwrite").partitionBy("dt", "hour").saveAsTable(table)


def hand_stateful(spark, table: str, files: int | None, checkpoint: Path, lateness: str) -> int:
    def read(relation, ts):
        reader = spark.readStream.format("delta")
        if files:
            reader = reader.option("maxFilesPerTrigger", files)
        return reader.table(relation).withWatermark(ts, lateness)

    query = (joined(read(INPUTS[0], "click_ts"), read(INPUTS[1], "imp_ts")).writeStream
             .format("delta").partitionBy("dt", "hour").outputMode("append")
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True)
             .toTable(table))
    query.awaitTermination()
    return len(query.recentProgress)


DETECTED: dict[str, str] = {}  # sink table -> what the run itself reported as diverging (docs/design.md §2.7)
PHASES: dict[str, dict[str, float]] = {}  # sink table -> seconds per micro-batch phase, summed


def sqlflow_stream(ctx, plan, table: str, files: int | None, checkpoint: Path) -> int:
    from sqlflow.runtime.dispatch import run_stream

    plan = dataclasses.replace(
        plan, sources=tuple(dataclasses.replace(b, max_files_per_trigger=files)
                            if b.read == "stream" and files else b for b in plan.sources),
        sink=dataclasses.replace(plan.sink, table=table, checkpoint=str(checkpoint)),
        quarantine=f"{table}__quarantine")
    began = time.monotonic()
    result = run_stream(ctx, plan)
    phases = PHASES[table] = {}
    for b in result.batches:
        for name, seconds in getattr(b, "phases", ()):
            phases[name] = phases.get(name, 0.0) + seconds
    if phases:
        phases["outside micro-batches"] = (time.monotonic() - began) - sum(b.seconds for b in result.batches)
    dropped = sum(getattr(b, "dropped", 0) or 0 for b in result.batches)
    dirty = sorted({p for b in result.batches for p, _ in getattr(b, "dirty", ())})
    if dropped or dirty:
        DETECTED[table] = (f"the run itself counted {dropped:,} rows behind its watermark and marked "
                           f"{len(dirty)} partition(s) dirty for `sqlflow repair` (docs/design.md §2.7)")
    return len(result.batches)


# CSV as both sides write and read it: RFC 4180 quoting, null as \N, microsecond timestamps
CSV_OPTIONS = {"header": "false", "nullValue": "\\N", "escape": '"', "timestampFormat": "yyyy-MM-dd HH:mm:ss.SSSSSS"}
FLINK_SIDES = ((INPUTS[0], "clicks", "click_ts"), (INPUTS[1], "impressions", "imp_ts"))


def flink_python(args) -> str:
    """The Python that has PyFlink: `--flink-python`, else the worktree's `.venv-flink`, else this one."""
    if args.flink_python:
        return args.flink_python
    own = ROOT / ".venv-flink" / "bin" / "python"
    return str(own) if own.exists() else sys.executable


def flink_missing(python: str) -> str | None:
    """Why the Flink peer cannot run with `python`, or None when PyFlink imports."""
    try:
        done = subprocess.run([python, "-c", "import pyflink.table"], capture_output=True, text=True)
    except OSError as exc:
        return f"{python}: {exc}"
    if done.returncode == 0:
        return None
    return (f"bench: --peers flink needs PyFlink, which {python} cannot import. It cannot share "
            "sqlflow's environment (docs/stack.md, 'apache-flink'); install it into its own:\n"
            "  python3 -m venv .venv-flink && .venv-flink/bin/pip install -r bench/peers/requirements-flink.txt\n"
            "(found by default, or pass --flink-python PATH)")


def export_for_flink(spark, folder: Path, order: str) -> None:
    """The staging tables as CSV for Flink (not measured; the Spark runs read the Delta tables).
    `ingest`: each table one file in ingest-time order, the order its rows arrived in; `files`:
    as Spark scans the table, one file per task, so Flink reads files in its own order."""
    for table, name, ts in FLINK_SIDES:
        rows = spark.table(table).select("req_id", "ad_id", "user_id", ts, "ingest_ts")
        if order == "ingest":
            rows = rows.repartition(1).sortWithinPartitions("ingest_ts", ts)
        rows.write.options(**CSV_OPTIONS).csv(str(folder / name))


def run_flink(spark, args, mode: str, inputs: Path, out: Path, delay_s: int, rows_in: int) -> list[Measure]:
    """Flink SQL's join in `mode`, `--rounds` times in one second process; each round's output
    as a temp view of the model's columns (the microsecond timestamps parsed back)."""
    name = f"Flink SQL {mode}"
    cmd = [flink_python(args), str(PEER), "--inputs", str(inputs), "--out", str(out), "--mode", mode,
           "--rounds", str(args.rounds), "--watermark-delay-s", str(delay_s)]
    print(f"Flink SQL {mode}: {args.rounds} round(s) in a second process")
    done = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        return [Measure(name, "", rows_in, error=f"exit {done.returncode}: {' '.join(cmd)}", peer=True)]
    measures = []
    for k, r in enumerate(json.loads(lines[-1])["rounds"], 1):
        view = f"flink_{mode}_r{k}"
        text = spark.read.options(**CSV_OPTIONS).schema(", ".join(f"{c} string" for c in COLUMNS)).csv(r["out"])
        text.selectExpr("req_id", "cast(ad_id as bigint) ad_id", "cast(user_id as bigint) user_id",
                        "cast(click_ts as timestamp) click_ts", "cast(ingest_ts as timestamp) ingest_ts",
                        "cast(imp_ts as timestamp) imp_ts", "cast(imp_user_id as bigint) imp_user_id",
                        "dt", "hour").createOrReplaceTempView(view)
        measures.append(Measure(name, view, rows_in, r["rows"], r["seconds"], peer=True))
        print(f"  round {k}: {r['seconds']:.1f}s; {r['rows']:,} rows out")
    return measures


def files_of(spark, relation: str) -> int:
    return spark.sql(f"DESCRIBE DETAIL {relation}").collect()[0]["numFiles"]


def check_same(spark, runs: list[Measure], truth: Measure) -> None:
    want = spark.table(truth.table).select(*COLUMNS)
    for m in runs:
        if m.error or m is truth:
            continue
        got = spark.table(m.table).select(*COLUMNS)
        missing, extra = want.exceptAll(got).count(), got.exceptAll(want).count()
        if missing or extra:
            m.differs = f"{missing:,} rows missing, {extra:,} extra against the batch plan"
            if m.table in DETECTED:
                m.differs += f"; {DETECTED[m.table]}"


def report(runs: list[Measure], by: dict[str, Measure], every: dict[str, list[Measure]],
           batches: int = 0) -> bool:
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False, width=110)
    table = Table(title="Interval join: clicks to impressions of the previous 20 minutes",
                  title_justify="left")
    retained = any(m.retained_heap_mb is not None for m in runs)  # `--retained-every`
    for col in ("run", "rows in", "rows out", "batches", "seconds", "rows/s", "peak heap MB",
                "after GC MB", *(("full GC MB",) if retained else ()), "result"):
        table.add_column(col, justify="left" if col in ("run", "result") else "right",
                         no_wrap=col == "run")
    for m in runs:
        result = ("[red]FAILED[/red]" if m.error else "[red]DIFFERS[/red]" if m.differs
                  else "[green]same rows[/green]")  # the reason is printed below the table
        heap = [m.peak_heap_mb, m.live_heap_mb, *((m.retained_heap_mb,) if retained else ())]
        table.add_row(m.name, f"{m.rows_in:,}", f"{m.rows_out:,}" if not m.error else "-",
                      str(m.batches) if m.batches is not None else "-", f"{m.seconds:.1f}",
                      f"{m.rows_per_s:,.0f}" if not m.error else "-",
                      *(f"{h:,.0f}" if h is not None and not (m.error or m.peer) else "-" for h in heap),
                      result)
    console.print(table)

    def ratio(a: str, b: str, target: float | None, label: str) -> None:
        """Throughput of run `a` over run `b`; against `target` when the issue sets one (the
        two targets of the default stream plan), else printed for comparison only."""
        if a not in by or b not in by:
            return  # not measured (--only)
        x, y = by[a], by[b]
        if x.error or y.error:
            console.print(f"{label}: n/a ({a if x.error else b} failed)")
            return
        r = x.rows_per_s / y.rows_per_s
        verdict = "no target, for comparison"
        if target is not None:
            verdict = f"target >= {target:g}x: " + ("[green]meets[/green]" if r >= target else "[red]misses[/red]")
        heap = ("" if x.peer or y.peer  # another process: its heap is not sampled
                else f"; peak heap {x.peak_heap_mb:,.0f} MB vs {y.peak_heap_mb:,.0f} MB")
        console.print(f"{label}: {r:.2f}x ({verdict}){heap}")

    target = BATCHES_TARGET if batches else STATEFUL_TARGET
    ratio("incremental stream", "hand stateful stream", target, "incremental stream vs hand-written stateful stream")
    per_round(console, every, "incremental stream", "hand stateful stream")
    budget(console, by, target)
    ratio("incremental stream", "batch plan", 0.5, "incremental stream vs batch plan (within 2x)")
    ratio("stateful stream", "hand stateful stream", None, "stateful stream plan vs hand-written stateful stream")
    ratio("batch plan", "hand batch", BATCH_TARGET, "batch plan vs hand-written batch")
    per_round(console, every, "batch plan", "hand batch")
    ratio("incremental stream", "Flink SQL streaming", FLINK_TARGET, "incremental stream vs Flink SQL streaming")
    ratio("batch plan", "Flink SQL batch", None, "batch plan vs Flink SQL batch")
    truth = by.get("batch plan")
    for m in runs:
        if m.peer and not m.error and truth and not truth.error:
            share = m.rows_out / truth.rows_out if truth.rows_out else 0.0
            console.print(f"{m.name}: {m.rows_out:,} rows of the batch plan's {truth.rows_out:,} ({share:.1%}); "
                          + (f"[red]{m.differs}[/red]" if m.differs else "[green]the same rows[/green]"))
    for m in runs:
        if PHASES.get(m.table):
            parts = ", ".join(f"{k} {v:.1f}s" for k, v in PHASES[m.table].items())
            console.print(f"{m.name}, time per phase over all micro-batches: {parts}")
    bad = [m for m in runs if m.error or m.differs]
    for m in bad:
        console.print(f"[red]{m.name}: {m.error or m.differs}[/red]")
    return not [m for m in bad if not m.peer]


def per_round(console, every: dict[str, list[Measure]], a: str, b: str) -> None:
    """The ratio of `a` over `b` in each round (the same round's two runs), so a reader sees
    whether the fastest rounds' ratio holds round by round or only at its best."""
    pairs = list(zip(every.get(a, []), every.get(b, []), strict=False))
    if len(pairs) < 2:
        return
    ratios = [f"{y.seconds / x.seconds:.2f}x" if not (x.error or y.error) and x.seconds else "n/a"
              for x, y in pairs]
    console.print(f"  per round ({a} s / {b} s): " + ", ".join(
        f"{x.seconds:.1f}/{y.seconds:.1f} = {r}" for (x, y), r in zip(pairs, ratios, strict=True)))


def budget(console, by: dict[str, Measure], target: float) -> None:
    """What the target against the hand-written stateful join leaves the incremental run,
    next to what the same input costs without any stream work: the batch plan and the
    hand-written batch join."""
    hand, inc = by.get("hand stateful stream"), by.get("incremental stream")
    if not hand or not inc or hand.error or inc.error or not hand.rows_per_s:
        return
    allowed = inc.rows_in / (target * hand.rows_per_s)
    costs = [f"{m.name} {m.seconds:.1f}s" for m in (by.get("batch plan"), by.get("hand batch"))
             if m and not m.error]
    stream_only = {k: v for k, v in PHASES.get(inc.table, {}).items()
                   if k in ("state", "commit log", "outside micro-batches")}
    extra = (f"; the incremental run spent {sum(stream_only.values()):.1f}s on work a batch run does "
             f"not do ({', '.join(f'{k} {v:.1f}s' for k, v in stream_only.items())})") if stream_only else ""
    console.print(f"  {target:g}x the hand-written stateful join allows the incremental run {allowed:.1f}s; "
                  f"the same input without stream work: {', '.join(costs)}{extra}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000, help="ad impressions to generate")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--days", type=int, default=2)
    parser.add_argument("--batches", type=int, default=0,
                        help="about this many micro-batches per stream run (0: each run's own default)")
    parser.add_argument("--rounds", type=int, default=2, help="measure every run this many times; "
                        "the fastest round is reported")
    parser.add_argument("--keep", action="store_true", help="keep the temp project folder")
    parser.add_argument("--only", default="", help="comma-separated runs to measure besides the batch "
                        "plan (e.g. `incremental,hand stateful`); default: all")
    parser.add_argument("--inputs", type=Path, default=None, help="keep the generated inputs in a folder "
                        "under this one, named by --rows, --seed and --days, and reuse them when it is there "
                        "(generating 16M rows takes minutes); the project files are copied afresh every time")
    parser.add_argument("--debug", action="store_true", help="print the traceback of a failed run")
    parser.add_argument("--retained-every", type=float, default=0.0, help="after the timed rounds, run "
                        "every run once more asking for a full collection this often (seconds) and report the "
                        "most the heap held after one (`retained`); that round is not timed (0: no such round)")
    parser.add_argument("--json", type=Path, default=None, help="also write every run's measure "
                        "(its fastest round) to this file, as JSON (bench/scale.py reads it)")
    parser.add_argument("--peers", default="", help="other engines to run side by side: `flink` "
                        "(Flink SQL through PyFlink, bench/peers/flink_interval_join.py)")
    parser.add_argument("--flink-python", default="", help="the Python that has PyFlink "
                        "(default: .venv-flink/bin/python if it exists, else this one)")
    parser.add_argument("--flink-order", choices=("ingest", "files"), default="ingest",
                        help="how the inputs are laid out for Flink: one file per table in ingest-time "
                        "order, or Spark's files of the table as scanned (read in Flink's order)")
    args = parser.parse_args()
    if args.retained_every < 0:
        parser.error("--retained-every must be 0 (no retained-heap round) or a number of seconds above 0")
    peers = {w.strip() for w in args.peers.split(",") if w.strip()}
    if peers - {"flink"}:
        raise SystemExit(f"bench: --peers names unknown peers: {', '.join(sorted(peers - {'flink'}))}")
    if "flink" in peers and (why := flink_missing(flink_python(args))):
        print(why, file=sys.stderr)
        return 2
    args.peers = peers

    if args.inputs:  # kept: generated once per size, reused by later runs
        if args.inputs.exists() and not args.inputs.is_dir():
            parser.error(f"--inputs {args.inputs} is a file; give a folder (created when missing)")
        folder = args.inputs.resolve() / f"rows{args.rows}_seed{args.seed}_days{args.days}"
        folder.mkdir(parents=True, exist_ok=True)
        state = folder / ".sqlflow"
        if state.exists() and not _whole_inputs(state / "bench_inputs.json"):
            # before any session (the folder holds its metastore too): start from nothing
            print(f"the inputs in {folder} are not whole or were made by another generator or "
                  "staging models: made again")
            shutil.rmtree(state)
        return bench(copy_project(folder), args)
    folder = Path(tempfile.mkdtemp(prefix="sqlflow_bench_"))
    try:
        return bench(copy_project(folder), args)
    finally:
        if args.keep:
            print(f"kept {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)


def bench(project: Path, args) -> int:
    from sqlflow.compiler import compile_project
    from sqlflow.demo.generate import generate
    from sqlflow.engine.context import Context
    from sqlflow.planning.plan import COMMIT_LOG
    from sqlflow.runtime.batch import run_batch
    from sqlflow.runtime.delta.deltalog import latest_version

    ctx = Context.discover(project)
    spark = ctx.spark
    spark.sparkContext.setLogLevel("ERROR")
    if args.retained_every and (flags := explicit_gc_flags(spark)):  # before any run, not after them
        raise SystemExit(f"bench: the JVM runs with {flags}: System.gc() is then no full collection "
                         "and --retained-every cannot read the retained heap; drop the flag or the option")
    batch_plans = compile_project(project, mode="batch", target=ctx.target)
    stream_plans = compile_project(project, mode="stream", target=ctx.target)
    batch_plans.raise_if_errors()
    stream_plans.raise_if_errors()
    built = project / ".sqlflow" / "bench_inputs.json"  # written once the inputs are whole
    kept = json.loads(built.read_text()) if built.exists() else None  # (checked by `main`)
    if kept is not None:
        needed = (*INPUTS, COMMIT_LOG) if kept["commit_log_version"] is not None else INPUTS
        gone = [t for t in needed if not spark.catalog.tableExists(t)]
        if gone:  # removed by hand since: the metastore lives in the folder, so not built again here
            raise SystemExit(f"bench: the kept inputs in {project} lack {', '.join(gone)}; "
                             f"remove {project} and run again to generate them")
        print(f"reusing the inputs generated in {project}")
        # as they were after the build: no earlier run's tables, checkpoints or commit-log rows
        spark.sql(f"DROP DATABASE IF EXISTS {OUT} CASCADE")
        for leftover in ("bench", "flink"):
            shutil.rmtree(project / ".sqlflow" / leftover, ignore_errors=True)
        if kept["commit_log_version"] is not None:
            spark.sql(f"RESTORE TABLE {COMMIT_LOG} TO VERSION AS OF {int(kept['commit_log_version'])}")
    else:
        print(f"generating {args.rows:,} impressions over {args.days} day(s) (seed {args.seed}) in {project}")
        generate(spark, rows=args.rows, seed=args.seed, days=args.days)
        for model in ("stg_ad_clicks", "stg_ad_impressions"):
            print(f"building {model} (batch plan; not measured)")
            run_batch(ctx, batch_plans.plans[model])
        if args.inputs:
            version = latest_version(spark, COMMIT_LOG)
            built.write_text(json.dumps({"rows": args.rows, "seed": args.seed, "days": args.days,
                                         "commit_log_version": version,
                                         "made_by": inputs_fingerprint()}) + "\n")
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {OUT}")
    rows_in = sum(spark.table(t).count() for t in INPUTS)
    files = (max(1, math.ceil(max(files_of(spark, t) for t in INPUTS) / args.batches))
             if args.batches > 0 else None)
    # hand-written watermark delay: allowed lateness + future tolerance of the inputs, the least
    # delay that drops no clean row when each input arrives in ingest-time order
    side = stream_plans.plans[MODEL].sources[0]
    lateness = f"{side.allowed_lateness_us + side.future_tolerance_us} microseconds"
    print(f"inputs: {rows_in:,} rows; stream runs read "
          + (f"{files} file(s) per input per micro-batch" if files else "with their default micro-batch size"))
    checkpoints = project / ".sqlflow" / "bench"

    def batch_plan(table: str, _checkpoint: Path) -> None:
        plan = batch_plans.plans[MODEL]
        run_batch(ctx, dataclasses.replace(plan, sink=dataclasses.replace(plan.sink, table=table),
                                           quarantine=f"{table}__quarantine"))

    steps = [  # (name, run(table, checkpoint))
        ("batch plan", batch_plan),
        ("incremental stream", lambda t, c: sqlflow_stream(ctx, stream_plans.plans[MODEL], t, files, c)),
        ("stateful stream", lambda t, c: sqlflow_stream(ctx, stream_plans.plans[STATEFUL], t, files, c)),
        ("hand stateful stream", lambda t, c: hand_stateful(spark, t, files, c, lateness)),
        ("hand batch", lambda t, _c: hand_batch(spark, t)),
    ]
    only = {w.strip() for w in args.only.split(",") if w.strip()}
    unknown = only - {name.removesuffix(" stream") for name, _ in steps} - {name for name, _ in steps}
    if unknown:
        raise SystemExit(f"bench: --only names unknown runs: {', '.join(sorted(unknown))}")
    steps = [(name, run) for name, run in steps
             if not only or name == "batch plan" or name in only or name.removesuffix(" stream") in only]
    best: dict[str, Measure] = {}
    every: dict[str, list[Measure]] = {}  # each run's measure in every round, in round order
    retained: dict[str, Measure] = {}  # each run's `--retained-every` round (not timed)
    for round_ in range(1, args.rounds + 1 + (args.retained_every > 0)):
        full_every = args.retained_every if round_ > args.rounds else 0.0
        for name, run in steps:
            slug = name.replace(" stream", "").replace(" ", "_")
            # a batch run writes its table again (a backfill after an outage: the table
            # exists), a stream run starts on a fresh table and checkpoint
            table = f"{OUT}.{slug}" if name in BATCH_RUNS else f"{OUT}.{slug}_r{round_}"
            print(f"round {round_}/{args.rounds}: {name}" if not full_every else
                  f"retained heap: {name} (a full collection every {full_every:g}s; not timed)")
            m = timed(Measure(name, table, rows_in), spark,
                      lambda run=run, table=table, slug=slug, round_=round_:
                      run(table, checkpoints / f"{slug}_r{round_}"), full_every)
            print(f"  {m.seconds:.1f}s" + (f"; FAILED: {m.error}" if m.error else f"; {m.rows_out:,} rows out")
                  + (f"; retained heap {m.retained_heap_mb:,.0f} MB" if m.retained_heap_mb is not None else ""))
            if full_every:
                retained[name] = m
                continue
            every.setdefault(name, []).append(m)
            if name not in best or best[name].error or (not m.error and m.seconds < best[name].seconds):
                best[name] = m
    for name, m in retained.items():
        if m.error:
            best[name].error = best[name].error or f"retained-heap round: {m.error}"
        else:
            best[name].retained_heap_mb = m.retained_heap_mb
    runs = [best[name] for name, _ in steps]
    if "flink" in args.peers:
        delay_s = math.ceil((side.allowed_lateness_us + side.future_tolerance_us) / 1e6)
        inputs = project / ".sqlflow" / "flink" / "inputs"
        print(f"exporting the staging tables for Flink to {inputs} ({args.flink_order} order; not measured)")
        export_for_flink(spark, inputs, args.flink_order)
        for mode in ("streaming", "batch"):
            done = run_flink(spark, args, mode, inputs, project / ".sqlflow" / "flink", delay_s, rows_in)
            runs.append(min(done, key=lambda m: (m.error is not None, m.seconds)))
    by = {m.name: m for m in runs}
    if by["batch plan"].error:
        print("the batch plan failed: nothing to compare the other runs with")
        report(runs, by, every, args.batches)
        return 1
    check_same(spark, runs, by["batch plan"])
    # the untimed round's stream tables too (its batch runs rewrote the tables checked above)
    checked = {m.table for m in runs}
    again = [m for m in retained.values() if m.table not in checked]
    check_same(spark, again, by["batch plan"])
    for m in again:
        if m.differs and not by[m.name].differs:
            by[m.name].differs = f"retained-heap round: {m.differs}"
    ok = report(runs, by, every, args.batches)
    if args.json:  # for bench/scale.py: one record per run, its fastest round
        args.json.write_text(json.dumps([{**dataclasses.asdict(m), "rows_per_s": m.rows_per_s}
                                         for m in runs], indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
