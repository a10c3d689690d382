"""What a small micro-batch of an `incremental` join no longer reads (issue 23: the fixed cost
of a micro-batch; docs/semantics.md, "Stream runs"), on a real query over real Delta inputs:

- new rows that came in a few small files are cached as ONE partition (each later pass over
  them, the stats job, the join, the held run, was a task per file);
- the input table as of the held run's base version is left out of the plan when its file
  statistics say none of its rows is in the batch's prune range (Spark planned that read, and
  Delta's file skipping ran a job over the version's files, every micro-batch);

and the stream still writes exactly the batch plan's rows. Also `file_stats.extent` against
Spark's own reading of a Delta table: its bounds hold every value, within Delta's
millisecond truncation."""

from __future__ import annotations

import dataclasses
import threading
from datetime import timedelta
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from pyspark.sql import functions as F

from runtime.adkit import (
    CLICK_SCHEMA,
    IMP_SCHEMA,
    append,
    assert_same,
    at,
    click,
    imp,
    own_file_reads,
    setup_projects,
)
from sqlflow.runtime.delta import deltalog, file_stats
from sqlflow.runtime.dispatch import run_stream
from sqlflow.runtime.incremental import microbatch, older, window
from sqlflow.runtime.incremental import stream as incremental_stream

pytestmark = pytest.mark.spark
MODELS = {
    "attributed.sql": "{{ config(materialized='streaming_table', partition_by=['dt']) }}\n" + """
SELECT c.req_id, c.click_ts, i.ad_id, i.imp_ts, c.dt
FROM {{ source('ods', 'clicks') }} AS c
JOIN {{ source('ods', 'imps') }} AS i
  ON i.req_id = c.req_id AND c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 20 MINUTES""",
}
FILES = 3  # per commit: one commit is one micro-batch of a reader taking 3 files per trigger


@pytest.fixture
def setup(spark, tmp_path, request):
    yield from setup_projects(spark, tmp_path, request, "rt_small_", MODELS)


def commit(spark, table, rows, schema):
    """One commit of `FILES` files."""
    spark.createDataFrame(rows, schema).repartition(FILES).write.format("delta").mode("append").saveAsTable(table)


def test_a_small_batch_is_one_partition_and_skips_a_version_it_cannot_match(spark, setup, monkeypatch):
    s = setup
    plan = s.stream_plans["attributed"]
    plan = dataclasses.replace(plan, sources=tuple(
        dataclasses.replace(b, max_files_per_trigger=FILES) for b in plan.sources))
    reads: list[tuple[str, int | None]] = []
    table_at = older.table_at

    def counted(spark_, relation, version, schema):
        reads.append((relation, version))
        return table_at(spark_, relation, version, schema)

    partitions: dict[int, list[int]] = {}
    new_rows = microbatch.MicroBatch._new_rows

    def spied(self, spark_, df, batch_id, k):
        rows = new_rows(self, spark_, df, batch_id, k)
        partitions.setdefault(batch_id, []).append(rows.rdd.getNumPartitions())
        return rows

    monkeypatch.setattr(older, "table_at", counted)
    monkeypatch.setattr(microbatch.MicroBatch, "_new_rows", spied)
    own = own_file_reads(monkeypatch)  # (batch, input) read from the input's own files
    # 10:00, then (a second query on the same checkpoint) 12:00: no click of the second
    # commit can match an impression of the first (20 minutes), nor a click of the first a
    # later impression. A query's first batch reads its starting snapshot whole
    for n, hour in enumerate((10, 12)):
        reqs = [f"r{hour}-{k}" for k in range(12)]
        commit(spark, f"{s.ods}.imps", [imp(r, k, at(1, hour, k)) for k, r in enumerate(reqs)], IMP_SCHEMA)
        commit(spark, f"{s.ods}.clicks", [click(r, at(1, hour, k, 30)) for k, r in enumerate(reqs)], CLICK_SCHEMA)
        assert [b.batch_id for b in run_stream(s.stream, plan).batches] == [n]
    # batch 0 read each input's first commit (its new rows) from the commit's own files, batch 1
    # its new rows likewise; batch 1's older rows are that first commit, two hours before its
    # own rows: not read again, as a table version or otherwise (the code before read each a
    # second time, as the base of the batch's held run)
    assert reads == [] and sorted(own) == [(0, 0), (0, 1), (1, 0), (1, 1)], (reads, own)
    assert partitions[1] == [1, 1], partitions  # 3 files each: one cached partition
    monkeypatch.undo()
    sink, _ = s.truth("attributed")
    assert_same(spark, plan.sink.table, sink)


