"""End-to-end latency and sustainable rate of `dwd_ad_clicks_attributed`: sqlflow's `incremental`
stream plan against the hand-written Spark stateful join, under the same trigger and rate.

    .venv/bin/python bench/latency.py [--rate 1000] [--seconds 30] [--warmup 10] [--trigger "1 second"]
                                      [--search 1000,5000,20000,40000] [--search-seconds 30]
                                      [--source delta|kafka] [--only RUNS] [--seed 42] [--no-checksums]
                                      [--show N]

A producer thread appends to the model's two inputs (`dw.stg_ad_impressions`,
`dw.stg_ad_clicks`, emptied before each run) every `--tick` seconds, `--rate` rows per second
over both sides, for `--seconds`, while the query runs with a processing-time trigger. Half
the rows are impressions; each click belongs to an impression appended `--click-delay` ticks
earlier (same request and ad), so every click finds its impression. Disorder: event times
lag their ingest time by a random 0-`--disorder` seconds, so rows reach the tables out of
event-time order (within the inputs' allowed lateness: no row is late).

Latency of an output row = the moment its sink commit became visible (the mtime of the
sink's `_delta_log/<version>.json`) - the moment the later of its two input rows was
committed (the producer's clock after its append returned). Every output row is measured but
those of rows appended in a run's first `--warmup` seconds (10: the queries' first
micro-batches and the JVM's warm-up, which a service pays once, not all day); every row is
checked. The Delta producer appends with delta-rs from Python (`deltalake`, a dependency of
sqlflow's; `--producer spark` appends through Spark in the queries' own JVM instead, which
cannot keep up with 1,000 rows/s on two cores) and writes each commit's checksum file as
Spark's writer does (`--no-checksums`: none, as an external delta-rs writer; then each
query's Delta source rebuilds each input's snapshot with a Spark job every trigger).
Printed per run: p50 / p95 / p99 latency, the sustained rate (input rows / producer seconds,
once the run kept up), the micro-batch durations (p50, p95) and their split into fixed cost
and cost per row (least squares of seconds on input rows over the run's micro-batches).

Then it searches each run's highest sustainable rate: `--search` rates in order, each for
`--search-seconds`; a rate is sustained when lag does not grow (the least-squares slope of
latency over append time, past the warm-up, at most 0.1 s per s: a query that keeps up with
90% of the rate or more), and only when the producer kept its schedule: a rate its appends could not deliver measures
the producer, not the query, and is not sustained. The highest sustained rate is reported (0:
none of them).

Both runs write Delta sinks; the rows of each main run are checked against the batch join of
the same inputs (EXCEPT ALL both ways over the join's columns), and sqlflow's mean time per
micro-batch phase is printed (after its first micro-batch, which pays the query's warm-up). A benchmark, not a test: nothing here
asserts a time. The last line is machine-readable:

    latency: p99=<s> p50=<s> rate=<rows/s> max_rate=<rows/s> hand_max_rate=<rows/s>

Sources: `--source delta` (the default) appends the rows to the model's two input tables, as
above. `--source kafka` sends the same rows as JSON records to two Kafka topics (a broker this
script starts; the Kafka timestamp is the ingest time), and sqlflow runs as
`sqlflow --target kafka run --mode stream --trigger T` does: the topics archived, the staging
models and the join streamed, three hops; the hand-written join reads the topics itself
(`bench/latency_kafka.py`). Latency then starts when the producer's send is acknowledged.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlparse

sys.path.insert(0, str(Path(__file__).resolve().parent))
import latency_kafka  # noqa: E402
from interval_join import COLUMNS, INPUTS, MODEL, OUT, copy_project, joined  # noqa: E402

CLICKS, IMPS = INPUTS
MAX_LAG_SLOPE = 0.1  # seconds of latency gained per second of running: more is falling behind


@dataclass
class Run:
    name: str
    rate: int
    seconds: float
    latencies: list[float] = field(default_factory=list)
    by_append: list[tuple[float, float]] = field(default_factory=list)  # (append time, latency)
    batches: list[tuple[int, float]] = field(default_factory=list)  # (input rows, seconds)
    rows_in: int = 0
    rows_out: int = 0
    produced_s: float = 0.0
    table: str = ""
    error: str | None = None
    phases: dict[str, float] = field(default_factory=dict)  # mean seconds per micro-batch phase
    differs: str | None = None
    kept_pace: bool = True  # the producer appended on its schedule: the rate was delivered
    compiled: int = 0  # classes Spark's code generation compiled while it ran (`compiled`)

    def pct(self, q: float) -> float:
        return _pct(self.latencies, q)

    def sustained(self, trigger_s: float) -> bool:
        """The rate was delivered (the producer kept its schedule) and lag does not grow: the
        least-squares slope of latency over append time is at most `MAX_LAG_SLOPE` (a query
        that processes a fraction f of the rate falls behind by 1 - f seconds every second;
        within one micro-batch the latencies saw-tooth, so the trigger's interval is the
        least the measured span must cover several times)."""
        if self.error or len(self.by_append) < 2 or not self.kept_pace:
            return False
        xs = [a for a, _ in self.by_append]
        if max(xs) - min(xs) < 3 * trigger_s:
            return False
        mx = sum(xs) / len(xs)
        my = sum(lat for _, lat in self.by_append) / len(xs)
        var = sum((x - mx) ** 2 for x in xs)
        slope = sum((a - mx) * (lat - my) for a, lat in self.by_append) / var if var else 0.0
        return slope <= MAX_LAG_SLOPE

    def split(self) -> tuple[float, float]:
        """(fixed seconds per micro-batch, seconds per 1,000 input rows): least squares over
        the micro-batches."""
        pts = [(n, s) for n, s in self.batches if n > 0]
        if len(pts) < 2:
            return (pts[0][1] if pts else 0.0), 0.0
        mx = sum(n for n, _ in pts) / len(pts)
        my = sum(s for _, s in pts) / len(pts)
        var = sum((n - mx) ** 2 for n, _ in pts)
        slope = sum((n - mx) * (s - my) for n, s in pts) / var if var else 0.0
        return my - slope * mx, slope * 1000


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))]


class Producer(threading.Thread):
    """Appends impressions and clicks to the inputs every `tick` seconds; records when each
    tick's rows were committed (`imp_done[tick]`, `click_done[tick]`, epoch seconds).
    `append(tick, n, now, click, src)` writes one side's `n` rows of a tick (clicks of the
    impressions of tick `src`): `DeltaInputs.append`, or `latency_kafka.Topics.append`."""

    def __init__(self, append, rate: int, seconds: float, tick: float, click_delay: int):
        super().__init__(daemon=True)
        self.append, self.rate, self.seconds, self.tick = append, rate, seconds, tick
        self.click_delay = click_delay
        self.imp_done: dict[int, float] = {}
        self.click_done: dict[int, float] = {}
        self.click_ms: dict[int, int] = {}  # a click tick's ingest time (ms) -> the tick
        self.started = self.ended = 0.0
        self.rows = self.ticks = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # reported by the run
            self.error = exc

    def _run(self) -> None:
        per_side = max(1, int(self.rate * self.tick / 2))
        self.started = time.time()
        tick = 0
        # at least two ticks of clicks, however slow the appends: clicks start `click_delay`
        # ticks in, and a run without them joins nothing and measures nothing
        while time.time() - self.started < self.seconds or tick < self.click_delay + 2:
            due = self.started + tick * self.tick
            if (wait := due - time.time()) > 0:
                time.sleep(wait)
            now = time.time()
            self.append(tick, per_side, now, False, tick)
            self.imp_done[tick] = time.time()
            self.rows += per_side
            if tick >= self.click_delay:
                self.click_ms[int(now * 1000)] = tick
                self.append(tick, per_side, now, True, tick - self.click_delay)
                self.click_done[tick] = time.time()
                self.rows += per_side
            tick += 1
        self.ended, self.ticks = time.time(), tick


class DeltaInputs:
    """The producer's rows as Delta appends to the model's two input tables."""

    def __init__(self, spark, seed: int, disorder: float) -> None:
        self.spark, self.seed, self.disorder = spark, seed, disorder

    def append(self, tick: int, n: int, now: float, click: bool, src: int) -> None:
        from pyspark.sql import functions as F

        ts = "click_ts" if click else "imp_ts"
        jitter = F.rand(self.seed + tick * 2 + int(click)) * self.disorder
        rows = self.spark.range(n).select(
            F.concat(F.lit(f"{src}-"), F.col("id").cast("string")).alias("req_id"),
            (F.col("id") % 97).alias("ad_id"),
            (F.col("id") % 1009 + (7 if click else 0)).alias("user_id"),
            F.timestamp_micros(F.lit(int(now * 1e6)) - (jitter * 1e6).cast("bigint")).alias(ts),
            F.timestamp_millis(F.lit(int(now * 1000))).alias("ingest_ts"),
        ).select("*", F.date_format("ingest_ts", "yyyy-MM-dd").alias("dt"),
                 F.date_format("ingest_ts", "HH").alias("hour"))
        rows.write.format("delta").mode("append").saveAsTable(CLICKS if click else IMPS)


class ArrowInputs:
    """The same rows as `DeltaInputs`, appended by delta-rs (`deltalake`)
    from Python: no Spark job, so the producer does not take the driver and the cores' time
    from the queries it feeds (a Spark append per tick fell seconds behind at 1,000 rows/s,
    2026-11-28). Its commits carry file statistics and, as Spark's writer writes them, each
    its checksum file (`version_checksum`, as sqlflow's own delta-rs appends): without one,
    each query's Delta source rebuilt each input's snapshot with a Spark job every trigger
    (`--no-checksums`, an external delta-rs writer)."""

    def __init__(self, spark, seed: int, disorder: float, checksums: bool = True) -> None:
        from deltalake import DeltaTable

        from sqlflow.runtime.delta import deltalog

        self.seed, self.disorder, self.checksums = seed, disorder, checksums
        self.folders = {t: unquote(urlparse(deltalog.describe(spark, t).location).path) for t in INPUTS}
        self.tables = {t: DeltaTable(f) for t, f in self.folders.items()}

    def append(self, tick: int, n: int, now: float, click: bool, src: int) -> None:
        import random
        from datetime import datetime, timezone

        import pyarrow as pa
        from deltalake import write_deltalake

        rnd = random.Random(self.seed * 1_000_003 + tick * 2 + int(click))
        now_us, ingest_us = int(now * 1e6), int(now * 1000) * 1000
        when = datetime.fromtimestamp(ingest_us / 1e6, timezone.utc)
        stamp = pa.timestamp("us", tz="UTC")
        rows = pa.table({
            "req_id": pa.array([f"{src}-{i}" for i in range(n)]),
            "ad_id": pa.array([i % 97 for i in range(n)], pa.int64()),
            "user_id": pa.array([i % 1009 + (7 if click else 0) for i in range(n)], pa.int64()),
            "click_ts" if click else "imp_ts": pa.array(
                [now_us - int(rnd.random() * self.disorder * 1e6) for _ in range(n)], stamp),
            "ingest_ts": pa.array([ingest_us] * n, stamp),
            "dt": pa.array([when.strftime("%Y-%m-%d")] * n),
            "hour": pa.array([when.strftime("%H")] * n),
        })
        name = CLICKS if click else IMPS
        write_deltalake(self.tables[name], rows, mode="append", partition_by=["dt", "hour"])
        if self.checksums:
            from sqlflow.runtime.delta import version_checksum

            version_checksum.write(self.folders[name], self.tables[name].version())


def producer_of(spark, args, seed: int | None = None, disorder: float | None = None):
    """The Delta producer `--producer` names (`auto`: delta-rs when `deltalake` imports)."""
    seed = args.seed if seed is None else seed
    disorder = args.disorder if disorder is None else disorder
    kind = getattr(args, "producer", "auto")
    if kind == "auto":
        try:
            import deltalake  # noqa: F401
            kind = "arrow"
        except ImportError:
            kind = "spark"
    if kind == "arrow":
        return ArrowInputs(spark, seed, disorder, checksums=not getattr(args, "no_checksums", False))
    return DeltaInputs(spark, seed, disorder)


def empty_inputs(spark) -> None:
    """No rows in the inputs: a fresh query starts from their (empty) latest snapshot."""
    for t in INPUTS:
        spark.sql(f"DELETE FROM {t}")


def _log_actions(spark, table: str):
    """(when the commit became visible: its log file's mtime, action) for every action of the
    local Delta table's commit files."""
    from sqlflow.runtime.delta import deltalog

    location = deltalog.describe(spark, table).location
    log = os.path.join(unquote(urlparse(location).path), "_delta_log")
    for name in os.listdir(log):
        if not name.endswith(".json") or not name[:-5].isdigit():
            continue
        path = os.path.join(log, name)
        visible = os.stat(path).st_mtime
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    yield visible, json.loads(line)


def commit_times(spark, table: str) -> dict[str, float]:
    """File name -> when the sink commit that added it became visible (its log file's mtime)."""
    return {unquote(a["add"]["path"]).rsplit("/", 1)[-1]: visible
            for visible, a in _log_actions(spark, table) if a.get("add")}


def sink_rows(spark, table: str) -> int:
    """The rows the table holds, from the record counts of its log's added and removed files:
    no Spark job, so waiting for a sink does not take CPU from the queries it waits for. A
    file whose action carries no count is counted by Spark after all."""
    total = 0
    for _, action in _log_actions(spark, table):
        for kind, sign in (("add", 1), ("remove", -1)):
            if action.get(kind):
                stats = json.loads(action[kind].get("stats") or "{}")
                if "numRecords" not in stats:
                    return spark.table(table).count()
                total += sign * stats["numRecords"]
    return total


def measure(spark, run: Run, producer: Producer, warmup: float = 0.0) -> None:
    """Each output row's latency from the sink's commits and the producer's clock; rows whose
    later input row was appended in the first `warmup` seconds are left out."""
    from pyspark.sql import functions as F

    visible = commit_times(spark, run.table)
    rows = (spark.table(run.table)
            .select("req_id", F.unix_millis("ingest_ts").alias("click_ms"),
                    F.col("_metadata.file_path").alias("file")).collect())
    click_tick = producer.click_ms
    run.rows_out = len(rows)
    for r in rows:
        imp_tick = int(r["req_id"].split("-", 1)[0])
        ct = _click_tick(click_tick, r["click_ms"])
        if ct is None or imp_tick not in producer.imp_done:
            continue
        appended = max(producer.imp_done[imp_tick], producer.click_done[ct])
        seen = visible.get(unquote(r["file"]).rsplit("/", 1)[-1])
        if seen is None:
            continue
        if appended - producer.started < warmup:
            continue  # the queries' warm-up: checked, not measured
        run.latencies.append(seen - appended)
        run.by_append.append((appended, seen - appended))


def _click_tick(ticks: dict[int, int], ms: int) -> int | None:
    """The producer tick whose clicks carry ingest time `ms` (the tick's start, to the ms)."""
    for d in (0, -1, 1):
        if ms + d in ticks:
            return ticks[ms + d]
    return None


def run_sqlflow(ctx, plan, table: str, checkpoint: Path, args, rate: int, seconds: float) -> Run:
    from sqlflow.runtime.incremental import stream

    run = Run("sqlflow incremental", rate, seconds, table=table)
    plan = dataclasses.replace(
        plan, sink=dataclasses.replace(plan.sink, table=table, checkpoint=str(checkpoint)),
        quarantine=f"{table}__quarantine")
    empty_inputs(ctx.spark)
    query, fn = stream.start(ctx, plan, trigger=args.trigger)
    spark = ctx.spark
    _drive(spark, run, producer_of(spark, args).append, args, rate, seconds,
           drain=query.processAllAvailable, stop=query.stop, truth=lambda: delta_truth(spark))
    reports = [b for b in fn.reports if b.kind == "batch"]
    for b in reports[:args.show]:
        print(f"  batch {b.batch_id}: {sum(n for _, n in b.rows_in):,} rows in {b.seconds:.2f}s; "
              + ", ".join(f"{k} {v:.2f}" for k, v in b.phases), flush=True)
    run.batches = [(sum(n for _, n in b.rows_in), b.seconds) for b in reports]
    for b in reports[1:]:  # the first pays the query's warm-up
        for name, s in b.phases:
            run.phases[name] = run.phases.get(name, 0.0) + s / max(1, len(reports) - 1)
    if fn.error is not None and run.error is None:
        run.error = str(fn.error).splitlines()[0]
    return run


def delta_truth(spark):
    """The batch join of the two input tables as they are."""
    return joined(spark.table(CLICKS), spark.table(IMPS))


def hand_query(spark, table: str, checkpoint: Path, trigger: str, lateness: str):
    """The hand-written stateful join over the emptied inputs, started with a processing-time
    trigger (`withWatermark` on both sides, the interval condition, a partitioned Delta sink);
    shared with bench/microbatch_cost.py."""
    empty_inputs(spark)

    def read(relation, ts):
        return spark.readStream.format("delta").table(relation).withWatermark(ts, lateness)

    return (joined(read(CLICKS, "click_ts"), read(IMPS, "imp_ts")).writeStream
            .format("delta").partitionBy("dt", "hour").outputMode("append")
            .option("checkpointLocation", str(checkpoint)).trigger(processingTime=trigger)
            .toTable(table))


def run_hand(spark, table: str, checkpoint: Path, args, rate: int, seconds: float, lateness: str) -> Run:
    run = Run("hand stateful", rate, seconds, table=table)
    query = hand_query(spark, table, checkpoint, args.trigger, lateness)
    _drive(spark, run, producer_of(spark, args).append, args, rate, seconds,
           drain=query.processAllAvailable, stop=query.stop, truth=lambda: delta_truth(spark))
    run.batches = progress_batches(query)
    return run


def compiled(spark) -> int:
    """Classes Spark's code generation has compiled in this JVM so far (its `CodegenMetrics`,
    every thread's: the producer's too when it appends with Spark): a plan whose generated code
    differs from every earlier one's compiles again; shared with bench/microbatch_cost.py."""
    return int(spark._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME().getCount())


def progress_batches(query) -> list[tuple[int, float]]:
    """(input rows, seconds) of a Spark query's micro-batches that read rows."""
    return [(p["numInputRows"], p["durationMs"].get("triggerExecution", 0) / 1000)
            for p in query.recentProgress if p["numInputRows"]]


def run_sqlflow_kafka(spark, topics, project: Path, args, rate: int, seconds: float) -> Run:
    """sqlflow's stream service over the run's topics: archives, staging, the join."""
    service = latency_kafka.Service(spark, project, args.trigger)
    run = Run("sqlflow incremental", rate, seconds, table=service.table)
    try:
        service.wait_started()
    except RuntimeError as exc:
        run.error = str(exc)
        service.close()
        return run
    time.sleep(3 * _seconds(args.trigger))  # past the first micro-batches of every query

    def drain() -> None:
        service.drain(topics.truth(spark).count(), lambda: sink_rows(spark, service.table),
                      timeout_s=max(300.0, 10 * seconds))

    _drive(spark, run, topics.append, args, rate, seconds, drain=drain, stop=service.close,
           truth=lambda: topics.truth(spark))
    run.batches = service.batches()
    return run


def run_hand_kafka(spark, topics, table: str, checkpoint: Path, args, rate: int, seconds: float,
                   lateness: str) -> Run:
    run = Run("hand stateful", rate, seconds, table=table)
    query = latency_kafka.hand_query(spark, topics, table, checkpoint, args.trigger, lateness)
    _drive(spark, run, topics.append, args, rate, seconds, drain=query.processAllAvailable,
           stop=query.stop, truth=lambda: topics.truth(spark))
    run.batches = progress_batches(query)
    return run


def _drive(spark, run: Run, append, args, rate: int, seconds: float, *, drain, stop, truth) -> None:
    """Produce for `seconds` (`append`: one side's rows of a tick) while the run's queries go,
    let them process what is left (`drain`), stop them (`stop` returns a failure or None), and
    measure the latency of every output row; `truth()` is the batch join of the inputs."""
    producer = Producer(append, rate, seconds, args.tick, args.click_delay)
    compiled_before = compiled(spark)
    producer.start()
    producer.join()
    try:
        if producer.error is not None:
            raise producer.error
        drain()
    except Exception as exc:  # a failed run is a result too
        run.error = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    finally:
        failed = stop()
        if failed and run.error is None:
            run.error = failed
    run.compiled = compiled(spark) - compiled_before
    run.rows_in = producer.rows
    run.produced_s = (producer.ended - producer.started) or seconds
    behind = (producer.ended - producer.started) - producer.ticks * args.tick
    if behind > args.tick:
        run.kept_pace = False
        print(f"  the producer fell {behind:.1f}s behind its schedule ({producer.ticks} ticks): its "
              "appends, not the query, limit this rate", flush=True)
    if run.error is None:
        measure(spark, run, producer, args.warmup)
        if not run.rows_out:
            run.error = (f"no output row ({producer.rows:,} input rows in {producer.ticks} ticks): "
                         "nothing to measure")
        want = truth().select(*COLUMNS)
        got = spark.table(run.table).select(*COLUMNS)
        missing, extra = want.exceptAll(got).count(), got.exceptAll(want).count()
        if missing or extra:
            run.differs = (f"{missing:,} rows missing, {extra:,} extra against the batch join "
                           "of the same inputs")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=int, default=1000, help="input rows per second, both sides")
    parser.add_argument("--seconds", type=float, default=30.0, help="how long the producer runs")
    parser.add_argument("--warmup", type=float, default=10.0,
                        help="seconds at the start of every run whose rows are checked but not measured "
                             "(the queries' first micro-batches and the JVM's warm-up)")
    parser.add_argument("--trigger", default="1 second", help="processing-time trigger of both queries")
    parser.add_argument("--tick", type=float, default=0.5, help="seconds between producer appends")
    parser.add_argument("--disorder", type=float, default=2.0, help="event time lags ingest by up to this (s)")
    parser.add_argument("--click-delay", type=int, default=2, help="ticks from an impression to its click")
    parser.add_argument("--search", default="1000,5000,20000,40000",
                        help="rates tried for the highest sustainable rate, ascending ('' skips)")
    parser.add_argument("--search-seconds", type=float, default=30.0)
    parser.add_argument("--source", choices=("delta", "kafka"), default="delta")
    parser.add_argument("--producer", choices=("auto", "arrow", "spark"), default="auto",
                        help="how the delta source's rows are appended: delta-rs from Python (arrow) "
                             "or Spark jobs in the queries' JVM; auto: arrow when deltalake imports")
    parser.add_argument("--no-checksums", action="store_true",
                        help="the delta-rs producer writes no checksum files (an external writer)")
    parser.add_argument("--only", default="", help="`sqlflow` or `hand`: measure one of them")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--show", type=int, default=0, metavar="N",
                        help="print sqlflow's first N micro-batches (rows, seconds, phases)")
    parser.add_argument("--keep", action="store_true", help="keep the temp project folder")
    args = parser.parse_args()
    if min(args.seconds, args.search_seconds if args.search.strip() else args.seconds) <= args.warmup:
        parser.error(f"--seconds and --search-seconds must be longer than --warmup ({args.warmup:g})")
    folder = Path(tempfile.mkdtemp(prefix="sqlflow_latency_"))
    try:
        return bench(folder, args)
    finally:
        if args.keep:
            print(f"kept {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)


def bench(folder: Path, args) -> int:
    topics = latency_kafka.Topics(folder, args.seed, args.disorder) if args.source == "kafka" else None
    try:
        return measured(folder, args, topics)
    finally:
        if topics is not None:
            topics.close()


def measured(folder: Path, args, topics) -> int:
    from sqlflow.compiler import compile_project
    from sqlflow.demo.generate import generate
    from sqlflow.engine.context import Context
    from sqlflow.runtime.batch import run_batch

    if topics is None:
        (folder / "project").mkdir()
        project = copy_project(folder / "project")
    else:
        project = latency_kafka.project_for(folder / "project", *topics.use(0), copy=copy_project)
    if topics is not None:
        os.environ["SQLFLOW_KAFKA_BOOTSTRAP"] = topics.address
    ctx = Context.discover(project, target_name="kafka" if topics is not None else None)
    spark = ctx.spark
    spark.sparkContext.setLogLevel("ERROR")
    stream_plans = compile_project(project, mode="stream", target=ctx.target)
    stream_plans.raise_if_errors()
    if topics is None:
        generate(spark, rows=2000, seed=args.seed, days=1)  # the inputs' tables, emptied per run
        batch_plans = compile_project(project, mode="batch", target=ctx.target)
        batch_plans.raise_if_errors()
        for model in ("stg_ad_clicks", "stg_ad_impressions"):
            run_batch(ctx, batch_plans.plans[model])
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {OUT}")
    plan = stream_plans.plans[MODEL]
    side = plan.sources[0]
    lateness = f"{side.allowed_lateness_us + side.future_tolerance_us} microseconds"
    trigger_s = _seconds(args.trigger)
    checkpoints = project / ".sqlflow" / "latency"
    who = [w for w in ("sqlflow", "hand") if not args.only or args.only == w]
    n = 0

    def one(kind: str, rate: int, seconds: float) -> Run:
        nonlocal n
        n += 1
        table, cp = f"{OUT}.latency_{kind}_{n}", checkpoints / f"{kind}_{n}"
        print(f"{kind}: {rate:,} rows/s for {seconds:g}s, trigger {args.trigger}, {args.source} "
              "source", flush=True)
        if topics is not None:  # topics of the run's own, written before the queries start
            imps, clicks = topics.use(n)
            topics.warm_up()
        if kind == "sqlflow" and topics is not None:
            copy = latency_kafka.project_for(folder / f"run_{n}", imps, clicks, copy=copy_project)
            r = run_sqlflow_kafka(spark, topics, copy, args, rate, seconds)
        elif kind == "sqlflow":
            r = run_sqlflow(ctx, plan, table, cp, args, rate, seconds)
        elif topics is not None:
            r = run_hand_kafka(spark, topics, table, cp, args, rate, seconds, lateness)
        else:
            r = run_hand(spark, table, cp, args, rate, seconds, lateness)
        fixed, per_k = r.split()
        summary = (f"p50 {r.pct(0.5):.2f}s p99 {r.pct(0.99):.2f}s, {len(r.batches)} batches, "
                   f"fixed {fixed:.2f}s + {per_k:.3f}s/1k rows, sustained: {r.sustained(trigger_s)}, "
                   f"{r.compiled / max(1, len(r.batches)):.1f} classes compiled a batch")
        print(f"  {r.error or summary}", flush=True)
        return r

    main_runs = {w: one(w, args.rate, args.seconds) for w in who}
    for r in main_runs.values():
        print(f"{r.name}: " + (f"DIFFERS: {r.differs}" if r.differs else
                               "same rows as the batch join of its inputs" if not r.error else r.error))
        if r.phases:
            print("  mean seconds per micro-batch phase (after the first): "
                  + ", ".join(f"{k} {v:.2f}" for k, v in r.phases.items()))
    best: dict[str, int] = {}
    rates = [int(x) for x in args.search.split(",") if x.strip()]
    for w in who:
        best[w] = 0
        for rate in rates:
            r = one(w, rate, args.search_seconds)
            if not r.sustained(trigger_s):
                break
            best[w] = rate
    print()
    print(f"{'run':<22}{'p50 s':>8}{'p95 s':>8}{'p99 s':>8}{'rate/s':>9}{'batches':>9}"
          f"{'batch p50':>10}{'batch p95':>10}{'fixed s':>9}{'s/1k rows':>10}{'max rate':>10}")
    for w, r in main_runs.items():
        fixed, per_k = r.split()
        durations = [s for _, s in r.batches]
        rate = r.rows_in / r.produced_s if r.produced_s and r.sustained(trigger_s) else 0.0
        print(f"{r.name:<22}{r.pct(0.5):>8.2f}{r.pct(0.95):>8.2f}{r.pct(0.99):>8.2f}{rate:>9,.0f}"
              f"{len(r.batches):>9}{_pct(durations, 0.5):>10.2f}{_pct(durations, 0.95):>10.2f}"
              f"{fixed:>9.2f}{per_k:>10.3f}{best.get(w, 0):>10,}" + (f"  FAILED: {r.error}" if r.error else ""))
    s, h = main_runs.get("sqlflow"), main_runs.get("hand")
    if s and h and not (s.error or h.error):
        print(f"sqlflow / hand-written: p99 latency {s.pct(0.99) / h.pct(0.99):.2f}x, "
              f"micro-batch p50 {_pct([x for _, x in s.batches], .5) / _pct([x for _, x in h.batches], .5):.2f}x"
              + (f", max rate {best['sqlflow'] / best['hand']:.2f}x" if best.get("hand") else ""))
    r = s or h
    assert r is not None
    rate = r.rows_in / r.produced_s if r.produced_s and r.sustained(trigger_s) else 0.0
    print(f"latency: p99={r.pct(0.99):.3f} p50={r.pct(0.5):.3f} rate={rate:.0f} "
          f"max_rate={best.get('sqlflow', 0)} hand_max_rate={best.get('hand', 0)}")
    return 1 if any(x.error or x.differs for x in main_runs.values()) else 0


def _seconds(trigger: str) -> float:
    value, _, unit = trigger.strip().partition(" ")
    return float(value) * (60 if unit.startswith("min") else 0.001 if unit.startswith("milli") else 1)


if __name__ == "__main__":
    sys.exit(main())
