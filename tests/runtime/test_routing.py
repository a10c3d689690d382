"""Routed groups on real Spark and Delta (docs/design.md §2.4, §2.5, §3).

- differential: the same events appended in a random order and random chunks, streamed with
  available-now runs in between and a crash between two targets, leave every target (and the
  quarantine) exactly equal to the batch plan's output;
- the notification fires once per committed hour (a local HTTP server counts POSTs), also
  across restarts, and only for hours the watermark has closed (runs told that more input
  follows, `end_of_input=False`, commit like a continuous query);
- no commit while a target's rows of the hour are not written yet;
- an interval-trigger query (`--trigger 1 second`) keeps running: rows appended while it
  runs reach every target in later micro-batches of the same query, hours are committed when
  the watermark closes them and never at stop, and the targets equal the batch plan;
- a bounded run commits its last open hours at the end of input, once; a later row into such
  an hour marks it dirty instead of committing or notifying again; status lists it, repair
  backfills the group's day and settles it;
- file counts stay within budget; a backfill reads its input once for all targets;
- `sqlflow verify` passes on the group (every target and the quarantine), fires no
  notification and leaves no scratch schema or commit-log row behind.
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
import threading
import time
from collections import Counter
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from helpers import events_sources_yml, make_project, stop_query
from rowdiff import row_diff
from sqlflow.compiler import compile_project
from sqlflow.engine.context import Context
from sqlflow.errors import SqlflowError
from sqlflow.planning.plan import COMMIT_LOG
from sqlflow.runtime.delta import commitlog, deltalog, once
from sqlflow.runtime.delta.compaction import compact
from sqlflow.runtime.routed.routing import DIRTY_REASON, progress_table, run_routed_batch, run_routed_stream
from sqlflow.workflows.verify.outputs import routed_selection

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
UTC = timezone.utc
DAY = datetime(2026, 11, 1, tzinfo=UTC)
LATENESS = timedelta(minutes=10)
SCHEMA = "event_id string, spmid string, event_type string, product string, event_ts timestamp, ingest_ts timestamp"
DEPTS = ("live", "main", "music")


class Hook:
    """A local HTTP receiver counting POSTs per partition, served from a thread."""

    def __init__(self):
        self.posts: Counter = Counter()
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                hook.posts[body["partition"]] += 1
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/ready"

    def close(self):
        self.server.shutdown()


@pytest.fixture
def hook():
    h = Hook()
    yield h
    h.close()


@dataclasses.dataclass
class Setup:
    ods: str
    batch: Context
    stream: Context
    batch_plan: object
    stream_plan: object


@pytest.fixture
def setup(spark, tmp_path, request, hook):
    name = "rt_route_" + request.node.name.removeprefix("test_")[:20].replace("[", "_").strip("]")
    ods, dw_b, dw_s = f"{name}_ods", f"{name}_b", f"{name}_s"
    for db in (ods, dw_b, dw_s):
        spark.sql(f"DROP DATABASE IF EXISTS {db} CASCADE")
    spark.sql(f"DROP TABLE IF EXISTS {commitlog.COMMIT_LOG}")
    spark.sql(f"CREATE DATABASE {ods}")
    spark.createDataFrame([], SCHEMA).write.format("delta").saveAsTable(f"{ods}.events")
    ctxs, plans = [], []
    for schema, mode, url in ((dw_b, "batch", None), (dw_s, "stream", hook.url)):
        routing = {"group": "by_dept", "bytes_per_row": "1kb"}
        notify = f", sqlflow_notify: {{by_dept: {{url: '{url}'}}}}" if url else ""  # the operator's
        root = make_project(
            tmp_path / mode,
            models={f"routed/r_{d}.sql": f"{{{{ route_to(source('ods', 'events'), '{d}', "
                                         f"columns=['event_id', 'spmid', 'event_ts']) }}}}" for d in DEPTS},
            yml={"sources.yml": events_sources_yml(ods)},
            macros={"route.sql": (ROOT / "macros" / "route.sql").read_text()},
            project_yml={"models": {"testproj": {"routed": {
                "+materialized": "streaming_table", "+partition_by": ["dt", "hour", "event_type", "product"],
                "+target_file_size": "3kb", "+max_files_per_partition": 4, "+routing": routing}}}},
            profiles_yml=f"sqlflow:\n  target: local\n  outputs:\n    local: {{type: spark, method: session, host: NA, schema: {schema}{notify}}}\n")
        ctx = Context.with_session(spark, root)
        result = compile_project(root, mode=mode, target=ctx.target)
        result.raise_if_errors()
        ctxs.append(ctx)
        plans.append(result.plans["by_dept"])
    yield Setup(ods, ctxs[0], ctxs[1], plans[0], plans[1])
    for db in (ods, dw_b, dw_s):
        spark.sql(f"DROP DATABASE IF EXISTS {db} CASCADE")


def event(k, dept, ts, ingest, etype="pv", product="app"):
    return (f"e{k}", f"{dept}.page.mod.{k % 3}" if dept else "broken", etype, product, ts, ingest)


def random_events(seed, n=40):
    """Three hours of events over three departments (plus malformed spmids), ingest up to 6
    min early (some future) to 12 min late (some late), tags with NULLs."""
    rnd = random.Random(seed)
    out = []
    for k in range(n):
        ts = DAY + timedelta(hours=10, microseconds=rnd.randrange(3 * 3_600_000_000))
        ingest = ts + timedelta(seconds=rnd.randint(-360, 720))
        dept = rnd.choice(DEPTS + (None,))
        out.append(event(k, dept, ts, ingest, rnd.choice(["pv", "show", None]), rnd.choice(["app", "web"])))
    return out


def append(spark, table, rows):
    spark.createDataFrame(rows, SCHEMA).coalesce(1).write.format("delta").mode("append").saveAsTable(table)


def commits(spark, plan):
    """{(table, hour partition)} with a commit row."""
    tables = [t.sink.table for t in plan.targets]
    return {(r["table"], r["partition"]) for r in commitlog.read(spark).where(
        "kind = 'commit'").collect() if r["table"] in tables}


def expected_closed(rows, closed=True):
    """Hours with clean rows that the ingest frontier of the clean rows has closed (with
    `closed=False`: every hour with clean rows), computed here from the rows themselves
    (docs/design.md §2.1 rules, 2.5 commit rule)."""
    clean = [r for r in rows if r[5] - LATENESS <= r[4] <= r[5] + timedelta(minutes=5)]
    frontier = max(r[5] for r in clean)
    hours = {r[4].replace(minute=0, second=0, microsecond=0) for r in clean
             if r[1] != "broken"}
    return {f"dt={h:%Y-%m-%d}/hour={h:%H}" for h in hours
            if not closed or h + timedelta(hours=1) + LATENESS <= frontier}


def assert_group_equals_the_batch_plan(spark, s):
    """Backfill the group, then every stream target and the quarantine equal the backfill's."""
    list(run_routed_batch(s.batch, s.batch_plan))
    for tb, ts in zip(s.batch_plan.targets, s.stream_plan.targets, strict=False):
        assert spark.table(tb.sink.table).count() > 0
        assert_same(spark, ts.sink.table, tb.sink.table)
    assert_same(spark, s.stream_plan.quarantine, s.batch_plan.quarantine, drop=("origin",))