def test_file_statistics_bound_every_timestamp_of_a_version(spark, tmp_path):
    """`extent` at a version older than the newest checkpoint (found by its file), with
    microsecond values inside a millisecond, a column NULL in every row, and a NULL-only file:
    every value Spark reads lies within the bounds, which are at most two milliseconds wider,
    and the version's rows are counted."""
    table = "rt_small_extent.t"
    spark.sql("DROP DATABASE IF EXISTS rt_small_extent CASCADE")
    spark.sql("CREATE DATABASE rt_small_extent")
    try:
        spark.sql(f"CREATE TABLE {table} (t TIMESTAMP, never TIMESTAMP, k INT) USING delta "
                  "TBLPROPERTIES ('delta.checkpointInterval' = '2')")
        base = at(1, 10, 0, 0, 999)
        for n in range(4):  # versions 1-4; checkpoints at 2 and 4
            rows = [(base + timedelta(minutes=n, microseconds=7 * j), None, j) for j in range(5)]
            rows.append((None, None, 99))
            (spark.createDataFrame(rows, "t timestamp, never timestamp, k int")
             .repartition(2).write.format("delta").mode("append").saveAsTable(table))
        folder = Path(unquote(urlparse(deltalog.describe(spark, table).location).path))
        assert (folder / "_delta_log" / f"{4:020d}.checkpoint.parquet").is_file()
        for version in (1, 3, 4):
            got = file_stats.extent(folder, version, ["t", "NEVER"])
            assert got is not None
            truth = (spark.read.format("delta").option("versionAsOf", version).table(table)
                     .agg(F.unix_micros(F.min("t")).alias("low"), F.unix_micros(F.max("t")).alias("high"),
                          F.count(F.lit(1)).alias("n")).collect()[0])
            low, high = got.ranges["t"]
            assert low <= truth["low"] <= low + 2_000 and high - 1_000 <= truth["high"] <= high, (version, got)
            assert got.empty == {"never"} and got.files > 0 and got.rows == truth["n"], (version, got)
            assert got.may_hold("t", truth["high"], truth["high"] + 10**9)
            assert not got.may_hold("t", high + 1, high + 10**9) and not got.may_hold("never", 0, 2**62)
        assert file_stats.extent(folder, 99, ["t"]) is None  # a version the log does not hold
    finally:
        spark.sql("DROP DATABASE IF EXISTS rt_small_extent CASCADE")


