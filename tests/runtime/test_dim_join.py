"""Dimension joins with fallback partitions (docs/design.md §2.3) on real Spark and Delta: the chosen
partition at exactly `max_fallback` days and one beyond, readiness from the commit log, from
`sqlflow mark-ready` and from `_SUCCESS` markers, provisional stream partitions and their
repair, a dimension rewritten while a stream runs, and the demo model streamed against its
backfill."""

from __future__ import annotations

import dataclasses
import json
import random
import re
import threading
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

import pytest
from click.testing import CliRunner
from pyspark.sql import functions as F

from helpers import make_project
from runtime.adkit import assert_same, call_counter, profiles
from sqlflow.cli.main import main
from sqlflow.compiler import compile_project
from sqlflow.engine.context import Context
from sqlflow.runtime.batch import run_batch
from sqlflow.runtime.delta import commitlog as C
from sqlflow.runtime.delta.deltalog import latest_version
from sqlflow.runtime.delta.markers import mark_ready, table_location
from sqlflow.runtime.dispatch import run_stream

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
UTC = timezone.utc
EV_SCHEMA = "event_id string, user_id bigint, event_ts timestamp, ingest_ts timestamp, dt string"
DIM_SCHEMA = "user_id bigint, vip bigint, dt string"
QUARANTINE = ("model", "input", "reason", "raw", "dt")


def model(kind):
    return f"""{{{{ config(materialized='streaming_table', partition_by=['dt']) }}}}
select e.event_id, e.user_id, e.event_ts, u.vip, u.dt as user_dt,
       date_format(e.event_ts, 'yyyy-MM-dd') as dt
from {{{{ source('ods', 'ev') }}}} as e
{{{{ dim_join('{kind}', source('dim', 'dim_user'), 'u', 'e', keys=['user_id'],
             fact_date='to_date(e.event_ts)', partition_column='dt', max_fallback=1) }}}}
"""


def sources(ods, dim):
    return f"""\
version: 2
sources:
  - name: ods
    schema: {ods}
    tables:
      - name: ev
        meta:
          sqlflow: {{event_time: event_ts, ingest_time: ingest_ts, allowed_lateness: 10 minutes, future_tolerance: 5 minutes}}
  - name: dim
    schema: {dim}
    tables:
      - name: dim_user
        meta:
          sqlflow: {{partition_column: dt, ready_marker: _SUCCESS}}
"""


MACROS = {name: (ROOT / "macros" / name).read_text() for name in ("dim_join.sql", "interval_join.sql")}


def ts(day, hh=12, mm=0):
    return datetime(2026, 11, day, hh, mm, tzinfo=UTC)


def ev(eid, user, day, hh=12, mm=0):
    t = ts(day, hh, mm)
    return (eid, user, t, t, t.strftime("%Y-%m-%d"))


@dataclasses.dataclass
class Setup:
    name: str
    ods: str
    dim: str
    contexts: dict
    plans: dict  # (mode, model) -> plan

    @property
    def dim_table(self):
        return f"{self.dim}.dim_user"


@pytest.fixture
def setup(spark, tmp_path, request):
    name = "rt_dim_" + re.sub(r"\W", "_", request.node.name.removeprefix("test_"))[-24:]
    ods, dim = f"{name}_ods", f"{name}_dim"
    schemas = {"batch": f"{name}_b", "stream": f"{name}_s", "fresh": f"{name}_f"}
    dbs = (ods, dim, *schemas.values())
    for db in dbs:
        spark.sql(f"DROP DATABASE IF EXISTS {db} CASCADE")
    spark.sql(f"CREATE DATABASE {ods}")
    spark.sql(f"CREATE DATABASE {dim}")
    spark.createDataFrame([], EV_SCHEMA).write.format("delta").saveAsTable(f"{ods}.ev")
    spark.createDataFrame([], DIM_SCHEMA).write.format("delta").partitionBy("dt").saveAsTable(f"{dim}.dim_user")
    contexts, plans = {}, {}
    for label, schema in schemas.items():
        mode = "stream" if label == "stream" else "batch"
        root = make_project(tmp_path / label, models={"inner.sql": model("inner"), "left.sql": model("left")},
                            yml={"sources.yml": sources(ods, dim)}, macros=MACROS,
                            profiles_yml=profiles(schema))
        ctx = Context.with_session(spark, root)
        result = compile_project(root, mode=mode, target=ctx.target)
        result.raise_if_errors()
        contexts[label] = ctx
        for m, plan in result.plans.items():
            plans[(label, m)] = plan
    yield Setup(name, ods, dim, contexts, plans)
    for db in dbs:
        spark.sql(f"DROP DATABASE IF EXISTS {db} CASCADE")


