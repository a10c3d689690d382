"""Outer interval joins in the `incremental` stream runtime, on real Spark and Delta.

Differential: the same rows, appended to fresh Delta sources in random chunks (each side in
ingest order, the sides interleaved at random, one micro-batch per chunk), streamed with a
crash and a restart in the middle, must leave exactly the batch plan's rows in the sink once
the bounded run has flushed. Then: the flush is one recorded step (a restart pads nothing
twice), an idle side's timeout pads rows while an interval-triggered query runs, and a row
that matches an already padded row marks its partition dirty in the commit log.
"""

from __future__ import annotations

import random
import shutil
import threading
import time
from datetime import timedelta

import pytest
from pyspark.sql import functions as F

from helpers import delta_writers, stop_query
from rowdiff import row_diff
from runtime.adkit import (
    CLICK_SCHEMA,
    IMP_SCHEMA,
    append,
    assert_same,
    at,
    click,
    edge_cases,
    imp,
    in_ingest_chunks,
    random_rows,
    setup_projects,
)
from sqlflow.errors import SqlflowError
from sqlflow.runtime.delta import commitlog, deltalog
from sqlflow.runtime.dispatch import run_stream
from sqlflow.runtime.incremental import state
from sqlflow.runtime.query import checkpoint_dir

pytestmark = pytest.mark.spark

HEAD = "{{ config(materialized='streaming_table', partition_by=['dt']) }}\n"
JOIN = "ON i.req_id = c.req_id AND c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 20 MINUTES"
MODELS = {
    "left_samples.sql": HEAD + f"""
SELECT i.req_id, i.ad_id, i.imp_ts, c.click_ts, c.ingest_ts AS click_ingest,
       CASE WHEN c.req_id IS NULL THEN 0 ELSE 1 END AS label, to_date(i.imp_ts) AS dt
FROM {{{{ source('ods', 'imps') }}}} AS i
LEFT JOIN {{{{ source('ods', 'clicks') }}}} AS c {JOIN}""",
    "right_samples.sql": HEAD + f"""
SELECT c.req_id, c.click_ts, i.imp_ts, i.ad_id, to_date(c.click_ts) AS dt
FROM {{{{ source('ods', 'imps') }}}} AS i
RIGHT JOIN {{{{ source('ods', 'clicks') }}}} AS c {JOIN}""",
    "idle_samples.sql": """{{ config(materialized='streaming_table', partition_by=['dt'],
                                   idle_timeout='1 second') }}
""" + f"""
SELECT i.req_id, i.imp_ts, c.click_ts, to_date(i.imp_ts) AS dt
FROM {{{{ source('ods', 'imps') }}}} AS i
LEFT JOIN {{{{ source('ods', 'clicks') }}}} AS c {JOIN}""",
}


@pytest.fixture
def setup(spark, tmp_path, request):
    yield from setup_projects(spark, tmp_path, request, "rt_outer_", MODELS)


def bounds_cases():
    """Matches exactly at both bounds, one µs outside each, null keys, duplicates; the
    clicks' ingest times lag so some impressions close only at the flush."""
    imps = [imp("lo", 1, at(1, 10, 0)), imp("hi", 1, at(1, 10, 30)),
            imp("lo-1", 1, at(1, 11, 0)), imp("hi+1", 1, at(1, 11, 30)),
            imp(None, 2, at(1, 12, 0)), imp("dup", 3, at(1, 12, 30)), imp("dup", 3, at(1, 12, 30)),
            imp("lonely", 4, at(1, 13, 0))]
    clicks = [click("lo", at(1, 10, 0)), click("hi", at(1, 10, 50)),
              click("lo-1", at(1, 11, 0) - timedelta(microseconds=1)),
              click("hi+1", at(1, 11, 50, us=1)),
              click(None, at(1, 12, 1)), click("dup", at(1, 12, 31)), click("dup", at(1, 12, 31))]
    return imps, clicks