def test_a_recent_version_is_read_once_then_its_window_serves_later_batches(spark, setup, monkeypatch):
    """A query that starts on a version whose rows later batches can still match (a restart, or
    a held run started over) reads that version once, into its window, and the batches after
    read the window, not the table; clicks of later commits match impressions of every
    earlier one, and the stream equals the batch plan."""
    s = setup
    plan = s.stream_plans["attributed"]
    plan = dataclasses.replace(plan, sources=tuple(
        dataclasses.replace(b, max_files_per_trigger=FILES) for b in plan.sources))
    files: dict[int, list[str]] = {}
    most: dict[int, int | None] = {}  # the older impressions a batch's join scans at most
    plans: list[tuple[bool, bool]] = []  # `small_plan`'s (small, interpreted) per sink step
    older_rows = microbatch.MicroBatch._older
    small_plan = microbatch.small_plan

    def spied(self, spark_, b, source, batch_id, keep, probe=None, wanted=None):
        rows, at_most = older_rows(self, spark_, b, source, batch_id, keep, probe, wanted)
        if b.relation.endswith(".imps"):
            files[batch_id] = [f for f in rows.inputFiles() if "/imps/" in f]
            most[batch_id] = at_most
        return rows, at_most

    def planned(spark_, small, interpreted=False):
        plans.append((small, interpreted))
        return small_plan(spark_, small, interpreted)

    def minute_commit(minute):
        imps = [imp(f"m{minute}-{k}", k, at(1, 10, minute, k)) for k in range(6)]
        # each commit's clicks: its own impressions and those of the commit before
        clicks = [click(f"m{m}-{k}", at(1, 10, minute, 30 + k)) for m in {minute, max(0, minute - 5)}
                  for k in range(6)]
        commit(spark, f"{s.ods}.imps", imps, IMP_SCHEMA)
        commit(spark, f"{s.ods}.clicks", clicks, CLICK_SCHEMA)

    opened = []
    open_window = window.open_window

    def counted(*args, **kwargs):
        opened.append(1)
        return open_window(*args, **kwargs)

    minute_commit(0)
    assert [b.batch_id for b in run_stream(s.stream, plan).batches] == [0]
    monkeypatch.setattr(microbatch.MicroBatch, "_older", spied)
    monkeypatch.setattr(microbatch, "small_plan", planned)
    monkeypatch.setattr(window, "open_window", counted)
    for minute in (5, 10):
        minute_commit(minute)
    assert [b.batch_id for b in run_stream(s.stream, plan).batches] == [1, 2]
    # both batches need the impressions of 10:00: batch 1 read them into the window once, and
    # neither batch's older rows read the table (the code before read it in each)
    # (the clicks of 10:00 cannot match a later impression: that version is left out, no window)
    assert files == {1: [], 2: []} and len(opened) == 1, (files, opened)
    # what the join scans of the older impressions at most: the version's 6 rows (its file
    # statistics), then those and the 6 batch 1 added to the held run; so few rows in all
    # that each sink step ran without adaptive execution and without code generation
    assert most == {1: 6, 2: 12}, most
    assert plans and all(p == (True, True) for p in plans), plans
    monkeypatch.undo()
    sink, _ = s.truth("attributed")
    assert_same(spark, plan.sink.table, sink)


def test_a_batch_that_brings_one_input_nothing_keeps_the_other_inputs_window(spark, setup, monkeypatch):
    """Real-time inputs rarely bring rows in the same micro-batch: a batch with new impressions
    and no click matches none of the older impressions, and reads none of them (an empty
    frame); the window of the version it holds stays for the next batch of clicks, which
    reads it, not the table again (the code before let the window go in such a batch and
    read the version again in the next: a Spark job over the whole version each time).
    One running query; each batch's rows are committed after the batch before it."""
    s = setup
    plan = s.stream_plans["attributed"]
    opened, older_calls = [], []
    open_window = window.open_window
    older_rows = microbatch.MicroBatch._older

    def counted(*args, **kwargs):
        opened.append(1)
        return open_window(*args, **kwargs)

    def spied(self, spark_, b, source, batch_id, keep, probe=None, wanted=None):
        older_calls.append((batch_id, b.relation.rsplit(".", 1)[-1]))
        return older_rows(self, spark_, b, source, batch_id, keep, probe, wanted)

    def imps(minute):
        return [imp(f"m{minute}-{k}", k, at(1, 10, minute, k)) for k in range(6)]

    def clicks(minute, of):  # clicks at `minute` of the impressions of minutes `of`
        return [click(f"m{m}-{k}", at(1, 10, minute, 30 + k)) for m in of for k in range(6)]

    script = {  # after batch n: the next batch's commits
        0: [("imps", imps(5)), ("clicks", clicks(5, (0, 5)))],  # both inputs: the window opens
        1: [("imps", imps(10))],                                 # impressions only
        2: [("clicks", clicks(10, (0, 10)))],                    # clicks of 10:00 again
    }
    done = threading.Event()

    def next_commits(batch_id):
        for table, rows in script.get(batch_id, []):
            schema = IMP_SCHEMA if table == "imps" else CLICK_SCHEMA
            commit(spark, f"{s.ods}.{table}", rows, schema)

    commit(spark, f"{s.ods}.imps", imps(0), IMP_SCHEMA)
    commit(spark, f"{s.ods}.clicks", clicks(0, (0,)), CLICK_SCHEMA)
    monkeypatch.setattr(window, "open_window", counted)
    monkeypatch.setattr(microbatch.MicroBatch, "_older", spied)
    query, fn = incremental_stream.start(s.stream, plan, trigger="1 second", after_state=next_commits,
                                         on_batch=lambda r: r.batch_id == 3 and done.set())
    try:
        assert done.wait(300), (query.exception(), [r.batch_id for r in fn.reports])
    finally:
        query.stop()
        fn.release()
    assert query.exception() is None
    news = [dict(r.rows_in) for r in fn.reports if r.kind == "batch"]
    assert [sorted(k.rsplit(".", 1)[-1] for k, n in r.items() if n) for r in news] == \
        [["clicks", "imps"], ["clicks", "imps"], ["imps"], ["clicks"]], news
    # batch 2 brought no click: no older impression read; batch 3 read the window batch 1 opened
    assert (2, "imps") not in older_calls and (3, "imps") in older_calls, older_calls
    assert len(opened) == 1, opened
    monkeypatch.undo()
    sink, _ = s.truth("attributed")
    assert_same(spark, plan.sink.table, sink)


