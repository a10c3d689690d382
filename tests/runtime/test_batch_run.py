"""The batch runtime end to end on real Spark and Delta: a small project (a filter and a left
interval join over two event sources), its output compared row for row, every column, with a
plain-Python reference of the models' semantics over the same input rows."""

from __future__ import annotations

import dataclasses
import random
from datetime import date, timedelta

import pytest
from click.testing import CliRunner

from helpers import ad_sources_yml, make_project
from rowdiff import row_diff
from runtime.adkit import CLICK_SCHEMA, DAY1, IMP_SCHEMA, at, click, imp
from sqlflow.cli.main import main
from sqlflow.compiler import compile_project
from sqlflow.engine.context import Context
from sqlflow.errors import SqlflowError
from sqlflow.runtime import batch, input_rows
from sqlflow.runtime.batch import run_batch
from sqlflow.runtime.session_settings import changed

pytestmark = pytest.mark.spark

ODS, DW = "rt_batch_ods", "rt_batch_dw"
US = timedelta(microseconds=1)
LATENESS, TOLERANCE, WINDOW = timedelta(minutes=10), timedelta(minutes=5), timedelta(minutes=20)

SOURCES = ad_sources_yml(ODS)
HEAD = "{{ config(materialized='streaming_table', partition_by=['dt']) }}\n"
MODELS = {
    "filtered.sql": HEAD + """
SELECT i.req_id, i.ad_id, i.imp_ts, to_date(i.imp_ts) AS dt
FROM {{ source('ods', 'imps') }} AS i
WHERE i.ad_id > 0""",
    "samples.sql": HEAD + """
SELECT i.req_id, i.ad_id, i.imp_ts, c.click_ts, c.click_ts IS NOT NULL AS clicked,
       to_date(i.imp_ts) AS dt
FROM {{ source('ods', 'imps') }} AS i
LEFT JOIN {{ source('ods', 'clicks') }} AS c
  ON i.req_id = c.req_id AND c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 20 MINUTES""",
}
PROFILES = f"""\
sqlflow:
  target: local
  outputs:
    local: {{type: spark, method: session, host: NA, schema: {DW}}}
"""


# --- input rows -----------------------------------------------------------------------------------

def edge_cases():
    """Bounds to the µs, midnight-crossing matches, null keys, duplicates, dirty rows."""
    imps = [
        imp("upper", 1, at(1, 10, 0)),  # clicked exactly at +20 min: a match
        imp("beyond", 1, at(1, 11, 0)),  # clicked 1 µs after +20 min: padded
        imp("midnight", 2, at(1, 23, 55)),  # clicked on day 2: still day 1's sample
        imp("before", 2, at(2, 0, 5)),  # its click came 6 min earlier, on day 1: padded
        imp(None, 3, at(2, 1, 0)),  # null key: never matches, padded
        imp("dup", 4, at(2, 2, 0)), imp("dup", 4, at(2, 2, 0)),  # duplicates: two samples
        imp("late", 5, at(2, 8, 0), at(2, 8, 10, us=1)),  # 10 min + 1 µs late: quarantined
        imp("in-time", 5, at(2, 9, 0), at(2, 9, 10)),  # exactly 10 min late: kept
        imp("future", 6, at(3, 7, 5, us=1), at(3, 7, 0)),  # 5 min + 1 µs ahead: quarantined
        imp("no-time", 6, None, at(3, 8, 0)),  # null event time: quarantined
        imp("zero-ad", 0, at(3, 9, 0)),  # dropped by the filter model only
        imp("day3-end", 7, at(3, 23, 59, 59, 999_999)),
    ]
    clicks = [
        click("upper", at(1, 10, 20)),
        click("beyond", at(1, 11, 20, us=1)),
        click("midnight", at(2, 0, 10)),
        click("before", at(1, 23, 59)),
        click(None, at(2, 1, 5)),
        click("dup", at(2, 2, 1)),
        click("late", at(2, 8, 1)),  # its impression is quarantined: no match
        click("in-time", at(2, 9, 1), at(2, 9, 30)),  # 29 min after its event: late itself
        click("future", at(3, 7, 6), at(3, 7, 6)),
        click("day3-end", at(4, 0, 10)),  # a day-4 click still labels a day-3 impression
    ]
    return imps, clicks