def assert_same(spark, got, want, drop=()):
    diff = row_diff(spark.table(want).drop(*drop), spark.table(got).drop(*drop))
    assert diff.equal, f"{got}: missing {diff.missing}, unexpected {diff.extra}"


def test_stream_with_a_crash_between_targets_equals_the_batch_plan(spark, setup, hook):
    s, rnd = setup, random.Random(7)
    rows = random_events(7)
    shuffled = rows[:]
    rnd.shuffle(shuffled)
    chunks = []
    while shuffled:  # three chunks (13-16 rows): a first run, the crashed one, one after it
        n = rnd.randint(13, 16)
        chunks.append(shuffled[:n])
        shuffled = shuffled[n:]
    plan = s.stream_plan  # one micro-batch per run: every run is a restart of the query
    crashed = []

    def crash(k, batch_id):
        if k == 1 and not crashed and batch_id >= 1:
            crashed.append(batch_id)
            raise RuntimeError("killed between target 1 and 2")

    runs, reports = 0, []
    while chunks:
        group, chunks = chunks[:1], chunks[1:]
        for chunk in group:
            append(spark, f"{s.ods}.events", chunk)
        try:
            reports += run_routed_stream(s.stream, plan, end_of_input=False, between_targets=crash)
        except SqlflowError as exc:
            assert crashed and "killed between target 1 and 2" in str(exc)
            reports += run_routed_stream(s.stream, plan, end_of_input=False)  # finishes the crashed batch
        runs += 1
    reports += run_routed_stream(s.stream, plan, end_of_input=False)  # a restart with nothing new
    assert crashed and runs >= 3
    assert_group_equals_the_batch_plan(spark, s)
    # quarantined rows by reason, as the service counts them (each batch reported once)
    by_reason: dict[str, int] = {}
    for r in reports:
        assert sum(n for _, n in r.reasons) == r.quarantined
        for reason, n in r.reasons:
            by_reason[reason] = by_reason.get(reason, 0) + n
    assert by_reason and by_reason == {r["reason"]: r["count"] for r in spark.table(
        plan.quarantine).groupBy("reason").count().collect()}
    # commits: exactly the closed hours, for every target; one POST each, across restarts
    want = expected_closed(rows)
    assert want
    stream_tables = [t.sink.table for t in s.stream_plan.targets]
    assert commits(spark, s.stream_plan) == {(t, h) for t in stream_tables for h in want}
    assert dict(hook.posts) == {h: 1 for h in want}
    # the replay skipped targets 0 and 1 through the query's journal, not Delta's txn: no
    # append of this query carries a txn action
    checkpoint = s.stream.project_dir / (plan.checkpoint or f".sqlflow/checkpoints/route__{plan.model}")
    assert once.Journal.open(checkpoint, 99).start == 0
    query = json.loads((checkpoint / "metadata").read_text().splitlines()[0])["id"]
    app = f"{plan.model}@{query}"
    for table in [*stream_tables, plan.quarantine, COMMIT_LOG, progress_table(plan)]:
        if not spark.catalog.tableExists(table):
            continue
        location = deltalog.describe(spark, table).location
        versions = list(range(deltalog.latest_version(spark, table, location) + 1))
        txns = [a["txn"] for _, a in deltalog.commit_actions(spark, location, versions)
                if a.get("txn", {}).get("appId", "").startswith(app)]
        assert txns == [], table