def test_a_running_query_lets_go_of_batches_no_later_one_can_match_and_still_joins_a_late_arrival(
        spark, setup, monkeypatch):
    """A running query over 90 minutes of commits, each a micro-batch: the held batches older
    than any later batch can match (20 minutes, less the inputs' lateness) are let go
    (`held.Held.evict`), and a last commit of rows from the first minutes (not late by their
    own ingest time, only late to arrive: clicks of 10:20) reaches below the floors: that batch reads the
    table, and the stream still equals the batch plan (the late clicks find their
    impressions)."""
    from sqlflow.runtime.dispatch import start_stream
    from sqlflow.runtime.incremental import held

    s = setup
    plan = s.stream_plans["attributed"]
    evicted: list[int] = []
    evict = held.Held.evict

    def counted(self, relation, floors):
        n = evict(self, relation, floors)
        evicted.append(n)
        return n

    monkeypatch.setattr(held.Held, "evict", counted)

    starts: list[int] = []
    start = held.Held.start

    def started(self, relation, version, read, batch_id, **kw):
        starts.append(batch_id)
        return start(self, relation, version, read, batch_id, **kw)

    monkeypatch.setattr(held.Held, "start", started)

    def minute_commit(minute):
        hh, mm = 10 + minute // 60, minute % 60
        imps = [imp(f"m{minute}-{k}", k, at(1, hh, mm, k)) for k in range(4)]
        clicks = [click(f"m{m}-{k}", at(1, hh, mm, 30 + k)) for m in {minute, max(0, minute - 15)}
                  for k in range(4)]
        commit(spark, f"{s.ods}.imps", imps, IMP_SCHEMA)
        commit(spark, f"{s.ods}.clicks", clicks, CLICK_SCHEMA)

    query, fn = start_stream(s.stream, plan, trigger="0.5 seconds")
    try:
        for minute in range(0, 91, 15):
            minute_commit(minute)
            query.processAllAvailable()
        held_from = len(starts)
        # clicks of 10:20 on the impressions of 10:15, arriving last (not late by their own
        # ingest time): those impressions were let go, so this batch reads the table
        late = [click(f"m15-{k}", at(1, 10, 20, k)) for k in range(4)]
        commit(spark, f"{s.ods}.clicks", late, CLICK_SCHEMA)
        query.processAllAvailable()
    finally:
        query.stop()
    assert fn.error is None
    assert sum(evicted) > 0, evicted
    assert len(starts) > held_from, starts  # the late batch's impressions: a new run, from the table
    monkeypatch.undo()
    sink, quarantine = s.truth("attributed")
    assert_same(spark, plan.sink.table, sink)