def random_rows(seed: int = 11, n: int = 60):
    """Impressions over three days; clicks 0-25 min after; ingest -6..+12 min from the event."""
    rnd = random.Random(seed)
    imps, clicks = [], []
    for k in range(n):
        ts = DAY1 + timedelta(microseconds=rnd.randrange(3 * 86_400_000_000))
        req = f"r{k % 45}"  # some keys repeat: many-to-many matches
        imps.append(imp(req, rnd.randrange(-1, 4), ts, ts + timedelta(seconds=rnd.randint(-360, 720))))
        for _ in range(rnd.choice([0, 0, 1, 2])):
            cts = ts + timedelta(microseconds=rnd.randrange(25 * 60_000_000))
            clicks.append(click(req, cts, cts + timedelta(seconds=rnd.randint(-360, 720))))
    return imps, clicks


# --- the reference: docs/design.md §2.1 and §2.2 in plain Python ------------------------------------------

def reason(event, ingest):
    if event is None:
        return "null_event_time"
    if ingest is not None and event < ingest - LATENESS:
        return "late"
    if ingest is not None and event > ingest + TOLERANCE:
        return "future"
    return None


def clean(rows, t):
    return [r for r in rows if reason(r[t], r[t + 1]) is None]


def expected_filtered(imps):
    return [(r[0], r[1], r[2], r[2].date()) for r in clean(imps, 2) if r[1] > 0]


def expected_samples(imps, clicks):
    out = []
    good_clicks = clean(clicks, 1)
    for req, ad, ts, *_ in clean(imps, 2):
        hits = [c[1] for c in good_clicks if req is not None and c[0] == req and ts <= c[1] <= ts + WINDOW]
        out += [(req, ad, ts, h, True, ts.date()) for h in hits] or [(req, ad, ts, None, False, ts.date())]
    return out


def expected_quarantine(imps, clicks):
    out = []
    for rows, t, table in ((imps, 2, "imps"), (clicks, 1, "clicks")):
        for r in rows:
            why = reason(r[t], r[t + 1])
            if why:
                out.append((f"{ODS}.{table}", why, r[t], r[t + 1], (r[t] or r[t + 1]).strftime("%Y-%m-%d")))
    return out


# --- fixtures -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def rows():
    imps, clicks = edge_cases()
    more_imps, more_clicks = random_rows()
    return imps + more_imps, clicks + more_clicks


@pytest.fixture(scope="module")
def ctx(spark, tmp_path_factory, rows):
    for db in (ODS, DW):
        spark.sql(f"DROP DATABASE IF EXISTS {db} CASCADE")
        spark.sql(f"CREATE DATABASE {db}")
    imps, clicks = rows
    spark.createDataFrame(imps, IMP_SCHEMA).write.format("delta").saveAsTable(f"{ODS}.imps")
    spark.createDataFrame(clicks, CLICK_SCHEMA).write.format("delta").saveAsTable(f"{ODS}.clicks")
    root = make_project(tmp_path_factory.mktemp("batch_project"), models=MODELS,
                        yml={"sources.yml": SOURCES}, profiles_yml=PROFILES)
    yield Context.with_session(spark, root)
    for db in (ODS, DW):
        spark.sql(f"DROP DATABASE IF EXISTS {db} CASCADE")


@pytest.fixture(scope="module")
def plans(ctx):
    result = compile_project(ctx.project_dir, mode="batch", target=ctx.target)
    result.raise_if_errors()
    return result.plans


def assert_same_rows(spark, table_or_df, expected, schema, where="TRUE"):
    """Multiset equality, every column (`rowdiff`)."""
    got = spark.table(table_or_df) if isinstance(table_or_df, str) else table_or_df
    got = got.where(where).select(*[c.split()[0] for c in schema.split(", ")])
    want = spark.createDataFrame(expected, schema).where(where)
    diff = row_diff(want, got)
    assert diff.equal, f"missing {diff.missing}, unexpected {diff.extra}"


COMPILED = {"spark.sql.codegen.wholeStage": "true", "spark.sql.codegen.factoryMode": "FALLBACK"}
FILTERED = "req_id string, ad_id bigint, imp_ts timestamp, dt date"
SAMPLES = "req_id string, ad_id bigint, imp_ts timestamp, click_ts timestamp, clicked boolean, dt date"
QUARANTINE = "input string, reason string, event_time timestamp, ingest_time timestamp, dt string"


# --- tests ----------------------------------------------------------------------------------------

def test_full_run_equals_the_reference(spark, ctx, plans, rows):
    imps, clicks = rows
    filtered = run_batch(ctx, plans["filtered"])
    samples = run_batch(ctx, plans["samples"])
    assert_same_rows(spark, f"{DW}.filtered", expected_filtered(imps), FILTERED)
    assert_same_rows(spark, f"{DW}.samples", expected_samples(imps, clicks), SAMPLES)
    assert_same_rows(spark, f"{DW}.samples__quarantine", expected_quarantine(imps, clicks), QUARANTINE)
    assert samples.sink.rows == len(expected_samples(imps, clicks))
    assert [p.spec for p in filtered.sink.partitions] == [
        "dt=2026-11-01", "dt=2026-11-02", "dt=2026-11-03"]
    assert [r.version for r in samples.inputs] == [0, 0]  # each input read at one pinned version
    by_reason = samples.quarantined_by_reason()
    want = expected_quarantine(imps, clicks)
    assert by_reason == {k: sum(1 for q in want if q[1] == k) for k in by_reason}
    assert by_reason["late"] and by_reason["future"] and by_reason["null_event_time"]