def add_events(spark, s, rows):
    spark.createDataFrame(rows, EV_SCHEMA).coalesce(1).write.format("delta").mode("append").saveAsTable(f"{s.ods}.ev")


def write_dim_day(spark, s, day, users=(1, 2, 3), tag=None):
    """dim_user for 2026-11-<day>: vip = day * 10 + user (or `tag`), replacing that day."""
    dt = f"2026-11-{day:02d}"
    rows = spark.createDataFrame([(u, tag if tag is not None else day * 10 + u, dt) for u in users], DIM_SCHEMA)
    rows.coalesce(1).write.format("delta").mode("overwrite").option("replaceWhere", f"dt = '{dt}'") \
        .saveAsTable(s.dim_table)


def commit(spark, s, day):
    C.append(spark, [C.Entry(s.dim_table, f"dt=2026-11-{day:02d}", "commit", "manual")])


def rows_of(spark, table, *cols):
    return sorted(tuple(r) for r in spark.table(table).select(*cols).collect())


def entries(spark, table):
    log = C.read(spark).where(F.col("table") == table.lower())
    return log.where(F.col("kind") == "write").orderBy("committed_at").collect()


# --- fallback depth -----------------------------------------------------------------------------

def test_fallback_exactly_max_fallback_and_one_beyond(spark, setup):
    """Only 11-01 is ready (11-02 and 11-03 are written, not ready); max_fallback = 1: an
    event of 11-02 joins 11-01 (depth 1), one of 11-03 has none (depth 2): inner quarantines
    it as dim_missing, left pads it. A key absent from p* is an ordinary (non-)match."""
    s = setup
    for day in (1, 2, 3):
        write_dim_day(spark, s, day)
    commit(spark, s, 1)
    add_events(spark, s, [ev("a", 1, 1), ev("b", 1, 2), ev("c", 1, 3), ev("d", 9, 2)])
    inner = run_batch(s.contexts["batch"], s.plans[("batch", "inner")])
    left = run_batch(s.contexts["batch"], s.plans[("batch", "left")])
    cols = ("event_id", "vip", "user_dt", "dt")
    assert rows_of(spark, inner.sink.table, *cols) == [
        ("a", 11, "2026-11-01", "2026-11-01"), ("b", 11, "2026-11-01", "2026-11-02")]
    assert rows_of(spark, left.sink.table, *cols) == [
        ("a", 11, "2026-11-01", "2026-11-01"), ("b", 11, "2026-11-01", "2026-11-02"),
        ("c", None, None, "2026-11-03"), ("d", None, None, "2026-11-02")]
    q = spark.table(inner.quarantine.table).collect()
    assert [(r["reason"], r["input"], json.loads(r["raw"])["event_id"], r["dt"]) for r in q] == [
        ("dim_missing", s.dim_table, "c", "2026-11-03")]
    assert inner.quarantined_by_reason()["dim_missing"] == 1
    assert not spark.table(left.quarantine.table).where("reason = 'dim_missing'").count()
    # the commit log: per output partition, rows per chosen partition, depth, dim_missing
    got = {r["partition"]: (r["rows"], r["provisional"], json.loads(r["dim_partitions"] or "{}"))
           for r in entries(spark, inner.sink.table)}
    assert got == {
        "dt=2026-11-01": (1, False, {s.dim_table: {"partitions": {"2026-11-01": 1}, "fallback_days": 0, "dim_missing": 0}}),
        "dt=2026-11-02": (1, True, {s.dim_table: {"partitions": {"2026-11-01": 1}, "fallback_days": 1, "dim_missing": 0}}),
        "dt=2026-11-03": (0, True, {s.dim_table: {"partitions": {}, "fallback_days": 0, "dim_missing": 1}}),
    }
    assert {(u.partition, u.fallback_days, u.dim_missing) for u in inner.dims} == {
        ("dt=2026-11-01", 0, 0), ("dt=2026-11-02", 1, 0), ("dt=2026-11-03", 0, 1)}


COUNTER = "sqlflow_test_dim_counted_dt"


