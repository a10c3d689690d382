"""The fixed cost of one small micro-batch of the `incremental` interval join (issue 23: a
micro-batch of 1,000 new rows should cost at most 0.5 s).

    .venv/bin/python bench/microbatch_cost.py [--rows 1000] [--batches 5] [--trigger "2 seconds"]
                                              [--profile]

Copies the project to a temp folder, builds the two staging tables (small, then emptied),
starts ONE query of `dwd_ad_clicks_attributed` with a processing-time trigger (as the stream
service runs it), and then `--batches` times: appends `--rows` new rows (half impressions,
half clicks of those impressions: every click finds its impression) and waits until the query
has processed them (usually one micro-batch; two when the trigger falls between the two
appends). Each micro-batch starts and ends on whole input versions, as a real-time one does.
It prints each micro-batch's seconds and phases (`BatchReport.phases`) and the mean over the
micro-batches after the first two (they pay the JVM's warm-up). `--profile` adds a cProfile of those
micro-batches by cumulative time (on the foreachBatch thread: the py4j calls show which
Spark/Delta/catalog calls the time goes to). A benchmark, not a test: nothing asserts a time.
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import io
import pstats
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from interval_join import MODEL, OUT, copy_project  # noqa: E402
from latency import CLICKS, IMPS, Producer, empty_inputs  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1000, help="new input rows per micro-batch")
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--trigger", default="2 seconds", help="the query's processing-time trigger")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="sqlflow_mbcost_"))
    try:
        return bench(copy_project(folder), args)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def bench(project: Path, args) -> int:
    from sqlflow.compiler import compile_project
    from sqlflow.demo.generate import generate
    from sqlflow.engine.context import Context
    from sqlflow.runtime.batch import run_batch
    from sqlflow.runtime.incremental import microbatch, stream

    ctx = Context.discover(project)
    spark = ctx.spark
    spark.sparkContext.setLogLevel("ERROR")
    generate(spark, rows=2000, seed=1, days=1)
    batch_plans = compile_project(project, mode="batch", target=ctx.target)
    stream_plans = compile_project(project, mode="stream", target=ctx.target)
    for model in ("stg_ad_clicks", "stg_ad_impressions"):
        run_batch(ctx, batch_plans.plans[model])
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {OUT}")
    empty_inputs(spark)
    table = f"{OUT}.mbcost"
    plan = stream_plans.plans[MODEL]
    plan = dataclasses.replace(
        plan, sink=dataclasses.replace(plan.sink, table=table,
                                       checkpoint=str(project / ".sqlflow" / "mbcost")),
        quarantine=f"{table}__quarantine")
    rows = Producer(spark, 0, 0, 1.0, 2.0, 0, 1)
    profile = cProfile.Profile()
    original = microbatch.MicroBatch._batch

    def profiled(self, df, batch_id):
        if args.profile and batch_id >= 2:
            profile.enable()
        try:
            return original(self, df, batch_id)
        finally:
            profile.disable()

    microbatch.MicroBatch._batch = profiled  # type: ignore[method-assign]
    query, fn = stream.start(ctx, plan, trigger=args.trigger)  # ONE query, as a service runs it
    costs, done = [], 0
    try:
        for i in range(args.batches):
            now = time.time()
            rows._rows(i, args.rows // 2, now, False).write.format("delta").mode("append").saveAsTable(IMPS)
            rows._rows(i, args.rows - args.rows // 2, now + 1, True).write.format("delta") \
                .mode("append").saveAsTable(CLICKS)
            while query.isActive and sum(n for r in fn.reports for _, n in r.rows_in) < (i + 1) * args.rows:
                time.sleep(0.2)
            for r in fn.reports[done:]:
                costs.append(r.seconds)
                print(f"micro-batch {r.batch_id}: {sum(n for _, n in r.rows_in):,} rows in, "
                      f"{r.rows_out:,} out, {r.seconds:.2f}s ("
                      + ", ".join(f"{k} {v:.2f}" for k, v in r.phases) + ")", flush=True)
            done = len(fn.reports)
    finally:
        query.stop()
    if fn.error is not None:
        raise fn.error
    rest = costs[2:] or costs
    print(f"mean seconds per {args.rows:,}-row micro-batch (after the first two): "
          f"{sum(rest) / len(rest):.2f} (min {min(rest):.2f})")
    if args.profile:
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats("cumulative").print_stats(40)
        print(out.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