def imps_then_clicks(spark, s):
    """`bounds_cases` appended for `left_samples` one file per micro-batch: batch 0 brings the
    impressions, the two later ones the clicks. Returns the plan."""
    imps, clicks = bounds_cases()
    plan = s.one_file_per_batch("left_samples")
    append(spark, f"{s.ods}.imps", imps, IMP_SCHEMA)
    append(spark, f"{s.ods}.clicks", clicks[:2], CLICK_SCHEMA)
    append(spark, f"{s.ods}.clicks", clicks[2:], CLICK_SCHEMA)
    return plan


# right outer joins in random ingest-order splits: test_interval_contract (right x incremental)
@pytest.mark.parametrize("model,seed", [("left_samples", 3)])
def test_outer_join_with_random_splits_and_a_restart_equals_the_batch_plan(spark, setup, model, seed):
    s, rnd = setup, random.Random(seed)
    imps, clicks = edge_cases()
    more, edges = random_rows(seed, n=16), bounds_cases()
    imps = [r for r in imps + more[0] + edges[0] if r[2] is not None]  # ingest-ordered below
    clicks = clicks + more[1] + edges[1]
    a = in_ingest_chunks(rnd, imps, f"{s.ods}.imps", IMP_SCHEMA)
    b = in_ingest_chunks(rnd, clicks, f"{s.ods}.clicks", CLICK_SCHEMA)
    todo = []
    while a or b:  # interleave the sides at random, each in its own order
        todo.append((a if a and (not b or rnd.random() < 0.5) else b).pop(0))
    for table, rows, schema in todo:
        append(spark, table, rows, schema)
    plan = s.one_file_per_batch(model)
    crash_at = rnd.randint(1, max(1, min(len(a), len(b), 3)))

    def crash(batch_id):
        if batch_id == crash_at:
            raise RuntimeError(f"simulated crash in batch {batch_id}")

    with pytest.raises(SqlflowError, match="simulated crash"):
        run_stream(s.stream, plan, after_sink=crash)
    res = run_stream(s.stream, plan, on_batch=lambda r: print(r.line()))
    assert res.batches[0].replayed and res.batches[-1].kind == "flush"
    assert res.dirty == ()
    truth, _ = s.truth(model)
    assert_same(spark, plan.sink.table, truth)
    padded = spark.table(plan.sink.table).where(F.col("imp_ts" if model == "right_samples" else "click_ts").isNull())
    assert padded.count() > 0
    assert "delta-rs" in delta_writers(spark, plan.sink.table)  # small steps, appended from the driver
    # every micro-batch's sink write is in the commit log, once, with its input offsets
    log = (commitlog.read(spark).where(F.col("table") == plan.sink.table.lower())
           .where(F.col("kind") == "write").collect())
    assert sum(r["rows"] for r in log) == spark.table(plan.sink.table).count()
    assert all(r["mode"] == "stream" and r["run_id"].startswith(f"{model}@") for r in log)
    assert any(r["inputs"] and "version" in r["inputs"] for r in log)