@pytest.mark.parametrize("mode", ["stream", "batch"])
def test_the_commit_log_counts_rows_per_dim_partition_without_running_the_model_again(
        spark, setup, tmp_path, mode):
    """The commit log's rows per chosen dimension partition are counted from the written rows
    while they are cached: the model runs once per output row, in a micro-batch and in a
    backfill (issue 23: the dimension join's fixed cost). Counted by a Python function around
    the partition column, which appends a byte to a file each time Spark runs it."""
    s = setup
    calls = call_counter(spark, tmp_path, COUNTER, "string")
    sql = model("left").replace("date_format(e.event_ts, 'yyyy-MM-dd') as dt",
                                f"{COUNTER}(date_format(e.event_ts, 'yyyy-MM-dd')) as dt")
    assert COUNTER in sql
    root = make_project(tmp_path / "counted", models={"counted.sql": sql},
                        yml={"sources.yml": sources(s.ods, s.dim)}, macros=MACROS,
                        profiles_yml=profiles(f"{s.name}_{'s' if mode == 'stream' else 'b'}"))
    ctx = Context.with_session(spark, root)
    plan = compile_project(root, mode=mode, target=ctx.target).plans["counted"]
    write_dim_day(spark, s, 1)
    commit(spark, s, 1)
    add_events(spark, s, [ev("a", 1, 1), ev("b", 2, 1), ev("c", 9, 2)])
    if mode == "stream":
        assert [b.batch_id for b in run_stream(ctx, plan).batches] == [0]
    else:
        run_batch(ctx, plan)
    assert calls.stat().st_size == 3  # once per output row: not again for the commit log
    got = {r["partition"]: json.loads(r["dim_partitions"])[s.dim_table]["partitions"]
           for r in entries(spark, plan.sink.table)}
    assert got == {"dt=2026-11-01": {"2026-11-01": 2}, "dt=2026-11-02": {"none": 1}}


def test_mark_ready_and_success_markers_make_partitions_ready(spark, setup):
    s = setup
    for day in (1, 2, 3):
        write_dim_day(spark, s, day)
    commit(spark, s, 1)
    add_events(spark, s, [ev("a", 1, 1), ev("b", 1, 2), ev("c", 1, 3)])
    ctx, plan = s.contexts["batch"], s.plans[("batch", "inner")]
    mark_ready(spark, table_location(spark, s.dim_table), "dt", "2026-11-02")
    run_batch(ctx, plan)
    assert rows_of(spark, plan.sink.table, "event_id", "vip", "user_dt") == [
        ("a", 11, "2026-11-01"), ("b", 21, "2026-11-02"), ("c", 21, "2026-11-02")]
    marker_rows = C.read(spark).where(f"`table` = '{s.dim_table}' AND mode = 'marker'").collect()
    assert [(r["partition"], r["kind"]) for r in marker_rows] == [("dt=2026-11-02", "commit")]
    args = ["--project-dir", str(ctx.project_dir)]
    res = CliRunner().invoke(main, args + ["mark-ready", s.dim_table, "--partition", "dt=2026-11-03"])
    assert res.exit_code == 0, res.output
    run_batch(ctx, plan)
    assert rows_of(spark, plan.sink.table, "event_id", "vip", "user_dt") == [
        ("a", 11, "2026-11-01"), ("b", 21, "2026-11-02"), ("c", 31, "2026-11-03")]
    assert C.ready_partitions(spark, s.dim_table) == {"dt=2026-11-01", "dt=2026-11-02", "dt=2026-11-03"}
    bad = CliRunner().invoke(main, args + ["mark-ready", f"{s.dim}.nope", "--partition", "dt=2026-11-03"])
    assert bad.exit_code == 1 and "does not exist" in bad.output
    bad = CliRunner().invoke(main, args + ["mark-ready", s.dim_table, "--partition", "2026-11-03"])
    assert bad.exit_code == 1 and "not a partition like" in bad.output


# --- provisional -> repair ----------------------------------------------------------------------