def test_batches_whose_file_statistics_prove_every_row_clean_run_no_stats_job(spark, setup, monkeypatch):
    """A running query over commits of rows a few minutes apart, each ingested up to half a minute after its event
    time (inside the 10 minutes' lateness and 5 minutes' tolerance), shuffled, clicks in
    random chunks: the Delta statistics of each micro-batch's files prove its rows clean and it
    counts them without a Spark job (`log_stats`). Commits that hold one late, future or untimed
    row among clean ones, or a row a millisecond inside a limit, cannot be proven: those
    batches count their rows (a stats job, or on the driver: `_arrow_stats`) and quarantine
    exactly those rows. Sink and quarantine equal the batch plan's, row for row."""
    import random

    from sqlflow.runtime.dispatch import start_stream

    s = setup
    plan = s.stream_plans["attributed"]
    rnd = random.Random(2311)
    imp_commits, clicks = [], []
    for minute in range(0, 40, 5):  # a commit of impressions every 5 minutes
        group = []
        for k in range(4):
            ts = at(1, 10, minute, rnd.randrange(60), rnd.randrange(10**6))
            group.append(imp(f"m{minute}-{k}", k, ts, ts + timedelta(microseconds=rnd.randrange(30 * 10**6))))
            cts = ts + timedelta(microseconds=rnd.randrange(25 * 60 * 10**6))  # some past 20 min
            clicks.append(click(f"m{minute}-{k}", cts, cts + timedelta(microseconds=rnd.randrange(30 * 10**6))))
        rnd.shuffle(group)
        imp_commits.append(group)
    clicks.sort(key=lambda r: r[-2])  # in ingest order, in random chunks of 2-5
    click_commits = []
    while clicks:
        n = rnd.randint(2, 5)
        click_commits.append(clicks[:n])
        clicks = clicks[n:]
    imp_commits[2] += [imp("late", 1, at(1, 10, 8), at(1, 10, 18, us=1)),  # 10 min + 1 µs late
                       imp("edge", 1, at(1, 10, 9), at(1, 10, 19))]  # exactly 10 min late: clean
    click_commits[3] += [click("late", at(1, 10, 8, 30), at(1, 10, 3, 30) - timedelta(microseconds=1)),  # future
                         click("edge", None, at(1, 10, 19, 1)), click("edge", at(1, 10, 9, 10))]
    proven, counted = [], []
    log_stats_of, stats_of = microbatch.MicroBatch._log_stats, microbatch.MicroBatch._stats

    def from_logs(self, spark_, batch_id):
        found = log_stats_of(self, spark_, batch_id)
        proven.append((batch_id, found is not None))
        return found

    def by_spark(self, sides):
        counted.append(1)
        return stats_of(self, sides)

    arrow_stats_of = microbatch.MicroBatch._arrow_stats

    def on_driver(self, spark_, batch_id, sides):  # counted from the rows, not a stats job
        found = arrow_stats_of(self, spark_, batch_id, sides)
        if found is not None:
            counted.append(1)
        return found

    monkeypatch.setattr(microbatch.MicroBatch, "_log_stats", from_logs)
    monkeypatch.setattr(microbatch.MicroBatch, "_stats", by_spark)
    monkeypatch.setattr(microbatch.MicroBatch, "_arrow_stats", on_driver)
    query, fn = start_stream(s.stream, plan, trigger="0.5 seconds")
    try:  # a running query: each commit lands after the one before was processed
        for n in range(max(len(imp_commits), len(click_commits))):
            for table, commits, schema in (("imps", imp_commits, IMP_SCHEMA), ("clicks", click_commits, CLICK_SCHEMA)):
                if n < len(commits):
                    append(spark, f"{s.ods}.{table}", commits[n], schema)
            query.processAllAvailable()
    finally:
        query.stop()
    monkeypatch.undo()
    assert fn.error is None
    batches = [b for b in fn.reports if b.kind == "batch"]
    assert [b.batch_id for b in batches] == [b for b, _ in proven]
    fell_back = [b for b, ok in proven if not ok]
    assert len(counted) == len(fell_back) and 0 < len(fell_back) < len(proven), proven
    assert {b.batch_id for b in batches if b.quarantined} <= set(fell_back), (batches, proven)
    assert sum(b.quarantined for b in batches) == 3  # late, future, untimed
    sink, quarantine = s.truth("attributed")
    assert_same(spark, plan.sink.table, sink)
    assert_same(spark, s.stream_plans["attributed"].quarantine, quarantine, drop=("origin",))


