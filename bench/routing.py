"""Routing: read amplification and file counts of a routed group, in one run, against baselines.

    .venv/bin/python bench/routing.py [--rows 60000] [--targets 6] [--input-files 8]

Generates `--rows` user events (six departments, three event types, four products, six
hours) in `--input-files` Delta files, then on one local SparkSession:
  1. FUSED: the N department models as one routed group (`sqlflow run --mode batch`'s path:
     one read of the input, cached, every target from it, file budgets on);
  2. SEPARATE: the same N models without `routing`: N ordinary batch plans, each reading the
     input (what N dbt models do).
Read bytes come from Spark's own SQL metrics: for every SQL execution of a run, the scan nodes
of the input table and their `size of files read` / `number of files read` (read from the SQL
status store through py4j; no listener is registered). Prints, with ratios:
  - bytes read / input bytes, fused against separate (goal: 1.0 against N);
  - files per partition against ceil(bytes / target_file_size) (goal <= 1.1x), and the files
    the separate plain writes made against the naive bound partitions x parallelism.
A benchmark, not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import math
import random
import re
import sys
import tempfile
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

DEPTS = ("main", "live", "ad", "game", "manga", "music", "news", "shop")
SIZE_UNITS = {"B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3, "TiB": 1024**4}
TARGET_FILE_SIZE = 256 * 1024


def project(folder: Path, targets: int, routed: bool) -> Path:
    from helpers import make_project

    routing = {"+routing": {"group": "by_dept"}} if routed else {}
    return make_project(
        folder,
        models={f"routed/ue_{d}.sql": f"{{{{ route_to(source('ods', 'events'), '{d}') }}}}"
                for d in DEPTS[:targets]},
        yml={"sources.yml": """\
version: 2
sources:
  - name: ods
    schema: bench_route_ods
    tables:
      - name: events
        meta:
          sqlflow: {event_time: event_ts, ingest_time: ingest_ts, allowed_lateness: 10 minutes, future_tolerance: 5 minutes}