def test_a_day_made_ready_during_the_stream_is_provisional_until_repaired(spark, setup):
    s = setup
    for day in (1, 2, 3):
        write_dim_day(spark, s, day)
    commit(spark, s, 1)
    sctx, plan = s.contexts["stream"], s.plans[("stream", "inner")]
    add_events(spark, s, [ev("a", 1, 1), ev("b", 1, 2), ev("c", 2, 2, 13), ev("x", 3, 3), ev("y", 1, 4)])
    run_stream(sctx, plan)
    commit(spark, s, 2)  # 11-02 becomes ready while the stream runs
    add_events(spark, s, [ev("d", 3, 2, 14), ev("e", 1, 1, 15)])
    run_stream(sctx, plan)
    assert rows_of(spark, plan.sink.table, "event_id", "user_dt") == [
        ("a", "2026-11-01"), ("b", "2026-11-01"), ("c", "2026-11-01"), ("d", "2026-11-02"),
        ("e", "2026-11-01")]
    args = ["--project-dir", str(sctx.project_dir)]
    status = CliRunner().invoke(main, args + ["status", "--select", "inner", "--commit-log"])
    assert status.exit_code == 0, status.output
    assert "dt=2026-11-02" in status.output and "provisional" in status.output
    opened = {p.partition: p.provisional for p in C.open_partitions(spark, [plan.sink.table])}
    assert opened == {"dt=2026-11-02": True, "dt=2026-11-03": True, "dt=2026-11-04": True}
    res = CliRunner().invoke(main, args + ["repair", "--select", "inner"])
    assert res.exit_code == 0, res.output
    assert "3 open partition(s), 1 repaired" in res.output and "dt=2026-11-03" in res.output
    # equal to a fresh backfill, row for row; 11-03 (falls back to 11-02) and 11-04 (no ready
    # day within max_fallback: quarantined) stay provisional
    fresh = run_batch(s.contexts["fresh"], s.plans[("fresh", "inner")])
    assert_same(spark, plan.sink.table, fresh.sink.table)
    assert_same(spark, plan.quarantine, fresh.quarantine.table, drop=("origin",))
    assert [p.partition for p in C.open_partitions(spark, [plan.sink.table])] == [
        "dt=2026-11-03", "dt=2026-11-04"]
    kinds = C.read(spark).where(f"`table` = '{plan.sink.table}' AND kind = 'repair'").collect()
    assert [r["partition"] for r in kinds] == ["dt=2026-11-02"]
    again = CliRunner().invoke(main, args + ["repair", "--select", "inner"])  # idempotent
    assert again.exit_code == 0, again.output
    assert_same(spark, plan.sink.table, fresh.sink.table)


# --- a dimension rewritten while the stream runs ------------------------------------------------

def test_a_concurrent_dim_rewrite_is_never_half_visible_in_a_micro_batch(spark, setup):
    """A writer rewrites dim 11-01 in a loop, tagging every row with the Delta version it
    creates. Each micro-batch's output must carry one tag, the version its commit-log row
    says it pinned."""
    s = setup
    write_dim_day(spark, s, 1, users=tuple(range(1, 7)), tag=1)  # version 1 (0: the empty table)
    commit(spark, s, 1)
    plan = s.plans[("stream", "left")]
    plan = dataclasses.replace(plan, sources=tuple(
        dataclasses.replace(b, max_files_per_trigger=1) for b in plan.sources))
    for k in range(5):
        add_events(spark, s, [ev(f"e{k}_{u}", u, 1, 10 + k, u) for u in range(1, 7)])
    stop = threading.Event()

    def rewrite():
        while not stop.is_set():
            version = latest_version(spark, s.dim_table)
            write_dim_day(spark, s, 1, users=tuple(range(1, 7)), tag=version + 1)

    versions = {}
    writer = threading.Thread(target=rewrite, daemon=True)
    writer.start()
    try:
        run_stream(s.contexts["stream"], plan,
                   after_sink=lambda b: versions.__setitem__(b, latest_version(spark, plan.sink.table)))
    finally:
        stop.set()
        writer.join()
    assert len(versions) == 5
    logged = {r["batch_id"]: json.loads(r["inputs"])[s.dim_table] for r in entries(spark, plan.sink.table)}
    tags = set()
    for batch_id, version in sorted(versions.items()):
        new = spark.sql(f"SELECT * FROM {plan.sink.table} VERSION AS OF {version}").exceptAll(
            spark.sql(f"SELECT * FROM {plan.sink.table} VERSION AS OF {version - 1}"))
        got = {r["vip"] for r in new.collect()}
        assert got == {logged[batch_id]}, f"batch {batch_id}: tags {got}, pinned {logged[batch_id]}"
        tags |= got
    assert spark.table(plan.sink.table).count() == 30


# --- the demo model: stream equals batch ----------------------------------------------------------

