"""The `incremental` stream runtime on real Spark and Delta, differentially: the same input rows
written into fresh Delta source tables in a random order and random chunks (one commit per
chunk), streamed with available-now runs between chunks (several micro-batches, several query
restarts from the same checkpoint), must leave exactly the batch plan's output in the sink and
the batch run's quarantine rows (all but `origin`) in the quarantine table."""

from __future__ import annotations

import dataclasses
import random
import re
import shutil
from datetime import datetime, timedelta, timezone

import pytest

from helpers import ad_sources_yml, make_project
from sqlflow.compiler import compile_project
from sqlflow.context import Context
from sqlflow.errors import SqlflowError
from sqlflow.runtime.batch import run_batch
from sqlflow.runtime.stream import run_stream

pytestmark = pytest.mark.spark

UTC = timezone.utc
DAY1 = datetime(2026, 11, 1, tzinfo=UTC)
HEAD = "{{ config(materialized='streaming_table', partition_by=['dt']) }}\n"
MODELS = {
    "filtered.sql": HEAD + """
SELECT i.req_id, i.ad_id, i.imp_ts, to_date(i.imp_ts) AS dt
FROM {{ source('ods', 'imps') }} AS i
WHERE i.ad_id > 0""",
    "attributed.sql": HEAD + """
SELECT c.req_id, c.click_ts, i.ad_id, i.imp_ts, to_date(c.click_ts) AS dt
FROM {{ source('ods', 'clicks') }} AS c
JOIN {{ source('ods', 'imps') }} AS i
  ON i.req_id = c.req_id AND c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 20 MINUTES""",
    "samples.sql": HEAD + """
SELECT i.req_id, i.imp_ts, c.click_ts, to_date(i.imp_ts) AS dt
FROM {{ source('ods', 'imps') }} AS i
LEFT JOIN {{ source('ods', 'clicks') }} AS c
  ON i.req_id = c.req_id AND c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 20 MINUTES""",
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


def edge_cases():
    """Bounds to the µs and one µs outside, null keys, duplicates, late, future, no time."""
    imps = [
        imp("lower", 1, at(1, 10, 0)), imp("upper", 1, at(1, 11, 0)),
        imp("below", 1, at(1, 12, 0)), imp("above", 1, at(1, 13, 0)),
        imp(None, 2, at(1, 14, 0)),
        imp("dup", 3, at(1, 15, 0)), imp("dup", 3, at(1, 15, 0)),
        imp("late", 4, at(1, 16, 0), at(1, 16, 10, us=1)),  # 10 min + 1 µs late
        imp("in-time", 4, at(1, 17, 0), at(1, 17, 10)),  # exactly 10 min late: kept
        imp("future", 5, at(1, 18, 5, us=1), at(1, 18, 0)),  # 5 min + 1 µs ahead
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
        click("in-time", at(1, 17, 1), at(1, 17, 30)),  # itself 19 min late: quarantined
        click("future", at(1, 18, 6)),
        click("midnight", at(2, 0, 10)),
    ]
    return imps, clicks


def random_rows(seed, n=30):
    rnd = random.Random(seed)
    imps, clicks = [], []
    for k in range(n):
        ts = DAY1 + timedelta(microseconds=rnd.randrange(2 * 86_400_000_000))
        req = f"r{k % 20}"
        imps.append(imp(req, rnd.randrange(-1, 3), ts, ts + timedelta(seconds=rnd.randint(-360, 720))))
        for _ in range(rnd.choice([0, 1, 2])):
            cts = ts + timedelta(microseconds=rnd.randrange(25 * 60_000_000))
            clicks.append(click(req, cts, cts + timedelta(seconds=rnd.randint(-360, 720))))
    return imps, clicks


# --- a project per test: fresh sources, a batch schema and a stream schema ----------------------

def sources_yml(ods):
    return ad_sources_yml(ods)


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
    name = "rt_stream_" + re.sub(r"\W", "_", request.node.name.removeprefix("test_"))[-30:]
    ods, dw_b, dw_s = f"{name}_ods", f"{name}_b", f"{name}_s"
    for db in (ods, dw_b, dw_s):
        spark.sql(f"DROP DATABASE IF EXISTS {db} CASCADE")
    spark.sql(f"CREATE DATABASE {ods}")
    spark.createDataFrame([], IMP_SCHEMA).write.format("delta").saveAsTable(f"{ods}.imps")
    spark.createDataFrame([], CLICK_SCHEMA).write.format("delta").saveAsTable(f"{ods}.clicks")
    contexts, plans = [], []
    for schema, mode in ((dw_b, "batch"), (dw_s, "stream")):
        root = make_project(tmp_path / mode, models=MODELS, yml={"sources.yml": sources_yml(ods)},
                            profiles_yml=profiles(schema))
        ctx = Context.with_session(spark, root)
        result = compile_project(root, mode=mode, target=ctx.target)
        result.raise_if_errors()
        contexts.append(ctx)
        plans.append(result.plans)
    yield Setup(ods, contexts[0], contexts[1], plans[0], plans[1])
    for db in (ods, dw_b, dw_s):
        spark.sql(f"DROP DATABASE IF EXISTS {db} CASCADE")


def append(spark, table, rows, schema):
    spark.createDataFrame(rows, schema).coalesce(1).write.format("delta").mode("append").saveAsTable(table)


def chunks(rnd, rows, table, schema):
    rows = list(rows)
    rnd.shuffle(rows)
    out = []
    while rows:
        n = rnd.randint(max(1, len(rows) // 3), len(rows))
        out.append((table, rows[:n], schema))
        rows = rows[n:]
    return out


def assert_same(spark, got_table, want_table, drop=()):
    got, want = spark.table(got_table).drop(*drop), spark.table(want_table).drop(*drop)
    missing, extra = want.exceptAll(got).collect(), got.exceptAll(want).collect()
    assert (missing, extra) == ([], []), f"{got_table}: missing {missing}, unexpected {extra}"
    assert want.count() > 0


def batch_truth(s: Setup, model):
    run_batch(s.batch, s.batch_plans[model])
    return s.batch_plans[model].sink.table, s.batch_plans[model].quarantine


# --- tests ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", [1, 2])
def test_random_order_and_splits_equal_the_batch_plan(spark, setup, seed):
    s, rnd = setup, random.Random(seed)
    imps, clicks = edge_cases()
    more = random_rows(seed)
    imps, clicks = imps + more[0], clicks + more[1]
    todo = chunks(rnd, imps, f"{s.ods}.imps", IMP_SCHEMA) + chunks(rnd, clicks, f"{s.ods}.clicks", CLICK_SCHEMA)
    rnd.shuffle(todo)
    # one micro-batch per source commit within a run: several batches per run, several runs
    plans = {m: dataclasses.replace(s.stream_plans[m], sources=tuple(
        dataclasses.replace(b, max_files_per_trigger=rnd.choice([1, 2])) for b in s.stream_plans[m].sources))
        for m in ("filtered", "attributed")}
    batches = 0
    while todo:
        n = rnd.randint(4, 6)
        group, todo = todo[:n], todo[n:]
        for table, rows, schema in group:
            append(spark, table, rows, schema)
        for plan in plans.values():
            batches += len(run_stream(s.stream, plan, on_batch=lambda r: print(r.line())).batches)
    assert batches >= 4
    for model in ("filtered", "attributed"):
        sink, quarantine = batch_truth(s, model)
        assert_same(spark, s.stream_plans[model].sink.table, sink)
        assert_same(spark, s.stream_plans[model].quarantine, quarantine, drop=("origin",))


@pytest.mark.parametrize("point", ["sink", "state"])
def test_a_crash_inside_a_micro_batch_is_replayed_exactly_once(spark, setup, point):
    """A crash after the sink write (state not yet appended) or after the state append (Spark
    has not committed the batch): the restart replays batch 1, which must neither duplicate
    sink rows nor state rows (a later batch would then match old rows twice)."""
    s = setup
    imps, clicks = edge_cases()
    plan = s.stream_plans["attributed"]
    append(spark, f"{s.ods}.imps", imps[:7], IMP_SCHEMA)
    append(spark, f"{s.ods}.clicks", clicks[:3], CLICK_SCHEMA)
    assert [b.batch_id for b in run_stream(s.stream, plan).batches] == [0]
    append(spark, f"{s.ods}.imps", imps[7:], IMP_SCHEMA)
    append(spark, f"{s.ods}.clicks", clicks[3:], CLICK_SCHEMA)

    def crash(batch_id):
        raise RuntimeError(f"simulated crash after the {point} write of batch {batch_id}")

    with pytest.raises(SqlflowError, match="simulated crash"):
        run_stream(s.stream, plan, **{f"after_{point}": crash})
    replay = run_stream(s.stream, plan).batches
    assert [(b.batch_id, b.replayed) for b in replay] == [(1, True)]
    # a later batch joins against state written by the replayed batch
    append(spark, f"{s.ods}.clicks", [click("lower", at(1, 10, 5)), click("dup", at(1, 15, 2))], CLICK_SCHEMA)
    assert [b.batch_id for b in run_stream(s.stream, plan).batches] == [2]
    sink, quarantine = batch_truth(s, "attributed")
    assert_same(spark, plan.sink.table, sink)
    assert_same(spark, plan.quarantine, quarantine, drop=("origin",))


def test_cli_runs_a_bounded_stream_and_prints_each_micro_batch(spark, setup):
    from click.testing import CliRunner

    from sqlflow.cli import main

    imps, _ = edge_cases()
    append(spark, f"{setup.ods}.imps", imps, IMP_SCHEMA)
    args = ["--project-dir", str(setup.stream.project_dir), "run", "--mode", "stream", "--select", "filtered"]
    res = CliRunner().invoke(main, args + ["--trigger", "available-now"])
    assert res.exit_code == 0, res.output
    assert "filtered batch 0: in" in res.output and "+13; out 9; quarantined 3" in res.output
    assert "Stream run" in res.output
    again = CliRunner().invoke(main, args + ["--trigger", "available-now"])  # nothing new: no batch
    assert again.exit_code == 0 and "filtered batch" not in again.output
    assert spark.table(setup.stream_plans["filtered"].sink.table).count() == 9
    shutil.rmtree(setup.stream.project_dir / setup.stream_plans["filtered"].sink.checkpoint)
    lost = CliRunner().invoke(main, args + ["--trigger", "available-now"])
    assert lost.exit_code == 1 and "already has rows but its checkpoint" in lost.output


def test_an_interval_trigger_keeps_running_and_picks_up_new_commits(spark, setup):
    from sqlflow.runtime.stream import start

    imps, clicks = edge_cases()
    plan = setup.stream_plans["attributed"]
    query, fn = start(setup.stream, plan, trigger="1 second")
    try:
        append(spark, f"{setup.ods}.imps", imps, IMP_SCHEMA)
        query.processAllAvailable()
        append(spark, f"{setup.ods}.clicks", clicks, CLICK_SCHEMA)
        query.processAllAvailable()
        assert query.isActive
    finally:
        query.stop()
    assert fn.error is None and len(fn.reports) >= 2
    sink, quarantine = batch_truth(setup, "attributed")
    assert_same(spark, plan.sink.table, sink)
    assert_same(spark, plan.quarantine, quarantine, drop=("origin",))