def test_no_commit_while_a_target_of_the_hour_is_unwritten(spark, setup, hook, tmp_path):
    s = setup
    plan = s.stream_plan
    live = [t.model for t in plan.targets].index("r_live")
    at = lambda h, m: DAY + timedelta(hours=h, minutes=m)  # noqa: E731
    append(spark, f"{s.ods}.events", [event(1, "live", at(10, 5), at(10, 6)),
                                      event(2, "music", at(10, 50), at(10, 51))])
    run_routed_stream(s.stream, plan, end_of_input=False)
    assert commits(spark, plan) == set() and not hook.posts  # watermark 10:51 < 11:10
    # the watermark passes 11:10 in this batch, which also brings a last row of 10h for
    # every target; the process dies after the first target
    append(spark, f"{s.ods}.events", [event(3, "live", at(10, 59), at(11, 8)),
                                      event(4, "main", at(10, 58), at(11, 9)),
                                      event(5, "music", at(11, 20), at(11, 21))])

    def die(k, batch_id):
        if k == 0:
            raise RuntimeError("killed after the first target")

    with pytest.raises(SqlflowError, match="killed after the first target"):
        run_routed_stream(s.stream, plan, end_of_input=False, between_targets=die)
    assert commits(spark, plan) == set() and not hook.posts
    assert not (Path(spark.sql(f"DESCRIBE DETAIL {plan.targets[live].sink.table}").collect()[0]["location"]
                     .removeprefix("file:")) / "dt=2026-11-01" / "hour=10" / "_SUCCESS").exists()
    run_routed_stream(s.stream, plan, end_of_input=False)
    tables = [t.sink.table for t in plan.targets]
    assert commits(spark, plan) == {(t, "dt=2026-11-01/hour=10") for t in tables}
    assert dict(hook.posts) == {"dt=2026-11-01/hour=10": 1}
    for t in plan.targets:
        location = spark.sql(f"DESCRIBE DETAIL {t.sink.table}").collect()[0]["location"].removeprefix("file:")
        assert (Path(location) / "dt=2026-11-01" / "hour=10" / "_SUCCESS").exists()
    got = {r["event_id"] for r in spark.table(plan.targets[live].sink.table).collect()}
    assert got == {"e1", "e3"}
    append(spark, f"{s.ods}.events", [event(6, "music", at(11, 30), at(11, 31))])
    run_routed_stream(s.stream, plan, end_of_input=False)  # restart: hour 11 stays open, no second notification
    assert dict(hook.posts) == {"dt=2026-11-01/hour=10": 1}
    # compaction rewrites committed partitions only: live's hour 10 (two files, one per
    # batch) becomes one file; music's open hour 11 keeps its two files
    live_t, music_t = (plan.targets[[t.model for t in plan.targets].index(m)].sink.table
                       for m in ("r_live", "r_music"))
    assert files_of(spark, live_t, "10") == 2 and files_of(spark, music_t, "11") == 2
    done = compact(spark, live_t)
    assert (done.partitions, done.files_removed, done.files_added) == (1, 2, 1)
    compact(spark, music_t)
    assert files_of(spark, live_t, "10") == 1 and files_of(spark, music_t, "11") == 2
    assert {r["event_id"] for r in spark.table(live_t).collect()} == {"e1", "e3"}


