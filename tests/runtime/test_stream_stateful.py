"""The `stateful` stream runtime on real Spark and Delta, differentially: the same input rows,
committed to fresh Delta sources in a random order and random chunks (one commit per chunk) and
streamed by Spark's own stream-stream join in several micro-batches, must leave, after one
bounded run (which ends with the heartbeat flush), exactly the batch plan's output in the sink
and the batch run's quarantine rows (all but `origin`) in the quarantine table. A row Spark
drops behind its watermark must be counted like Spark counts it and its partition marked dirty
in the commit log."""

from __future__ import annotations

import dataclasses
import random
import re
from datetime import datetime, timedelta, timezone

import pytest

from helpers import ad_sources_yml, make_project
from sqlflow.compiler import compile_project
from sqlflow.context import Context
from sqlflow.runtime import commitlog
from sqlflow.runtime.batch import run_batch
from sqlflow.runtime.stream import run_stream

pytestmark = pytest.mark.spark

UTC = timezone.utc
DAY1 = datetime(2026, 11, 1, tzinfo=UTC)


def head(skew):
    return ("{{ config(materialized='streaming_table', partition_by=['dt'], "
            f"stream_strategy='stateful', skew_margin='{skew}') }}}}\n")


ATTRIBUTED = """
SELECT c.req_id, c.click_ts, i.ad_id, i.imp_ts, to_date(c.click_ts) AS dt
FROM {{ source('ods', 'clicks') }} AS c
JOIN {{ source('ods', 'imps') }} AS i
  ON i.req_id = c.req_id AND c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 20 MINUTES"""
SAMPLES = """
SELECT i.req_id, i.ad_id, i.imp_ts, c.click_ts, c.click_ts IS NOT NULL AS clicked, to_date(i.imp_ts) AS dt
FROM {{ source('ods', 'imps') }} AS i
LEFT JOIN {{ source('ods', 'clicks') }} AS c
  ON i.req_id = c.req_id AND c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 20 MINUTES
WHERE i.ad_id > 0"""
MODELS = {
    "attributed.sql": head("3 days") + ATTRIBUTED,
    "samples.sql": head("3 days") + SAMPLES,
    "tight.sql": head("0 seconds") + ATTRIBUTED,
}
IMP_SCHEMA = "req_id string, ad_id bigint, imp_ts timestamp, ingest_ts timestamp, dt string"
CLICK_SCHEMA = "req_id string, click_ts timestamp, ingest_ts timestamp, dt string"


def at(day, hh, mm, ss=0, us=0):
    return DAY1 + timedelta(days=day - 1, hours=hh, minutes=mm, seconds=ss, microseconds=us)


def imp(req, ad, ts, ingest=None):
    ingest = ingest or ts
    return (req, ad, ts, ingest, ingest.strftime("%Y-%m-%d"))


def click(req, ts, ingest=None):
    ingest = ingest or ts
    return (req, ts, ingest, ingest.strftime("%Y-%m-%d"))


def rows(seed):
    """Bounds exactly at lower and upper and one µs outside each, NULL keys, duplicates,
    late, future and timeless rows, a day boundary, and random rows over two days."""
    imps = [
        imp("lower", 1, at(1, 10, 0)), imp("upper", 1, at(1, 11, 0)),
        imp("below", 1, at(1, 12, 0)), imp("above", 1, at(1, 13, 0)),
        imp(None, 2, at(1, 14, 0)),
        imp("dup", 3, at(1, 15, 0)), imp("dup", 3, at(1, 15, 0)),
        imp("late", 4, at(1, 16, 0), at(1, 16, 10, us=1)),  # 10 min + 1 µs late: quarantined
        imp("future", 5, at(1, 18, 5, us=1), at(1, 18, 0)),  # 5 min + 1 µs ahead: quarantined
        imp("no-time", 5, None, at(1, 19, 0)),
        imp("zero-ad", 0, at(1, 20, 0)),
        imp("midnight", 6, at(1, 23, 55)),
    ]
    clicks = [
        click("lower", at(1, 10, 0)), click("upper", at(1, 11, 20)),
        click("below", at(1, 12, 0) - timedelta(microseconds=1)),
        click("above", at(1, 13, 20, us=1)),
        click(None, at(1, 14, 1)),
        click("dup", at(1, 15, 1)), click("dup", at(1, 15, 1)),
        click("late", at(1, 16, 1)),
        click("midnight", at(2, 0, 10)),
    ]
    rnd = random.Random(seed)
    for k in range(24):
        ts = DAY1 + timedelta(microseconds=rnd.randrange(2 * 86_400_000_000))
        req = f"r{k % 15}"
        imps.append(imp(req, rnd.randrange(-1, 3), ts, ts + timedelta(seconds=rnd.randint(-360, 720))))
        for _ in range(rnd.choice([0, 1, 2])):
            cts = ts + timedelta(microseconds=rnd.randrange(25 * 60_000_000))
            clicks.append(click(req, cts, cts + timedelta(seconds=rnd.randint(-360, 720))))
    return imps, clicks