def test_rerun_is_idempotent(spark, ctx, plans):
    run_batch(ctx, plans["samples"])
    before = spark.table(f"{DW}.samples")
    before_q = spark.table(f"{DW}.samples__quarantine").drop("origin")
    snapshot, snapshot_q = before.collect(), before_q.collect()
    run_batch(ctx, plans["samples"])
    after, after_q = spark.table(f"{DW}.samples"), spark.table(f"{DW}.samples__quarantine").drop("origin")
    assert sorted(map(tuple, after.collect()), key=repr) == sorted(map(tuple, snapshot), key=repr)
    assert sorted(map(tuple, after_q.collect()), key=repr) == sorted(map(tuple, snapshot_q), key=repr)


def test_a_range_overwrites_only_its_partitions(spark, ctx, plans, rows):
    imps, clicks = rows
    run_batch(ctx, plans["samples"])
    marker = "SELECT 'marker' AS req_id, 0L AS ad_id, CAST(NULL AS TIMESTAMP) AS imp_ts, " \
             "CAST(NULL AS TIMESTAMP) AS click_ts, false AS clicked, DATE'{}' AS dt"
    for day in ("2026-11-01", "2026-11-02"):
        spark.sql(f"INSERT INTO {DW}.samples " + marker.format(day))
    result = run_batch(ctx, plans["samples"], start=date(2026, 11, 2), end=date(2026, 11, 3))
    assert [p.spec for p in result.sink.partitions] == ["dt=2026-11-02", "dt=2026-11-03"]
    markers = spark.table(f"{DW}.samples").where("req_id = 'marker'").select("dt").collect()
    assert [str(r.dt) for r in markers] == ["2026-11-01"]  # outside the range: untouched
    spark.sql(f"DELETE FROM {DW}.samples WHERE req_id = 'marker'")
    assert_same_rows(spark, f"{DW}.samples", expected_samples(imps, clicks), SAMPLES)


def test_pruned_reads_give_the_same_rows_as_whole_reads(spark, ctx, plans, rows):
    imps, clicks = rows
    plan = plans["samples"]
    assert plan.backfill_margin_us == WINDOW // US
    day1 = "dt = DATE'2026-11-01'"
    outputs = {}
    for name, margin in (("pruned", plan.backfill_margin_us), ("whole", None), ("too_narrow", 0)):
        run_batch(ctx, dataclasses.replace(plan, backfill_margin_us=margin),
                  start=date(2026, 11, 1), end=date(2026, 11, 1))
        outputs[name] = spark.table(f"{DW}.samples").where(day1).collect()
    want = [r for r in expected_samples(imps, clicks) if r[-1] == date(2026, 11, 1)]
    assert_same_rows(spark, spark.createDataFrame(outputs["pruned"], SAMPLES), want, SAMPLES)
    assert_same_rows(spark, spark.createDataFrame(outputs["whole"], SAMPLES), want, SAMPLES)
    # The data does exercise the margin: without it the cross-midnight click is lost.
    narrow = {(r.req_id, r.clicked) for r in outputs["too_narrow"]}
    assert ("midnight", False) in narrow and ("midnight", True) not in narrow
    run_batch(ctx, plan)  # leave the full table for the other tests


def test_a_missing_input_table_names_the_model_and_the_fix(spark, ctx, plans):
    plan = plans["filtered"]
    gone = dataclasses.replace(plan, sources=tuple(
        dataclasses.replace(s, relation=f"{ODS}.nope") for s in plan.sources))
    with pytest.raises(SqlflowError) as err:
        run_batch(ctx, gone)
    assert str(err.value) == (f"error: model `filtered`: input table `{ODS}.nope` does not exist; "
                              "run `sqlflow demo generate` first")


def test_spark_refusing_the_sql_names_the_model_and_where_its_sql_is(ctx, plans):
    broken = dataclasses.replace(plans["filtered"], sql="SELECT no_such_column FROM __sqlflow_clean__"
                                                        f"{ODS}__imps")
    with pytest.raises(SqlflowError) as err:
        run_batch(ctx, broken)
    (diag,) = err.value.diagnostics
    assert str(diag.location) == "models/filtered.sql"
    assert diag.message.startswith("model `filtered` failed: [UNRESOLVED_COLUMN")
    assert "target/sqlflow/batch/filtered.sql" in diag.hint
    assert not ctx.spark.catalog.tableExists(f"__sqlflow_clean__{ODS}__imps")  # views dropped