"""},
        macros={"route.sql": (ROOT / "macros" / "route.sql").read_text()},
        project_yml={"models": {"testproj": {"routed": {
            "+materialized": "streaming_table", "+partition_by": ["dt", "hour", "event_type", "product"],
            "+target_file_size": TARGET_FILE_SIZE, **routing}}}},
        profiles_yml=("sqlflow:\n  target: local\n  outputs:\n    local: {type: spark, method: session, "
                      f"host: NA, schema: bench_route_{'fused' if routed else 'separate'}}}\n"))


def generate(spark, rows: int, files: int, targets: int) -> None:
    rnd = random.Random(1)
    start = datetime(2026, 11, 1, 10)
    data = []
    for k in range(rows):
        ts = start + timedelta(microseconds=rnd.randrange(6 * 3_600_000_000))
        dept = DEPTS[min(int(rnd.expovariate(0.6)), targets - 1)]  # skewed department volumes
        data.append((f"e{k}", rnd.randrange(10**6), f"{dept}.page.mod.{k % 7}",
                     rnd.choice(["pv", "pv", "show", "click"]), rnd.choice(["app", "web", "pad", "tv"]),
                     ts, ts + timedelta(seconds=rnd.randint(0, 120)), "x" * rnd.randint(20, 400)))
    spark.sql("DROP DATABASE IF EXISTS bench_route_ods CASCADE")
    spark.sql("CREATE DATABASE bench_route_ods")
    schema = ("event_id string, user_id bigint, spmid string, event_type string, product string, "
              "event_ts timestamp, ingest_ts timestamp, payload string")
    step = math.ceil(rows / files)
    for i in range(0, rows, step):
        (spark.createDataFrame(data[i:i + step], schema).coalesce(1).write.format("delta")
         .mode("append").saveAsTable("bench_route_ods.events"))


def _size(text: str) -> int:
    """Bytes of a Spark size metric string: its first `<number> <unit>` (the total)."""
    m = re.search(r"([\d.]+)\s*(B|KiB|MiB|GiB|TiB)", text)
    return int(float(m.group(1)) * SIZE_UNITS[m.group(2)]) if m else 0


def scans(spark, table: str, after: int) -> tuple[int, int, int]:
    """(executions, bytes, files) read by scan nodes of `table` in SQL executions > `after`."""
    jvm = spark.sparkContext._jvm
    conv = jvm.scala.jdk.javaapi.CollectionConverters
    store = spark._jsparkSession.sharedState().statusStore()
    total_bytes = total_files = count = 0
    for ex in conv.asJava(store.executionsList()):
        eid = ex.executionId()
        if eid <= after:
            continue
        values = {int(k): str(v) for k, v in dict(conv.asJava(store.executionMetrics(eid))).items()}
        seen = False
        for node in conv.asJava(store.planGraph(eid).allNodes()):
            if not (node.name().startswith("Scan") and table in node.name() + node.desc()):
                continue
            for metric in conv.asJava(node.metrics()):
                value = values.get(metric.accumulatorId())
                if value is None:
                    continue
                if metric.name() == "size of files read":
                    total_bytes += _size(str(value))
                    seen = True
                elif metric.name() == "number of files read":
                    total_files += int(re.sub(r"[^\d]", "", str(value).split("\n")[-1]) or 0)
        count += seen
    return count, total_bytes, total_files


def last_execution(spark) -> int:
    conv = spark.sparkContext._jvm.scala.jdk.javaapi.CollectionConverters
    ids = [e.executionId() for e in conv.asJava(
        spark._jsparkSession.sharedState().statusStore().executionsList())]
    return max(ids, default=-1)


def shared_calls_timing(spark, ctx, plan, run_routed_batch) -> tuple[float, float]:
    """Seconds of the fused backfill as planned (the routing key is a shared call, computed once
    per row: `sqlflow.planning.shared_calls`) and with every target calling it, best of 2 rounds each,
    alternating (the first fused run above warmed the JVM)."""
    import dataclasses
    import time

    plain = dataclasses.replace(plan, shared=(), targets=tuple(
        dataclasses.replace(t, shared_sql=None) for t in plan.targets))
    best = {True: math.inf, False: math.inf}
    for _ in range(2):
        for shared, p in ((False, plain), (True, plan)):
            began = time.monotonic()
            list(run_routed_batch(ctx, p))
            best[shared] = min(best[shared], time.monotonic() - began)
    return best[True], best[False]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=60_000)
    parser.add_argument("--targets", type=int, default=6, choices=range(2, len(DEPTS) + 1))
    parser.add_argument("--input-files", type=int, default=8)
    args = parser.parse_args()

    from sqlflow.compiler import compile_project
    from sqlflow.engine.context import Context
    from sqlflow.engine.session import build_session
    from sqlflow.project.profiles import load_target
    from sqlflow.runtime.batch import run_batch
    from sqlflow.runtime.routed.routing import run_routed_batch

    tmp = Path(tempfile.mkdtemp(prefix="sqlflow_bench_routing_"))
    spark = build_session(load_target(ROOT, "sqlflow", "local"), ROOT, {
        "spark.sql.warehouse.dir": str(tmp / "warehouse"),
        "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={tmp / 'metastore'};create=true",
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={tmp}",
        "spark.sql.shuffle.partitions": "4"})
    parallelism = int(spark.conf.get("spark.sql.shuffle.partitions"))
    generate(spark, args.rows, args.input_files, args.targets)
    detail = spark.sql("DESCRIBE DETAIL bench_route_ods.events").collect()[0]
    input_bytes = detail["sizeInBytes"]
    print(f"input: {args.rows:,} rows, {detail['numFiles']} files, {input_bytes:,} bytes; "
          f"{args.targets} targets; target_file_size {TARGET_FILE_SIZE:,} B\n")

    # 1. fused
    root = project(tmp / "fused", args.targets, routed=True)
    plan = compile_project(root, mode="batch", target=Context.with_session(spark, root).target).plans["by_dept"]
    mark = last_execution(spark)
    fused_results = list(run_routed_batch(Context.with_session(spark, root), plan))
    fused = scans(spark, "bench_route_ods.events", mark)
    report = fused_results[-1].route

    # 1b. the routing key once per row (shared calls) against calling it in every target
    timing = shared_calls_timing(spark, Context.with_session(spark, root), plan, run_routed_batch)

    # 2. separate models
    root2 = project(tmp / "separate", args.targets, routed=False)
    ctx2 = Context.with_session(spark, root2)
    plans = compile_project(root2, mode="batch", target=ctx2.target).plans
    mark = last_execution(spark)
    naive_files, naive_parts = 0, 0
    for p in plans.values():
        r = run_batch(ctx2, p)
        naive_files += r.sink.files
        naive_parts += len(r.sink.partitions)
    separate = scans(spark, "bench_route_ods.events", mark)

    print(f"{'':28}{'scans':>8}{'files read':>12}{'bytes read':>14}{'bytes/input':>13}")
    for name, (n, b, f) in (("fused (1 read)", fused), (f"separate ({args.targets} models)", separate)):
        print(f"{name:28}{n:>8}{f:>12}{b:>14,}{b / input_bytes:>13.2f}")
    print(f"read amplification, separate / fused: {separate[1] / max(fused[1], 1):.2f}x "
          f"(goal: fused 1.0, separate {args.targets})\n")

    once, every = timing
    print(f"fused run time, best of 2: routing key computed once per row {once:.1f}s; called in "
          f"every target {every:.1f}s ({every / once:.2f}x)\n")

    parts = [p for t in report.targets for p in t.partitions]
    files = sum(p.files for p in parts)
    ideal = sum(max(1, math.ceil(p.bytes / TARGET_FILE_SIZE)) for p in parts)
    worst = max(p.files / max(1, math.ceil(p.bytes / TARGET_FILE_SIZE)) for p in parts)
    print(f"fused writes: {len(parts)} partitions, {files} files, "
          f"{sum(p.bytes for p in parts) // max(files, 1):,} bytes/file")
    print(f"  files / sum ceil(bytes/target): {files / ideal:.2f}x (goal <= 1.1x); "
          f"worst partition {worst:.2f}x")
    print(f"  naive bound partitions x parallelism = {len(parts)} x {parallelism} = "
          f"{len(parts) * parallelism}: budgeted files are {files / (len(parts) * parallelism):.2f}x of it")
    print(f"separate plain writes: {naive_parts} partitions, {naive_files} files "
          f"({naive_files / max(naive_parts, 1):.2f} files/partition; budgeted: "
          f"{files / max(len(parts), 1):.2f})")
    spark.stop()


if __name__ == "__main__":
    main()