def profiles(schema):
    return f"""\
sqlflow:
  target: local
  outputs:
    local: {{type: spark, method: session, host: NA, schema: {schema}}}
"""


@dataclasses.dataclass
class Setup:
    ods: str
    batch: Context
    stream: Context
    batch_plans: dict
    stream_plans: dict


@pytest.fixture
def setup(spark, tmp_path, request):
    name = "rt_stateful_" + re.sub(r"\W", "_", request.node.name.removeprefix("test_"))[-24:]
    ods, dw_b, dw_s = f"{name}_ods", f"{name}_b", f"{name}_s"
    for db in (ods, dw_b, dw_s):
        spark.sql(f"DROP DATABASE IF EXISTS {db} CASCADE")
    spark.sql(f"CREATE DATABASE {ods}")
    spark.createDataFrame([], IMP_SCHEMA).write.format("delta").saveAsTable(f"{ods}.imps")
    spark.createDataFrame([], CLICK_SCHEMA).write.format("delta").saveAsTable(f"{ods}.clicks")
    contexts, plans = [], []
    for schema, mode in ((dw_b, "batch"), (dw_s, "stream")):
        root = make_project(tmp_path / mode, models=MODELS, yml={"sources.yml": ad_sources_yml(ods)},
                            profiles_yml=profiles(schema))
        ctx = Context.with_session(spark, root)
        result = compile_project(root, mode=mode, target=ctx.target)
        result.raise_if_errors()
        contexts.append(ctx)
        plans.append(result.plans)
    yield Setup(ods, contexts[0], contexts[1], plans[0], plans[1])
    for db in (ods, dw_b, dw_s):
        spark.sql(f"DROP DATABASE IF EXISTS {db} CASCADE")


def append(spark, table, rows_, schema):
    spark.createDataFrame(rows_, schema).coalesce(1).write.format("delta").mode("append").saveAsTable(table)