def test_a_crash_after_the_state_append_copies_no_row_twice(spark, setup):
    """An outer join copies every input row to its state tables. A crash after batch 0's state
    append (before Spark committed the batch): the restart replays batch 0, and the query's
    journal skips both state appends, so each state table holds its input's rows once and the
    later batches match them once. No state append consults Delta's txn."""
    s = setup
    plan = imps_then_clicks(spark, s)

    def crash(batch_id):
        raise RuntimeError(f"simulated crash after the state append of batch {batch_id}")

    with pytest.raises(SqlflowError, match="simulated crash"):
        run_stream(s.stream, plan, after_state=crash)
    replay = run_stream(s.stream, plan).batches
    assert (replay[0].batch_id, replay[0].replayed) == (0, True)
    assert [b.kind for b in replay].count("batch") >= 2 and replay[-1].kind == "flush"
    tables = {rel: state.state_table(plan.sink.table, plan.model, rel)
              for rel in (f"{s.ods}.imps", f"{s.ods}.clicks")}
    for rel, table in tables.items():
        copied = spark.table(table).drop(state.BATCH_COLUMN)
        source = spark.table(rel)
        assert copied.count() == source.count() > 0
        assert (copied.exceptAll(source).collect(), source.exceptAll(copied).collect()) == ([], [])
    truth, _ = s.truth("left_samples")
    assert_same(spark, plan.sink.table, truth)
    for table in tables.values():
        location = deltalog.describe(spark, table).location
        versions = list(range(deltalog.latest_version(spark, table, location) + 1))
        assert [a for _, a in deltalog.commit_actions(spark, location, versions) if "txn" in a] == []
        assert "delta-rs" in delta_writers(spark, table)  # the copies appended from the driver


def test_no_cached_frame_reads_a_state_table_when_the_step_appends_to_it(spark, setup):
    """Spark plans a cached frame again whenever a table it reads is written (and whenever a
    cached frame under it is released first): a micro-batch releases its pending and padded
    rows, which read the state tables, right after the sink write, before the state appends
    (`MicroBatch._uncache`). Seen from Spark's storage: right after each sink write, no cached
    RDD's plan scans a state table; the new rows (and the older rows the query holds) are
    still cached. The rows equal the batch plan's."""
    s = setup
    plan = imps_then_clicks(spark, s)
    prefix = state.state_table(plan.sink.table, plan.model, "").rsplit(".", 1)[-1]
    seen = []

    def cached_after_sink(batch_id):
        names = [info.name() for info in spark.sparkContext._jsc.sc().getRDDStorageInfo()
                 if not info.name().startswith("Delta Table State")]  # Delta's own log caches
        seen.append((batch_id, [n[:300] for n in names if prefix in n], len(names)))

    batches = run_stream(s.stream, plan, after_sink=cached_after_sink).batches
    assert sum(b.padded for b in batches if b.kind == "batch") > 0  # pending rows were cached
    assert len(seen) >= 2 and all(n > 0 for _, _, n in seen), seen
    assert [(b, over) for b, over, _ in seen if over] == [], seen
    truth, _ = s.truth("left_samples")
    assert_same(spark, plan.sink.table, truth)


def test_flush_is_recorded_so_a_restart_pads_nothing_twice(spark, setup):
    s = setup
    imps, clicks = bounds_cases()
    append(spark, f"{s.ods}.imps", imps, IMP_SCHEMA)
    append(spark, f"{s.ods}.clicks", clicks[:2], CLICK_SCHEMA)
    plan = s.stream_plans["left_samples"]
    first = run_stream(s.stream, plan)
    # the clicks' frontier (10:50) closes no impression: every padded row comes from the flush
    assert [b.kind for b in first.batches] == ["batch", "flush"]
    assert first.batches[0].padded == 0 and first.batches[1].padded == 6
    again = run_stream(s.stream, plan)  # nothing new: no batch, and no second flush
    assert again.batches == ()
    assert spark.table(plan.sink.table).count() == 8
    # a crash right after the flush's sink write (before its `done` mark): the next start
    # redoes the recorded flush, and Delta skips its write
    from sqlflow.runtime.incremental.padding import progress_table

    spark.sql(f"DELETE FROM {progress_table(plan.sink.table, plan.model)} WHERE done")
    redo = run_stream(s.stream, plan).batches
    assert [(b.kind, b.replayed) for b in redo] == [("flush", True)]
    assert spark.table(plan.sink.table).count() == 8
    assert run_stream(s.stream, plan).batches == ()
    # the progress table is the model's state, like its copies (docs/semantics.md, "Table
    # ownership"); a new query refuses to drop one another model owns
    progress = progress_table(plan.sink.table, plan.model)
    for table in (progress, state.state_table(plan.sink.table, plan.model, f"{s.ods}.imps")):
        assert deltalog.describe(spark, table).owner == (plan.model, "state"), table
    before = sorted(map(tuple, spark.table(progress).collect()))
    spark.sql(f"ALTER TABLE {progress} SET TBLPROPERTIES ('sqlflow.model' = 'someone_else')")
    for table in (plan.sink.table, plan.quarantine):
        spark.sql(f"DROP TABLE IF EXISTS {table}")
    shutil.rmtree(checkpoint_dir(s.stream.project_dir, plan))  # a new query
    with pytest.raises(SqlflowError, match=f"would drop table `{progress}`.*belongs to model `someone_else`"):
        run_stream(s.stream, plan)
    assert sorted(map(tuple, spark.table(progress).collect())) == before