def test_a_small_batch_runs_its_plan_without_code_generation_and_a_large_one_with_it(spark):
    """`small_plan` on a real session: Spark plans a query made inside the block without
    whole-stage code generation (no `*(n)` stage in its physical plan) and evaluates its
    expressions interpreted when the batch is small and reads few rows; outside it, and for
    a batch that reads many rows or a large batch, as the session is configured."""
    from sqlflow.runtime.small_plan import FACTORY, WHOLE_STAGE, small_plan

    own = spark.newSession()  # the suite's sessions run interpreted already: compiled here
    own.conf.set(WHOLE_STAGE, "true")
    own.conf.set(FACTORY, "FALLBACK")

    def stages() -> bool:
        frame = own.range(50).selectExpr("id * 2 AS x").where("x % 3 = 0")
        plan = frame._jdf.queryExecution().executedPlan().toString()
        assert sorted(r.x for r in frame.collect()) == [x for x in range(0, 100, 2) if x % 3 == 0]
        return "*(" in plan

    assert stages()
    with small_plan(own, True, interpreted=True):
        assert own.conf.get(FACTORY) == "NO_CODEGEN"
        assert not stages()
    assert stages() and own.conf.get(FACTORY) == "FALLBACK"
    with small_plan(own, True):  # small, but too many rows read to run interpreted
        assert stages() and own.conf.get(FACTORY) == "FALLBACK"
    with small_plan(own, False, interpreted=True):  # a large batch: as configured
        assert stages()


def test_a_global_aggregate_inside_unadaptive_runs_as_one_spark_job_with_the_same_rows(spark):
    """`unadaptive`, as `MicroBatch._stats` runs its job: a union of global aggregates (one per
    input, no grouping key) planned inside the block is one Spark job, where adaptive execution
    runs each query stage as a job of its own; the rows are the same and the session's setting
    is back after the block."""
    from sqlflow.runtime.small_plan import ADAPTIVE, unadaptive

    own = spark.newSession()
    own.conf.set(ADAPTIVE, "true")
    tracker = own.sparkContext.statusTracker()

    def run(group: str) -> tuple[list, int]:
        sides = [own.range(k * 1000, k * 1000 + 700, numPartitions=3).selectExpr(f"{k} AS side", "id")
                 for k in range(2)]
        frames = [rows.agg(F.min("side").alias("side"), F.count(F.lit(1)).alias("n"),
                           F.max("id").alias("high")) for rows in sides]
        own.sparkContext.setJobGroup(group, group)
        try:
            found = sorted(tuple(r) for r in frames[0].unionByName(frames[1]).collect())
        finally:
            own.sparkContext.setJobGroup("", "")
        return found, len(tracker.getJobIdsForGroup(group))

    adaptive_rows, adaptive_jobs = run("adaptive")
    with unadaptive(own):
        assert own.conf.get(ADAPTIVE) == "false"
        rows, jobs = run("unadaptive")
    assert own.conf.get(ADAPTIVE) == "true"
    assert rows == adaptive_rows == [(0, 700, 699), (1, 700, 1699)]
    assert jobs == 1 and adaptive_jobs > 1, (jobs, adaptive_jobs)