DEMO_SOURCES = """\
version: 2
sources:
  - name: ods
    schema: {ods}
    tables:
      - name: ods_user_events
        meta:
          sqlflow: {{event_time: event_ts, ingest_time: ingest_ts, allowed_lateness: 10 minutes, future_tolerance: 5 minutes}}
  - name: dim
    schema: {dim}
    tables:
      - name: dim_ad
        meta:
          sqlflow: {{partition_column: dt, ready_marker: _SUCCESS}}
      - name: dim_user
        meta:
          sqlflow: {{partition_column: dt, ready_marker: _SUCCESS}}
"""
ODS_SCHEMA = ("event_id string, user_id bigint, spmid string, event_type string, product string, "
              "event_ts timestamp, ingest_ts timestamp, payload string, dt string, hour string")
USER_SCHEMA = ("user_id bigint, age_band string, gender string, city string, vip_level int, "
               "register_date date, dt string")
AD_SCHEMA = ("ad_id bigint, advertiser_id bigint, campaign_id bigint, ad_category string, "
             "creative_type string, bid_cpm decimal(10,2), status string, dt string")


def demo_rows(seed, n=30):
    rnd = random.Random(seed)
    out = []
    for k in range(n):
        t = ts(1) + timedelta(seconds=rnd.randrange(3 * 86_400) - 43_200)
        ingest = t + timedelta(seconds=rnd.randint(-60, 900))  # some late (> 10 min)
        spmid = rnd.choice(["ad.feed.banner.{}", "main.home.feed.{}", "live.room.gift.{}"]).format(rnd.randint(1, 4))
        out.append((f"ev{k}", rnd.choice([1, 2, 3, None]), spmid, "show", "app", t, ingest, "{}",
                    ingest.strftime("%Y-%m-%d"), ingest.strftime("%H")))
    return out


@dataclasses.dataclass
class Demo:
    ods: str
    dim: str
    ctxs: dict  # mode -> Context
    plans: dict  # mode -> {model: plan}


@pytest.fixture
def demo(spark, tmp_path):
    """The demo's staging and enriched models over tiny dimensions: dim_user 10-31 and 11-01
    ready (11-02 written, not ready), dim_ad 11-01 ready by marker (11-02 not ready)."""
    name = "rt_dim_demo"
    ods, dim, dw_b, dw_s = f"{name}_ods", f"{name}_dim", f"{name}_b", f"{name}_s"
    for db in (ods, dim, dw_b, dw_s):
        spark.sql(f"DROP DATABASE IF EXISTS {db} CASCADE")
    spark.sql(f"CREATE DATABASE {ods}")
    spark.sql(f"CREATE DATABASE {dim}")
    spark.createDataFrame([], ODS_SCHEMA).write.format("delta").saveAsTable(f"{ods}.ods_user_events")
    users = [(u, "18-24", "f", "wuhan", k * 10 + u, datetime(2026, 1, 1).date(), dt)
             for k, dt in enumerate(("2026-10-31", "2026-11-01", "2026-11-02")) for u in (1, 2)]
    ads = [(a, 10 + a, 100 + a, "game", "video", Decimal(f"{d}.{a}0"), "active", f"2026-11-{d:02d}")
           for d in (1, 2) for a in (1, 2, 3)]
    spark.createDataFrame(users, USER_SCHEMA).write.format("delta").partitionBy("dt").saveAsTable(f"{dim}.dim_user")
    spark.createDataFrame(ads, AD_SCHEMA).write.format("delta").partitionBy("dt").saveAsTable(f"{dim}.dim_ad")
    # dim_user: 10-31 and 11-01 ready (11-02 written but not ready); dim_ad: 11-01 ready by marker
    C.append(spark, [C.Entry(f"{dim}.dim_user", f"dt={d}", "commit", "manual") for d in ("2026-10-31", "2026-11-01")])
    mark_ready(spark, table_location(spark, f"{dim}.dim_ad"), "dt", "2026-11-01")
    models = {"staging/stg_user_events.sql": (ROOT / "models/staging/stg_user_events.sql").read_text(),
              "dwd/dwd_user_events_enriched.sql": (ROOT / "models/dwd/dwd_user_events_enriched.sql").read_text()}
    ctxs, plans = {}, {}
    for mode, schema in (("batch", dw_b), ("stream", dw_s)):
        root = make_project(tmp_path / mode, models=models, macros=MACROS, profiles_yml=profiles(schema),
                            yml={"sources.yml": DEMO_SOURCES.format(ods=ods, dim=dim)})
        ctxs[mode] = Context.with_session(spark, root)
        result = compile_project(root, mode=mode, target=ctxs[mode].target)
        result.raise_if_errors()
        plans[mode] = result.plans
    yield Demo(ods, dim, ctxs, plans)
    for db in (ods, dim, dw_b, dw_s):
        spark.sql(f"DROP DATABASE IF EXISTS {db} CASCADE")