def test_an_interval_query_routes_rows_appended_while_it_runs_and_commits_on_the_watermark(
        spark, setup, hook):
    s, rows = setup, random_events(11)
    first, second = rows[:20], rows[20:]
    append(spark, f"{s.ods}.events", first)
    reports, results, errors = [], [], []

    def run():  # as `sqlflow run --mode stream --trigger "1 second"` runs a group: until stopped
        try:
            results.append(run_routed_stream(s.stream, s.stream_plan, trigger="1 second",
                                             on_batch=reports.append))
        except BaseException as exc:  # noqa: BLE001 - shown by the assert below
            errors.append(exc)

    def wait_for(n_rows):
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not errors and sum(r.rows_in for r in reports) < n_rows:
            time.sleep(0.5)
        assert not errors and sum(r.rows_in for r in reports) == n_rows, (errors, reports)

    thread = threading.Thread(target=run)
    thread.start()
    try:
        wait_for(len(first))
        append(spark, f"{s.ods}.events", second)  # while the query runs
        wait_for(len(rows))
    finally:
        stop_query(spark, f"sqlflow_route_{s.stream_plan.model}", thread)
    assert not errors and results, errors
    batches = [r.batch_id for r in results[0]]
    assert len(batches) >= 2 and all(r.kind == "batch" for r in results[0])  # no end-of-input commit
    assert_group_equals_the_batch_plan(spark, s)
    # committed: exactly the hours the watermark of all the rows closed, each notified once
    want = expected_closed(rows)
    assert want and want < expected_closed(rows, closed=False)  # an hour written stays open
    stream_tables = [t.sink.table for t in s.stream_plan.targets]
    assert commits(spark, s.stream_plan) == {(t, h) for t in stream_tables for h in want}
    assert dict(hook.posts) == {h: 1 for h in want}