def test_cli_runs_selected_models_and_prints_the_summary(spark, ctx):
    res = CliRunner().invoke(main, ["--project-dir", str(ctx.project_dir), "run", "--mode", "batch",
                                    "--select", "filtered", "--start", "2026-11-03", "--end", "2026-11-03"])
    assert res.exit_code == 0, res.output
    assert "filtered: overwrite range" in res.output
    assert "Batch run for 2026-11-03 .. 2026-11-03" in res.output
    bad = CliRunner().invoke(main, ["--project-dir", str(ctx.project_dir), "run", "--mode", "batch",
                                    "--start", "2026-11-03"])
    assert bad.exit_code == 1
    assert "a backfill range needs both --start and --end" in bad.output
    streaming = CliRunner().invoke(main, ["--project-dir", str(ctx.project_dir), "run", "--mode", "stream",
                                          "--start", "2026-11-03", "--end", "2026-11-03"])
    assert streaming.exit_code == 1 and "--start/--end apply to --mode batch only" in streaming.output


def test_cli_stops_at_a_missing_input_with_one_red_line(spark, tmp_path):  # spark: reuse the session
    root = make_project(tmp_path, models=MODELS, yml={"sources.yml": SOURCES.replace(ODS, "rt_batch_gone")},
                        profiles_yml=PROFILES)
    res = CliRunner().invoke(main, ["--project-dir", str(root), "run", "--mode", "batch"])
    assert res.exit_code == 1
    assert ("error: model `filtered`: input table `rt_batch_gone.imps` does not exist; "
            "run `sqlflow demo generate` first") in res.output
    assert "not run: samples" in res.output


def test_an_input_read_from_its_located_folder_is_the_same_snapshot(spark, ctx, tmp_path):
    from sqlflow.runtime.delta.deltalog import locate
    from sqlflow.runtime.inputs import read

    table = f"{ODS}.imps_versions"  # in a folder whose name a URI would escape
    folder = tmp_path / "a folder%41" / "imps"
    spark.table(f"{ODS}.imps").write.format("delta").option("path", str(folder)).saveAsTable(table)
    spark.table(f"{ODS}.imps").limit(3).write.format("delta").mode("append").saveAsTable(table)
    location = locate(spark, [table])[table].location
    assert location is not None and location.endswith("/a folder%41/imps")
    for version in (0, 1):
        by_name, by_folder = read(spark, table, version), read(spark, table, version, location)
        assert by_folder.schema == by_name.schema
        assert row_diff(by_name, by_folder).equal
    assert read(spark, table, 1, location).count() == read(spark, table, 0, location).count() + 3


def test_a_run_of_few_input_rows_is_planned_small_and_of_more_as_configured_with_the_same_rows(
        spark, ctx, plans, rows, monkeypatch):
    """At most INTERPRETED_ROWS input rows (by the Delta logs: the two sources' rows exactly)
    run without adaptive execution and code generation (`small_plan`); one row more than the
    bound runs as configured: here compiled, as the profile configures it (the suite's session
    interprets, README "Tests"; the small runs of every `sqlflow` process too). The rows are
    the reference's either way."""
    imps, clicks = rows
    seen: list[tuple[bool, bool]] = []
    real = batch.small_plan
    before = spark.conf.get("spark.sql.adaptive.enabled")

    def spy(spark_, small, interpreted=False):
        seen.append((small, interpreted))
        return real(spark_, small, interpreted)

    monkeypatch.setattr(batch, "small_plan", spy)
    monkeypatch.setattr(input_rows, "INTERPRETED_ROWS", len(imps) + len(clicks))
    run_batch(ctx, plans["samples"])
    assert_same_rows(spark, f"{DW}.samples", expected_samples(imps, clicks), SAMPLES)
    monkeypatch.setattr(input_rows, "INTERPRETED_ROWS", len(imps) + len(clicks) - 1)
    with changed(spark, COMPILED):  # as the profile configures it (this session interprets)
        run_batch(ctx, plans["samples"])
    assert_same_rows(spark, f"{DW}.samples", expected_samples(imps, clicks), SAMPLES)
    assert_same_rows(spark, f"{DW}.samples__quarantine", expected_quarantine(imps, clicks), QUARANTINE)
    assert seen == [(True, True), (False, False)]
    assert spark.conf.get("spark.sql.adaptive.enabled") == before  # put back after the run