@pytest.mark.parametrize("seed", [7])
def test_enriched_demo_model_streamed_in_random_splits_equals_the_backfill(spark, demo, seed):
    """Two streaming models chained (staging -> enriched), the input in a random order cut in
    two commits, a bounded stream run of both after each (a restart of both queries); random
    orders and splits of the enriched model alone are `sqlflow verify`'s (the test below)."""
    rnd = random.Random(seed)
    ods, ctxs, plans = demo.ods, demo.ctxs, demo.plans
    rows = demo_rows(seed)
    rnd.shuffle(rows)
    stream_plans = [plans["stream"][m] for m in ("stg_user_events", "dwd_user_events_enriched")]
    cut = rnd.randrange(1, len(rows))
    for chunk in (rows[:cut], rows[cut:]):
        spark.createDataFrame(chunk, ODS_SCHEMA).coalesce(1).write.format("delta").mode("append") \
            .saveAsTable(f"{ods}.ods_user_events")
        for p in stream_plans:
            run_stream(ctxs["stream"], p)
    for m in ("stg_user_events", "dwd_user_events_enriched"):
        run_batch(ctxs["batch"], plans["batch"][m])
    enriched_s = plans["stream"]["dwd_user_events_enriched"]
    enriched_b = plans["batch"]["dwd_user_events_enriched"]
    assert_same(spark, enriched_s.sink.table, enriched_b.sink.table)
    assert_same(spark, enriched_s.quarantine, enriched_b.quarantine, drop=("origin",))
    got = spark.table(enriched_b.sink.table)
    assert got.where("user_dt < dt").count() > 0  # some events fell back
    assert got.where("ad_dt IS NOT NULL").count() > 0
    assert spark.table(enriched_b.quarantine).where("reason = 'dim_missing'").count() > 0


def test_verify_passes_on_the_enriched_model_and_would_catch_a_difference(spark, demo):
    """Issue 5: `sqlflow verify` on `dwd_user_events_enriched` with a fixed readiness snapshot
    (verify writes no dimension and no READY row; the stream pins both per micro-batch)."""
    from sqlflow.runtime.snapshot import sync_markers
    from sqlflow.workflows.verify.run import compare, drop_scratch, verify_project

    ctx = demo.ctxs["batch"]
    spark.createDataFrame(demo_rows(11), ODS_SCHEMA).coalesce(1).write.format("delta").mode("append") \
        .saveAsTable(f"{demo.ods}.ods_user_events")
    run_batch(ctx, demo.plans["batch"]["stg_user_events"])  # the enriched model's stream input
    dims = [f"{demo.dim}.dim_user", f"{demo.dim}.dim_ad"]
    sync_markers(spark, dims[1], "dt", "_SUCCESS")  # as the first run would (a commit row)
    ready = {d: C.ready_partitions(spark, d) for d in dims}
    scratch_rows = lambda: C.read(spark).where(F.col("table").startswith(report.scratch + ".")).count()  # noqa: E731
    (report,) = verify_project(ctx, select=["dwd_user_events_enriched"], runs=1, seed=5, keep=True)
    try:
        (run,) = report.runs
        assert report.ok, [p for p in run.partitions if not p.ok] or run.problems
        assert {p.table for p in run.partitions} == {"sink", "quarantine"}
        assert report.batch_rows > 0 and report.batch_quarantined > 0  # dim_missing and late rows
        assert spark.table(report.batch_table).where("user_dt < dt").count() > 0  # fell back
        assert {d: C.ready_partitions(spark, d) for d in dims} == ready
        assert scratch_rows() > 0  # the runtime logged its scratch writes (provisional ones too)
        # the comparison sees one lost row, in its partition
        victim = spark.table(run.sink_table).orderBy("event_id").first()
        spark.sql(f"DELETE FROM {run.sink_table} WHERE event_id = '{victim['event_id']}'")
        diffs, problems = compare(spark, report.batch_table, run.sink_table, ("dt",), table="sink")
        bad = [(p.partition, p.batch_rows - p.stream_rows, p.missing, p.extra) for p in diffs if not p.ok]
        assert not problems and bad == [(f"dt={victim['dt']}", 1, 1, 0)], diffs
    finally:
        drop_scratch(ctx, report.scratch)
    assert scratch_rows() == 0  # its scratch tables' commit-log rows went with it
    assert not [d for d in spark.catalog.listDatabases() if d.name == report.scratch]