def test_a_row_matching_an_already_padded_row_marks_its_partition_dirty(spark, setup):
    s = setup
    plan = s.stream_plans["left_samples"]
    append(spark, f"{s.ods}.imps", [imp("a", 1, at(1, 10, 0)), imp("b", 1, at(2, 10, 0))], IMP_SCHEMA)
    first = run_stream(s.stream, plan)
    assert first.padded == 2 and first.dirty == ()
    # a click for `a`, not late by its own ingest time: the bounded run padded `a` already
    append(spark, f"{s.ods}.clicks", [click("a", at(1, 10, 5), at(1, 10, 6))], CLICK_SCHEMA)
    second = run_stream(s.stream, plan)
    assert [p for p, _ in second.dirty] == ["dt=2026-11-01"]
    opened = commitlog.open_partitions(spark, [plan.sink.table])
    assert [(o.partition, o.dirty) for o in opened] == [("dt=2026-11-01", True)]
    assert "emitted padded" in opened[0].reasons[0]
    # the stream differs from the batch exactly in the dirty partition
    truth, _ = s.truth("left_samples")
    good = F.col("dt") != "2026-11-01"
    assert_same_where(spark, plan.sink.table, truth, good)
    assert spark.table(plan.sink.table).where(~good).exceptAll(spark.table(truth).where(~good)).count() == 1


def assert_same_where(spark, got_table, want_table, where):
    got, want = spark.table(got_table).where(where), spark.table(want_table).where(where)
    diff = row_diff(want, got)
    assert diff.equal and diff.want_rows > 0, diff


def test_an_idle_side_times_out_and_its_rows_are_padded_while_the_query_runs(spark, setup):
    """No click ever arrives: with an interval trigger, the run loop's idle check pads the
    impressions the impressions' own frontier closes, while the query keeps running."""
    s = setup
    plan = s.stream_plans["idle_samples"]
    assert plan.idle_timeout_us == 1_000_000
    # frontier 12:00: closed are the impressions before 12:00 - 10 min (the clicks' lateness)
    # - 20 min (the bound) = 11:30, to the µs
    times = [at(1, 10, 0), at(1, 11, 0), at(1, 11, 29, 59, 999_999), at(1, 11, 30), at(1, 12, 0)]
    append(spark, f"{s.ods}.imps", [imp(f"r{k}", 1, t) for k, t in enumerate(times)], IMP_SCHEMA)
    reports, results, errors = [], [], []

    def run():
        try:
            results.append(run_stream(s.stream, plan, trigger="1 second", on_batch=reports.append))
        except BaseException as exc:  # noqa: BLE001 - shown by the assert below
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not errors and not any(r.kind == "idle" for r in reports):
            time.sleep(0.5)
        padded_while_running = {r["req_id"] for r in spark.table(plan.sink.table).collect()}
    finally:
        stop_query(spark, f"sqlflow_{plan.model}", thread)
    assert not errors and results, errors
    assert [r.kind for r in results[0].batches] == ["batch", "idle"]
    assert padded_while_running == {"r0", "r1", "r2"}