def test_a_small_batch_joins_in_one_job_by_hashing_its_new_rows_without_a_shuffle(spark, setup, monkeypatch):
    """A running query over small commits in random chunks: each micro-batch reads few rows,
    so it runs the plan's hash-join SQL (`planning.delta.hash_join`) over views of one partition
    each. The sink's query Spark plans is a shuffled hash join per term and no exchange at all
    (no broadcast job, no shuffle), and the sink equals the batch plan's rows, row for row."""
    import random

    from sqlflow.runtime.dispatch import start_stream

    s = setup
    plan = s.stream_plans["attributed"]
    assert plan.hash_join_sql is not None
    rnd = random.Random(4)
    imps, clicks = [], []
    for k in range(24):
        ts = at(1, 10, rnd.randrange(50), rnd.randrange(60))
        imps.append(imp(f"h{k % 17}", k % 3, ts))
        cts = ts + timedelta(seconds=rnd.randrange(25 * 60))  # some past the 20 minutes
        clicks.append(click(f"h{k % 17}", cts))
    rnd.shuffle(imps)
    rnd.shuffle(clicks)
    used, plans = [], []
    bind, write = microbatch.MicroBatch._bind, microbatch.write

    def bound(self, clean, olds, interpreted):
        sql = bind(self, clean, olds, interpreted)
        used.append(sql == plan.hash_join_sql)
        return sql

    def written(spark_, sink, rows, **kw):
        if sink.table == plan.sink.table:  # planned here, inside the sink's settings
            plans.append(rows._jdf.queryExecution().executedPlan().toString())
        return write(spark_, sink, rows, **kw)

    monkeypatch.setattr(microbatch.MicroBatch, "_bind", bound)
    monkeypatch.setattr(microbatch, "write", written)
    query, fn = start_stream(s.stream, plan, trigger="0.5 seconds")
    try:
        while imps or clicks:
            for table, rows, schema in (("imps", imps, IMP_SCHEMA), ("clicks", clicks, CLICK_SCHEMA)):
                n = rnd.randint(0, 6)
                if rows[:n]:
                    append(spark, f"{s.ods}.{table}", rows[:n], schema)
                del rows[:n]
            query.processAllAvailable()
    finally:
        query.stop()
    monkeypatch.undo()
    assert fn.error is None
    # every batch after the first (which reads the inputs' first versions, whose rows it
    # does not count) reads few rows
    assert len(used) >= 4 and all(used[1:]), used
    assert len(plans) == len(used), (len(plans), len(used))
    for hashed, p in zip(used, plans, strict=True):
        if hashed:  # (a join Spark finds empty, its held rows looked up by key, is no join)
            assert "ShuffledHashJoin" in p or "LocalTableScan <empty>" in p, p
            assert "Exchange" not in p and "BroadcastHashJoin" not in p, p
        else:
            assert "ShuffledHashJoin" not in p, p
    assert any("ShuffledHashJoin" in p for p in plans), plans
    sink, _ = s.truth("attributed")
    assert_same(spark, plan.sink.table, sink)


