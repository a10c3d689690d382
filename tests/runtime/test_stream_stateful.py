"""The `stateful` stream runtime on real Spark and Delta, differentially: the same input rows,
committed to fresh Delta sources in a random order and random chunks (one commit per chunk) and
streamed by Spark's own stream-stream join in several micro-batches, must leave, after one
bounded run (which ends with the heartbeat flush), exactly the batch plan's output in the sink
and the batch run's quarantine rows (all but `origin`) in the quarantine table. A row Spark
drops behind its watermark must be counted like Spark counts it and its partition marked dirty
in the commit log."""

from __future__ import annotations

import dataclasses
import json
import random

import pytest
from pyspark.sql import functions as F

from helpers import ad_sources_yml, make_project
from runtime.adkit import (
    CLICK_SCHEMA,
    IMP_SCHEMA,
    append,
    assert_same,
    at,
    chunks,
    click,
    edge_cases,
    imp,
    random_rows,
    setup_projects,
)
from sqlflow.compiler import compile_project
from sqlflow.errors import SqlflowError
from sqlflow.planning.plan import COMMIT_LOG
from sqlflow.runtime.delta import commitlog, deltalog, once
from sqlflow.runtime.dispatch import run_stream

pytestmark = pytest.mark.spark


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


def rows(seed):
    """Bounds exactly at lower and upper and one µs outside each, NULL keys, duplicates,
    late, future and timeless rows, a day boundary (the shared edge cases without the pair
    at exactly the lateness limit), and random rows over two days."""
    imps, clicks = edge_cases()
    imps = [r for r in imps if r[0] != "in-time"]
    clicks = [r for r in clicks if r[0] not in ("in-time", "future")]
    more = random_rows(seed, n=24, keys=15)
    imps, clicks = imps + more[0], clicks + more[1]
    return imps, clicks


@pytest.fixture
def setup(spark, tmp_path, request):
    yield from setup_projects(spark, tmp_path, request, "rt_stateful_", MODELS)


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
        sink, quarantine = s.truth(model)
        assert_same(spark, plan.sink.table, sink)
        assert_same(spark, plan.quarantine, quarantine, drop=("origin",))
        # quarantined rows by reason, as the service counts them (docs/semantics.md)
        by_reason = {}
        for b in result.batches:
            assert sum(n for _, n in b.reasons) == b.quarantined
            for reason, n in b.reasons:
                by_reason[reason] = by_reason.get(reason, 0) + n
        assert by_reason and by_reason == {r["reason"]: r["count"] for r in
                                           spark.table(plan.quarantine).groupBy("reason").count().collect()}
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


def test_a_crash_after_the_sink_write_replays_the_batch_once_through_the_journal(spark, setup):
    """A crash after batch 0 appended its quarantine and sink rows (the commit log not yet):
    the restart replays batch 0, the query's journal finds both appends by their marker and
    skips them, and the run ends with exactly the batch plan's rows, each batch logged once.
    No append of the query consults Delta's txn (the journal decides every batch id)."""
    s = setup
    plan = s.stream_plans["attributed"]
    imps, clicks = rows(11)
    append(spark, f"{s.ods}.imps", imps, IMP_SCHEMA)
    append(spark, f"{s.ods}.clicks", clicks, CLICK_SCHEMA)

    def crash(batch_id):
        raise RuntimeError(f"simulated crash after the sink write of batch {batch_id}")

    with pytest.raises(SqlflowError, match="simulated crash"):
        run_stream(s.stream, plan, after_sink=crash)
    assert spark.table(plan.sink.table).count() > 0 and spark.table(plan.quarantine).count() > 0
    replay = run_stream(s.stream, plan).batches
    assert (replay[0].batch_id, replay[0].replayed) == (0, True)
    sink, quarantine = s.truth("attributed")
    assert_same(spark, plan.sink.table, sink)
    assert_same(spark, plan.quarantine, quarantine, drop=("origin",))
    checkpoint = s.stream.project_dir / ".sqlflow" / "checkpoints" / "attributed"
    assert once.Journal.open(checkpoint, 99).start == 0
    query = json.loads((checkpoint / "metadata").read_text().splitlines()[0])["id"]
    app = f"attributed@{query}"
    logged = (spark.table(COMMIT_LOG).where(F.col("run_id") == app)
              .groupBy("batch_id", "partition", "kind").count().collect())
    assert 0 in {r["batch_id"] for r in logged}
    assert [tuple(r) for r in logged if r["count"] != 1] == []
    for table in (plan.sink.table, plan.quarantine, COMMIT_LOG):
        location = deltalog.describe(spark, table).location
        versions = list(range(deltalog.latest_version(spark, table, location) + 1))
        txns = [a["txn"] for _, a in deltalog.commit_actions(spark, location, versions)
                if a.get("txn", {}).get("appId", "").startswith(app)]
        assert txns == [], table


def test_a_row_spark_drops_behind_the_watermark_marks_its_partition_dirty(spark, setup):
    """Two bounded runs of a model without skew margin: the first ends with the flush, so the
    watermark is past 12:20; rows of 10:00 committed after it are dropped by Spark's join (our
    lateness rule keeps them: they are on time by their own ingest time). The runtime counts
    exactly the rows Spark counts and marks their output partition dirty."""
    from click.testing import CliRunner

    from sqlflow.cli.main import main

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
    truth, _ = s.truth("tight")
    missing = spark.table(truth).exceptAll(spark.table(plan.sink.table))
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

    from sqlflow.runtime.dispatch import start_stream as start

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
    truth, _ = s.truth("samples")
    assert_same(spark, plan.sink.table, truth)