def chunks(rnd, rows_, table, schema):
    rows_ = list(rows_)
    rnd.shuffle(rows_)
    out = []
    while rows_:
        n = rnd.randint(max(1, len(rows_) // 3), len(rows_))
        out.append((table, rows_[:n], schema))
        rows_ = rows_[n:]
    return out


def assert_same(spark, got_table, want_table, drop=()):
    got, want = spark.table(got_table).drop(*drop), spark.table(want_table).drop(*drop)
    missing, extra = want.exceptAll(got).collect(), got.exceptAll(want).collect()
    assert (missing, extra) == ([], []), f"{got_table}: missing {missing}, unexpected {extra}"
    assert want.count() > 0


def log_rows(spark, table, kind):
    return (commitlog.read(spark).where(f"`table` = '{table.lower()}' AND kind = '{kind}'")
            .collect())


# --- tests ----------------------------------------------------------------------------------------

def test_inner_and_left_outer_joins_equal_the_batch_plan_after_a_bounded_run(spark, setup):
    s, rnd = setup, random.Random(7)
    imps, clicks = rows(7)
    todo = chunks(rnd, imps, f"{s.ods}.imps", IMP_SCHEMA) + chunks(rnd, clicks, f"{s.ods}.clicks", CLICK_SCHEMA)
    rnd.shuffle(todo)
    for table, part, schema in todo:
        append(spark, table, part, schema)
    for model in ("attributed", "samples"):
        # one or two source commits per micro-batch: several batches, arrival order = commit order
        plan = s.stream_plans[model]
        plan = dataclasses.replace(plan, sources=tuple(
            dataclasses.replace(b, max_files_per_trigger=rnd.choice([1, 2])) for b in plan.sources))
        result = run_stream(s.stream, plan, on_batch=lambda r: print(r.line()))
        assert len(result.batches) >= 3
        assert all(b.dropped == 0 and b.spark_dropped in (0, None) for b in result.batches)
        want = s.batch_plans[model]
        run_batch(s.batch, want)
        assert_same(spark, plan.sink.table, want.sink.table)
        assert_same(spark, plan.quarantine, want.quarantine, drop=("origin",))
        # one commit-log `write` row per written partition and batch, rows adding up; no dirt
        written = log_rows(spark, plan.sink.table, "write")
        assert sum(r["rows"] for r in written) == spark.table(plan.sink.table).count()
        assert {r["partition"] for r in written} == {
            f"dt={r['dt']}" for r in spark.table(plan.sink.table).select("dt").distinct().collect()}
        assert log_rows(spark, plan.sink.table, "dirty") == []
    samples = spark.table(s.stream_plans["samples"].sink.table)
    padded = {r["req_id"] for r in samples.where("NOT clicked").collect()}
    assert "lower" not in padded and "upper" not in padded and "midnight" not in padded
    assert {"below", "above", None} <= padded  # one µs outside each bound, NULL key: padded


def test_a_row_spark_drops_behind_the_watermark_marks_its_partition_dirty(spark, setup):
    """Two bounded runs of a model without skew margin: the first ends with the flush, so the
    watermark is past 12:20; rows of 10:00 committed after it are dropped by Spark's join (our
    lateness rule keeps them: they are on time by their own ingest time). The runtime counts
    exactly the rows Spark counts and marks their output partition dirty."""
    from click.testing import CliRunner

    from sqlflow.cli import main

    s = setup
    plan = s.stream_plans["tight"]
    append(spark, f"{s.ods}.imps", [imp("a", 1, at(1, 12, 0)), imp("b", 1, at(2, 3, 0))], IMP_SCHEMA)
    append(spark, f"{s.ods}.clicks", [click("a", at(1, 12, 5))], CLICK_SCHEMA)
    args = ["--project-dir", str(s.stream.project_dir), "run", "--mode", "stream", "--select", "tight",
            "--trigger", "available-now"]
    first = CliRunner().invoke(main, args)
    assert first.exit_code == 0, first.output
    assert "tight batch 0: in" in first.output and "Stream run" in first.output
    assert [r["req_id"] for r in spark.table(plan.sink.table).collect()] == ["a"]
    append(spark, f"{s.ods}.imps", [imp("c", 1, at(2, 1, 0))], IMP_SCHEMA)
    append(spark, f"{s.ods}.clicks", [click("c", at(2, 1, 5)), click("d", at(2, 1, 6))], CLICK_SCHEMA)
    result = run_stream(s.stream, plan)
    assert sum(b.dropped for b in result.batches) == 3
    assert sum(b.spark_dropped or 0 for b in result.batches) == 3  # Spark's own count agrees
    dirty = log_rows(spark, plan.sink.table, "dirty")
    assert {(r["partition"], r["reason"], r["dropped"]) for r in dirty} == {
        ("dt=2026-11-02", "dropped_by_watermark", 3)}
    assert [p.partition for p in commitlog.open_partitions(spark, [plan.sink.table])] == ["dt=2026-11-02"]
    run_batch(s.batch, s.batch_plans["tight"])
    missing = spark.table(s.batch_plans["tight"].sink.table).exceptAll(spark.table(plan.sink.table))
    assert [r["req_id"] for r in missing.collect()] == ["c"]  # what repair will rewrite


def test_the_stateful_plan_carries_its_flush_margin_and_idle_timeout(tmp_path):
    """No Spark: the runtime's flush and idle heartbeats come from these plan fields."""
    models = {"m.sql": "{{ config(materialized='streaming_table', partition_by=['dt'], "
                       "stream_strategy='stateful', idle_timeout='90 seconds') }}\n" + SAMPLES,
              "inc.sql": "{{ config(materialized='streaming_table', partition_by=['dt']) }}\n" + ATTRIBUTED}
    root = make_project(tmp_path, models=models, yml={"sources.yml": ad_sources_yml("ods")})
    result = compile_project(root, mode="stream")
    result.raise_if_errors()
    plan = result.plans["m"]
    assert (plan.strategy, plan.flush_margin_us, plan.idle_timeout_us) == ("stateful", 20 * 60 * 10**6, 90 * 10**6)
    assert [b.watermark.delay_us for b in plan.sources] == [10 * 60 * 10**6] * 2
    assert (result.plans["inc"].flush_margin_us, result.plans["inc"].idle_timeout_us) == (0, None)


def test_rows_behind_the_watermark_within_one_run_are_counted_like_spark_counts_them(spark, setup):
    """In-run skew: one source commit per micro-batch, a newer chunk first, then an older one
    (on time by its own ingest time). Our count of rows behind the watermark must equal
    Spark's `numRowsDroppedByWatermark`, batch by batch, and every dropped row's partition
    must be dirty."""
    s = setup
    plan = s.stream_plans["tight"]
    plan = dataclasses.replace(plan, sources=tuple(
        dataclasses.replace(b, max_files_per_trigger=1) for b in plan.sources))
    append(spark, f"{s.ods}.imps", [imp("new", 1, at(2, 12, 0))], IMP_SCHEMA)
    append(spark, f"{s.ods}.clicks", [click("new", at(2, 12, 1))], CLICK_SCHEMA)
    append(spark, f"{s.ods}.imps", [imp("old", 1, at(1, 10, 0))], IMP_SCHEMA)
    append(spark, f"{s.ods}.clicks", [click("old", at(1, 10, 1))], CLICK_SCHEMA)
    append(spark, f"{s.ods}.clicks", [click("old", at(1, 10, 2))], CLICK_SCHEMA)  # matches "old"
    batches = run_stream(s.stream, plan, on_batch=lambda r: print(r.line())).batches
    print([(b.batch_id, b.dropped, b.spark_dropped) for b in batches])
    assert [b.dropped for b in batches] == [b.spark_dropped or 0 for b in batches]
    assert sum(b.dropped for b in batches) >= 1  # at least the third batch's click
    assert {r["partition"] for r in log_rows(spark, plan.sink.table, "dirty")} == {"dt=2026-11-01"}


def test_an_idle_timeout_closes_pending_intervals_under_an_interval_trigger(spark, setup):
    """A running query (interval trigger) whose inputs go quiet: after `idle_timeout` the
    unmatched impression is emitted padded, and the sink equals the batch plan."""
    import time

    from sqlflow.runtime.stream import start

    s = setup
    plan = dataclasses.replace(s.stream_plans["samples"], idle_timeout_us=2_000_000)
    append(spark, f"{s.ods}.imps", [imp("x", 1, at(1, 10, 0)), imp("y", 1, at(1, 11, 0))], IMP_SCHEMA)
    append(spark, f"{s.ods}.clicks", [click("x", at(1, 10, 5))], CLICK_SCHEMA)
    query, fn = start(s.stream, plan, trigger="1 second")
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and fn.error is None and not (
                spark.catalog.tableExists(plan.sink.table)
                and spark.table(plan.sink.table).where("req_id = 'y'").take(1)):
            time.sleep(2)
        assert fn.error is None and query.isActive
        query.processAllAvailable()  # let the running batch finish: stop() interrupts it
    finally:
        query.stop()
    want = s.batch_plans["samples"]
    run_batch(s.batch, want)
    assert_same(spark, plan.sink.table, want.sink.table)