@pytest.mark.parametrize("seed, files", [(7, 1), (11, 2)], ids=["a commit a batch", "a file a batch"])
def test_a_running_query_looks_its_held_rows_up_by_key_and_equals_the_batch_plan(
        spark, setup, monkeypatch, seed, files):
    """On the embedded `local` target a running query holds each input's batches on the
    driver and hands the join only the held rows whose keys a new row of the other input has
    (`runtime.incremental.keyed`, `key_index`). The edge cases and random rows (NULL keys, repeated keys,
    rows at the interval's bounds, late and malformed rows) in random chunks and order, a
    commit per chunk, into one running query: held rows were looked up, fewer handed over than
    held, and sink and quarantine equal the batch plan's, row for row. With `files` files a
    commit read a file a micro-batch, batches end inside versions too: those take only the
    columns looked up by to the driver (`MicroBatch._to_run`), and read back the copies of the
    batches before them in the version that hold a key they look up (`copies`): the rows
    are the same. Every batch after the first reads its new rows from the inputs' own files (`own_files`)."""
    import random

    from runtime.adkit import edge_cases, random_rows
    from sqlflow.runtime.dispatch import start_stream
    from sqlflow.runtime.incremental import key_index

    s, rnd = setup, random.Random(seed)
    plan = s.stream_plans["attributed"]
    imps, clicks = edge_cases()
    more = random_rows(seed)
    todo = []
    for table, rows, schema in (("imps", imps + more[0], IMP_SCHEMA), ("clicks", clicks + more[1], CLICK_SCHEMA)):
        rnd.shuffle(rows)
        while rows:  # about eight commits per input
            n = rnd.randint(1, max(1, len(rows) // 4))
            todo.append((f"{s.ods}.{table}", rows[:n], schema))
            rows = rows[n:]
    rnd.shuffle(todo)
    looked: list[tuple[int, int]] = []  # (held rows, rows handed to the join) per lookup
    matching = key_index.Store.matching

    def counted(store, keys):
        found = matching(store, keys)
        looked.append((sum(r.rows for r in store), 0 if found is None else found.num_rows))
        return found

    monkeypatch.setattr(key_index.Store, "matching", counted)
    on_driver: list[int] = []  # batches whose stats were counted from their rows as Arrow
    narrow: list[int] = []  # ... of which some input's new rows went there without every column
    arrow_stats_of = microbatch.MicroBatch._arrow_stats

    def arrow_stats(self, spark_, batch_id, sides):
        found = arrow_stats_of(self, spark_, batch_id, sides)
        if found is not None:
            on_driver.append(batch_id)
            _stats, whole, keys = found
            assert set(whole) <= set(keys) and all(whole[r] is keys[r] for r in whole)
            cut = [k for k, r in enumerate(keys) if r not in whole]
            assert all(keys[r].num_columns < len(sides[k].columns) for k, r in enumerate(keys) if k in cut)
            if any(keys[r].num_rows for k, r in enumerate(keys) if k in cut):  # (else: no new rows)
                narrow.append(batch_id)
        return found

    monkeypatch.setattr(microbatch.MicroBatch, "_arrow_stats", arrow_stats)
    from sqlflow.runtime.incremental import copies

    matched_of = copies._matched
    kept_copies: list[tuple[int, int]] = []  # (copies asked, copies holding a wanted key)

    def matched(tables, wanted):
        hit = matched_of(tables, wanted)
        kept_copies.append((len(tables), len(tables) if hit is None else len(hit)))
        return hit

    monkeypatch.setattr(copies, "_matched", matched)
    own = own_file_reads(monkeypatch)  # (batch, input) read from the input's own files
    if files > 1:
        plan = dataclasses.replace(plan, sources=tuple(
            dataclasses.replace(b, max_files_per_trigger=1) for b in plan.sources))
    query, fn = start_stream(s.stream, plan, trigger="0.5 seconds")
    try:
        while todo:
            n = rnd.randint(1, 3)
            group, todo = todo[:n], todo[n:]
            for table, rows, schema in group:
                append(spark, table, rows, schema, files)
            query.processAllAvailable()
    finally:
        query.stop()
    monkeypatch.undo()
    assert fn.error is None
    assert len(looked) >= 3 and any(handed < held for held, handed in looked), looked
    # the late and malformed rows' batches were counted on the driver (`_arrow_stats`), and
    # their quarantine rows are the batch plan's too
    quarantined = {b.batch_id for b in fn.reports if b.kind == "batch" and b.quarantined}
    assert quarantined and quarantined <= set(on_driver), (quarantined, on_driver)
    assert bool(narrow) is (files > 1), (narrow, on_driver)
    # batches inside a version read the copies of the batches before them in it, and left
    # out some holding none of their keys (`copies._matched`); the rows are the same below
    assert any(hit < asked for asked, hit in kept_copies) is (files > 1), kept_copies
    # every batch after the first read its new rows from the inputs' own files (`own_files`)
    assert len({b for b, _ in own}) >= len({b.batch_id for b in fn.reports if b.kind == "batch"}) - 1, own
    sink, quarantine = s.truth("attributed")
    assert_same(spark, plan.sink.table, sink)
    assert_same(spark, plan.quarantine, quarantine, drop=("origin",))