def files_of(spark, table, hour):
    return spark.table(table).where(f"hour = '{hour}'").selectExpr(
        "input_file_name() AS f").distinct().count()


def test_backfill_reads_once_stays_in_budget_and_commits_what_it_wrote(spark, setup):
    s = setup
    rows = [event(k, DEPTS[k % 2], DAY + timedelta(hours=10 + k % 2, seconds=k),
                  DAY + timedelta(hours=10 + k % 2, seconds=k + 1), "pv" if k % 5 else "show")
            for k in range(80)]
    append(spark, f"{s.ods}.events", rows)
    plans = []
    results = list(run_routed_batch(s.batch, s.batch_plan,
                                    inspect=lambda m, df: plans.append(df._jdf.queryExecution()
                                                                       .executedPlan().toString())))
    assert [r.model for r in results] == [t.model for t in s.batch_plan.targets]
    assert len(plans) == 3
    for text in plans:  # every target reads the cached input, none scans the Delta table
        above_cache = text.split("InMemoryRelation", 1)[0]
        assert "InMemoryTableScan" in above_cache and "FileScan" not in above_cache, text
        # 80 input rows: planned without adaptive execution, no stage code generated (`*(n)`)
        assert "AdaptiveSparkPlan" not in text and "*(" not in text, text
    report = results[-1].route
    # each target's seconds are its own: the run summary's total adds them up (they were the
    # time since the group began, so three targets counted the first one's three times)
    assert all(r.seconds > 0 for r in results)
    assert sum(r.seconds for r in results) <= report.seconds
    assert {p.spec.split("/event_type")[0] for t in report.targets for p in t.partitions} == {
        "dt=2026-11-01/hour=10", "dt=2026-11-01/hour=11"}
    for t in report.targets:
        table = spark.table(t.table)
        files = {r["k"]: r["n"] for r in table.selectExpr(
            "concat('dt=', dt, '/hour=', hour, '/event_type=', event_type, '/product=', product) AS k",
            "input_file_name() AS f").groupBy("k").agg(F.countDistinct("f").alias("n")).collect()}
        rows_per = Counter(r["k"] for r in table.selectExpr(
            "concat('dt=', dt, '/hour=', hour, '/event_type=', event_type, '/product=', product) AS k").collect())
        for p in t.partitions:
            cap = min(4, max(1, -(-rows_per[p.spec] * 1024 // (3 * 1024))))  # ceil(bytes / 3kb), at most 4
            assert p.budget == cap and 1 <= files[p.spec] <= p.budget and p.files == files[p.spec], p
    big = [p for t in report.targets for p in t.partitions if p.budget > 1]
    assert big and any(p.files > 1 for p in big)  # a budget above 1 spreads rows over files
    tables = [t.sink.table for t in s.batch_plan.targets]
    assert commits(spark, s.batch_plan) == {
        (t, h) for t in tables for h in ("dt=2026-11-01/hour=10", "dt=2026-11-01/hour=11")}


HOUR10 = "dt=2026-11-01/hour=10"


def test_a_bounded_run_commits_its_last_hours_once_and_a_later_row_marks_them_dirty(spark, setup, hook):
    s, plan = setup, setup.stream_plan
    tables = [t.sink.table for t in plan.targets]
    live = plan.targets[[t.model for t in plan.targets].index("r_live")].sink.table
    at = lambda h, m: DAY + timedelta(hours=h, minutes=m)  # noqa: E731
    append(spark, f"{s.ods}.events", [event(1, "live", at(10, 5), at(10, 6)),
                                      event(2, "music", at(10, 50), at(10, 51))])
    reports = run_routed_stream(s.stream, plan)  # watermark 10:51 < 11:10, but the input ended
    assert [r.kind for r in reports] == ["batch", "flush"] and reports[0].committed == ()
    assert reports[-1].committed == (HOUR10,) and reports[-1].notified == (HOUR10,)
    assert commits(spark, plan) == {(t, HOUR10) for t in tables}
    assert dict(hook.posts) == {HOUR10: 1}
    run_routed_stream(s.stream, plan)  # nothing new: nothing committed or notified again
    commit_rows = lambda: commitlog.read(spark).where(  # noqa: E731
        F.col("table").isin(tables) & (F.col("kind") == "commit")).count()
    assert commit_rows() == 3 and dict(hook.posts) == {HOUR10: 1}
    # a clean row of hour 10 (10:50, ingested 10:55: not late by its own times) in a later run
    append(spark, f"{s.ods}.events", [event(3, "live", at(10, 50), at(10, 55))])
    reports = run_routed_stream(s.stream, plan)
    batch = [r for r in reports if r.kind == "batch"]
    assert len(batch) == 1 and batch[0].dirty == ((HOUR10, DIRTY_REASON),)
    assert f"DIRTY {HOUR10}" in batch[0].line()
    assert {(p.table, p.partition) for p in commitlog.open_partitions(spark, tables) if p.dirty} == {
        (live, HOUR10)}
    assert commit_rows() == 3 and dict(hook.posts) == {HOUR10: 1}
    assert {r["event_id"] for r in spark.table(live).collect()} == {"e1", "e3"}  # written, not lost
    # `sqlflow status` lists it; `sqlflow repair` backfills the group's day and settles it
    from sqlflow.report.status import status_tables
    from sqlflow.runtime.dispatch import repair

    assert status_tables(spark, [plan])[0].row_count == 1
    group = compile_project(s.stream.project_dir, mode="batch", target=s.stream.target).plans["by_dept"]
    (result,) = repair(s.stream, [group])
    assert result.repaired == (HOUR10,) and not result.still_open
    assert not commitlog.open_partitions(spark, tables)
    assert {r["event_id"] for r in spark.table(live).collect()} == {"e1", "e3"}
    assert dict(hook.posts) == {HOUR10: 2}  # a backfill is a new run: the rewritten hour notifies


def test_verify_passes_on_the_routed_group_quietly_and_leaves_nothing_behind(spark, setup, hook):
    from click.testing import CliRunner

    from sqlflow.cli.main import main

    s = setup
    assert routed_selection(s.stream, ["by_dept"]) == routed_selection(s.stream, ["r_main"]) == [
        f"r_{d}" for d in DEPTS]
    append(spark, f"{s.ods}.events", random_events(11, n=30))
    log_rows = commitlog.read(spark).count()
    out = CliRunner().invoke(main, ["--project-dir", str(s.stream.project_dir), "verify",
                                    "--select", "r_main", "--runs", "1", "--seed", "3"])
    assert out.exit_code == 0, out.output
    assert "verify: OK" in out.output and "by_dept run 1: equal" in out.output, out.output
    for name in ("r_live", "r_main", "r_music", "quarantine"):  # each compared, with rows, equal
        assert re.search(rf"{name}\s+dt=\S+\s+([1-9][\d,]*)\s+\1\s+0\s+0", out.output), (name, out.output)
    assert not re.search(r"\bsink\b", out.output)
    assert not hook.posts  # the group's real notification never fired
    assert commitlog.read(spark).count() == log_rows  # no scratch rows left in the log
    assert not [d for d in spark.catalog.listDatabases() if d.name.startswith("sqlflow_verify_")]


def test_poisoned_partition_values_are_data_in_both_modes_and_nothing_leaves_the_warehouse(
        spark, setup, hook, tmp_path):
    """docs/semantics.md "Partition values": tags that look like paths are written escaped as
    Spark escapes them (one level each, inside the table's folder), in stream and batch alike;
    values no directory can hold go to the group's quarantine with a reason; the stream query
    survives them, and the batch plan neither crashes nor differs, row for row."""
    s, plan = setup, setup.stream_plan
    outside = tmp_path / "escaped"
    climb = "../" * 12 + str(outside).lstrip("/")
    at = lambda h, m: DAY + timedelta(hours=h, minutes=m)  # noqa: E731
    rows = [event(1, "live", at(10, 5), at(10, 6), "a/b=c%d", "../../../../tmp/x"),
            event(2, "main", at(10, 7), at(10, 8), "pv", climb),
            event(3, "live", at(10, 9), at(10, 9), "it's", "x" * 300),  # a name over 255 bytes
            event(4, "music", at(10, 10), at(10, 11), "a\x00b", "app"),  # NUL: no directory
            event(5, "live", at(10, 12), at(10, 13), "__HIVE_DEFAULT_PARTITION__", "%2F"),
            event(6, "main", at(10, 30), at(11, 20)), event(7, "music", at(10, 40), at(10, 41)),
            event(8, "live", at(10, 42), at(10, 43), "pv", "%2F")]
    append(spark, f"{s.ods}.events", rows[:3])
    run_routed_stream(s.stream, plan, end_of_input=False)
    append(spark, f"{s.ods}.events", rows[3:])
    reports = run_routed_stream(s.stream, plan)
    assert [r.kind for r in reports] == ["batch", "flush"]
    assert_group_equals_the_batch_plan(spark, s)
    q = {(r["raw"] and json.loads(r["raw"])["event_id"], r["reason"], r["model"])
         for r in spark.table(plan.quarantine).where("reason LIKE '%partition'").collect()}
    assert q == {("e3", "bad_partition", "r_live"), ("e4", "bad_partition", "r_music"),
                 ("e5", "bad_partition", "r_live")}
    live = {r["event_id"]: (r["event_type"], r["product"]) for r in spark.table(
        [t for t in plan.targets if t.model == "r_live"][0].sink.table).collect()}
    assert live == {"e1": ("a/b=c%d", "../../../../tmp/x"), "e8": ("pv", "%2F")}
    assert not outside.exists()
    for t in plan.targets:  # every file is one level per partition column below the table
        root = Path(deltalog.describe(spark, t.sink.table).location.removeprefix("file:"))
        for path in root.rglob("*"):
            rel = path.relative_to(root).parts
            if path.is_file() and rel[0] != "_delta_log" and not path.name.startswith(("_", ".")):
                assert len(rel) == 5 and [p.split("=")[0] for p in rel[:4]] == list(t.sink.partition_by)
        assert (root / "dt=2026-11-01" / "hour=10" / "_SUCCESS").is_file()
    logged = {r["partition"] for r in commitlog.read(spark).where(
        F.col("table") == [t for t in plan.targets if t.model == "r_live"][0].sink.table).collect()}
    assert "dt=2026-11-01/hour=10/event_type=a%2Fb%3Dc%25d/product=..%2F..%2F..%2F..%2Ftmp%2Fx" in logged
    assert dict(hook.posts) == {"dt=2026-11-01/hour=10": 1}


def test_a_crash_between_targets_with_the_journal_lost_writes_no_target_twice(spark, setup, hook):
    """docs/semantics.md "Exactly once, when the checkpoint is damaged": the restart rebuilds
    the lost `sqlflow_once/` journal from the markers in the targets, so the targets written
    before the crash skip the replayed batch."""
    s, plan = setup, setup.stream_plan
    rows = random_events(5)
    append(spark, f"{s.ods}.events", rows[:20])
    run_routed_stream(s.stream, plan, end_of_input=False)
    append(spark, f"{s.ods}.events", rows[20:])

    def die(k, batch_id):
        if k == 1:
            raise RuntimeError("killed between target 1 and 2")

    with pytest.raises(SqlflowError, match="killed between target 1 and 2"):
        run_routed_stream(s.stream, plan, end_of_input=False, between_targets=die)
    checkpoint = s.stream.project_dir / (plan.checkpoint or f".sqlflow/checkpoints/route__{plan.model}")
    import shutil
    shutil.rmtree(checkpoint / once.FOLDER)
    reports = run_routed_stream(s.stream, plan, end_of_input=False)
    assert [[t.skipped for t in r.targets] for r in reports] == [[True, True, False]]
    assert_group_equals_the_batch_plan(spark, s)
