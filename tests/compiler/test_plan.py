"""Golden tests: model SQL -> the Spark SQL and bindings of its plan, per mode. No JVM."""

from __future__ import annotations

import json

import pytest
import sqlglot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import AD_SOURCES_YML, make_project
from sqlflow.compiler import compile_project, write_artifacts
from sqlflow.errors import SqlflowError

SOURCES = AD_SOURCES_YML

HEAD = "{{ config(materialized='streaming_table', partition_by=['dt']%s) }}\n"


def compiled(tmp_path, sql: str, mode: str, extra_config: str = "", name: str = "m"):
    root = make_project(tmp_path, models={f"{name}.sql": HEAD % extra_config + sql},
                        yml={"sources.yml": SOURCES})
    result = compile_project(root, mode=mode)
    return result, result.plans.get(name)


def norm(sql: str) -> str:
    return sqlglot.transpile(sql, read="spark", write="spark")[0]


def check(tmp_path, sql: str, mode: str, expected: str, extra_config: str = ""):
    """The one-line golden check: the plan's SQL equals `expected` (as Spark SQL)."""
    _, plan = compiled(tmp_path, sql, mode, extra_config)
    assert plan is not None, "model got no plan"
    assert norm(plan.sql) == norm(expected)
    return plan


FILTER = "SELECT i.req_id, i.imp_ts, to_date(i.imp_ts) AS dt FROM {{ source('ods', 'imps') }} AS i WHERE i.ad_id > 0"


def test_batch_plan_reads_event_inputs_through_the_clean_view(tmp_path):
    plan = check(tmp_path, FILTER, "batch",
                 "SELECT i.req_id, i.imp_ts, TO_DATE(i.imp_ts) AS dt "
                 "FROM __sqlflow_clean__ods__imps AS i WHERE i.ad_id > 0")
    assert plan.sink.write == "overwrite_partitions" and plan.sink.partition_by == ("dt",)
    (src,) = plan.sources
    assert (src.read, src.view, src.event_time, src.ingest_time) == (
        "static", "__sqlflow_clean__ods__imps", "imp_ts", "ingest_ts")
    assert (src.allowed_lateness_us, src.future_tolerance_us) == (10 * 60 * 10**6, 5 * 60 * 10**6)
    assert plan.quarantine == "dw.m__quarantine"
    assert plan.backfill_margin_us == 0  # dt is the date of the one stream's event time


def test_batch_plan_keeps_an_unaliased_table_name_as_the_alias(tmp_path):
    check(tmp_path, "SELECT imps.req_id, to_date(imps.imp_ts) AS dt FROM {{ source('ods', 'imps') }}",
          "batch", "SELECT imps.req_id, TO_DATE(imps.imp_ts) AS dt FROM __sqlflow_clean__ods__imps AS imps")


def test_batch_plan_reads_dimensions_and_table_models_plainly(tmp_path):
    sql = ("SELECT i.req_id, d.category, to_date(i.imp_ts) AS dt FROM {{ source('ods', 'imps') }} AS i "
           "LEFT JOIN {{ source('dim', 'dim_ad') }} AS d ON i.ad_id = d.ad_id")
    plan = check(tmp_path, sql, "batch",
                 "SELECT i.req_id, d.category, TO_DATE(i.imp_ts) AS dt FROM __sqlflow_clean__ods__imps AS i "
                 "LEFT JOIN dim.dim_ad AS d ON i.ad_id = d.ad_id")
    assert {s.relation: s.view for s in plan.sources} == {
        "ods.imps": "__sqlflow_clean__ods__imps", "dim.dim_ad": None}
    # a `table` model never streams, so its inputs are read as they are, in both modes
    root = make_project(tmp_path / "t", yml={"sources.yml": SOURCES}, models={
        "t.sql": "{{ config(materialized='table') }}\nSELECT * FROM {{ source('ods', 'imps') }}"})
    for mode in ("batch", "stream"):
        plan = compile_project(root, mode=mode).plans["t"]
        assert plan.sql.endswith("FROM ods.imps") and plan.sources[0].view is None
        assert plan.backfill_margin_us is None


def test_incremental_single_stream_binds_the_delta_view(tmp_path):
    plan = check(tmp_path, FILTER, "stream",
                 "SELECT i.req_id, i.imp_ts, TO_DATE(i.imp_ts) AS dt "
                 "FROM __sqlflow_delta__ods__imps AS i WHERE i.ad_id > 0")
    (src,) = plan.sources
    assert (src.read, src.view, src.old_view, src.watermark) == (
        "stream", "__sqlflow_delta__ods__imps", None, None)
    assert plan.sink.write == "append_once"
    assert plan.sink.checkpoint == ".sqlflow/checkpoints/m"


def test_stateful_binds_a_watermarked_stream_view(tmp_path):
    plan = check(tmp_path, FILTER, "stream",
                 "SELECT i.req_id, i.imp_ts, TO_DATE(i.imp_ts) AS dt "
                 "FROM __sqlflow_stream__ods__imps AS i WHERE i.ad_id > 0",
                 extra_config=", stream_strategy='stateful', skew_margin='2 minutes'")
    (src,) = plan.sources
    assert src.watermark.column == "imp_ts"
    assert src.watermark.delay_us == 12 * 60 * 10**6  # lateness 10 min + skew 2 min


JOIN = """SELECT i.req_id, i.imp_ts, c.click_ts, to_date(i.imp_ts) AS dt
FROM {{ source('ods', 'imps') }} AS i
JOIN {{ source('ods', 'clicks') }} AS c
  ON i.req_id = c.req_id AND c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 20 MINUTES"""


def test_interval_join_batch_reads_both_clean_views(tmp_path):
    plan = check(tmp_path, JOIN, "batch",
                 "SELECT i.req_id, i.imp_ts, c.click_ts, TO_DATE(i.imp_ts) AS dt "
                 "FROM __sqlflow_clean__ods__imps AS i "
                 "JOIN __sqlflow_clean__ods__clicks AS c ON i.req_id = c.req_id AND c.click_ts BETWEEN i.imp_ts "
                 "AND i.imp_ts + INTERVAL '20' MINUTES")
    assert plan.backfill_margin_us == 20 * 60 * 10**6


@pytest.mark.parametrize("dt, margin", [
    ("to_date(i.imp_ts)", 20 * 60 * 10**6),
    ("cast(i.imp_ts AS date)", 20 * 60 * 10**6),
    ("date_trunc('HOUR', i.imp_ts)", 20 * 60 * 10**6),
    ("date_format(i.imp_ts, 'yyyy-MM-dd')", 20 * 60 * 10**6),
    ("to_date(c.click_ts)", 20 * 60 * 10**6),  # either side of the join can date the output
    ("date_trunc('MONTH', i.imp_ts)", None),  # coarser than a day: a day's rows are not enough
    ("i.dt", None),  # the ingest partition, not the event time: read everything
    ("to_date(i.ingest_ts)", None),
])
def test_backfill_margin_follows_the_output_date(tmp_path, dt, margin):
    _, plan = compiled(tmp_path, JOIN.replace("to_date(i.imp_ts) AS dt", f"{dt} AS dt"), "batch")
    assert plan.backfill_margin_us == margin


def test_backfill_margin_adds_up_along_a_join_chain(tmp_path):
    sql = JOIN + """
JOIN {{ source('ods', 'clicks') }} AS c2
  ON c.req_id = c2.req_id AND c2.click_ts BETWEEN c.click_ts - INTERVAL 1 HOUR AND c.click_ts"""
    _, plan = compiled(tmp_path, sql, "batch")
    assert plan.backfill_margin_us == 80 * 60 * 10**6


def test_no_backfill_margin_when_rows_depend_on_other_dates(tmp_path):
    dedup = ("SELECT req_id, imp_ts, dt FROM (SELECT i.req_id, i.imp_ts, to_date(i.imp_ts) AS dt, "
             "row_number() OVER (PARTITION BY i.req_id ORDER BY i.imp_ts) AS rn "
             "FROM {{ source('ods', 'imps') }} AS i) AS x WHERE rn = 1")
    _, plan = compiled(tmp_path, dedup, "batch")
    assert plan.backfill_margin_us is None
    _, plan = compiled(tmp_path / "2", FILTER + " LIMIT 10", "batch")
    assert plan.backfill_margin_us is None
    unbounded = JOIN.split(" AND c.click_ts")[0]  # a regular join: any click date can match
    _, plan = compiled(tmp_path / "3", unbounded, "batch")
    assert plan.backfill_margin_us is None


def test_interval_join_stream_is_the_delta_rule(tmp_path):
    _, plan = compiled(tmp_path, JOIN, "stream")
    tree = sqlglot.parse_one(plan.sql, read="spark")
    assert isinstance(tree, sqlglot.exp.Union)
    tables = sorted(t.name for t in tree.find_all(sqlglot.exp.Table))
    # ΔL ⋈ (R_old ∪ ΔR)  ∪  L_old ⋈ ΔR
    assert tables == sorted(["__sqlflow_delta__ods__imps", "__sqlflow_old__ods__clicks",
                             "__sqlflow_delta__ods__clicks", "__sqlflow_old__ods__imps",
                             "__sqlflow_delta__ods__clicks"])
    by_rel = {s.relation: s for s in plan.sources}
    imps, clicks = by_rel["ods.imps"], by_rel["ods.clicks"]
    # old impressions a click delta can match: imp_ts in [min(click_ts) - 20 min, max(click_ts)]
    (p,) = imps.prune
    assert (p.column, p.other, p.other_column, p.lower_us, p.upper_us) == (
        "imp_ts", "ods.clicks", "click_ts", -20 * 60 * 10**6, 0)
    (p,) = clicks.prune
    assert (p.column, p.other, p.lower_us, p.upper_us) == ("click_ts", "ods.imps", 0, 20 * 60 * 10**6)


def test_left_interval_join_stream_has_a_padding_query(tmp_path):
    _, plan = compiled(tmp_path, JOIN.replace("JOIN {{", "LEFT JOIN {{"), "stream")
    assert len(plan.padding_sql) == 1
    pad = sqlglot.parse_one(plan.padding_sql[0], read="spark")
    assert "__sqlflow_pending__ods__imps" in {t.name for t in pad.find_all(sqlglot.exp.Table)}
    by_rel = {s.relation: s for s in plan.sources}
    assert (by_rel["ods.imps"].pending_view, by_rel["ods.clicks"].pending_view) == (
        "__sqlflow_pending__ods__imps", None)


def test_stream_static_join_reads_the_dimension_statically(tmp_path):
    sql = ("SELECT i.req_id, d.category, to_date(i.imp_ts) AS dt FROM {{ source('ods', 'imps') }} AS i "
           "LEFT JOIN {{ source('dim', 'dim_ad') }} AS d ON i.ad_id = d.ad_id")
    plan = check(tmp_path, sql, "stream",
                 "SELECT i.req_id, d.category, TO_DATE(i.imp_ts) AS dt FROM __sqlflow_delta__ods__imps AS i "
                 "LEFT JOIN dim.dim_ad AS d ON i.ad_id = d.ad_id")
    assert {s.relation: s.read for s in plan.sources} == {"ods.imps": "stream", "dim.dim_ad": "static"}


def test_table_models_get_batch_plans_in_stream_mode(tmp_path):
    root = make_project(tmp_path, models={"t.sql": "{{ config(materialized='table') }}\nSELECT 1 AS a"},
                        yml={"sources.yml": SOURCES})
    plan = compile_project(root, mode="stream").plans["t"]
    assert (plan.mode, plan.sink.write) == ("batch", "replace")


def test_unsafe_model_gets_errors_and_no_plan(tmp_path):
    sql = "SELECT i.req_id, rand() AS r, to_date(i.imp_ts) AS dt FROM {{ source('ods', 'imps') }} AS i"
    result, plan = compiled(tmp_path, sql, "stream")
    assert plan is None
    assert [d.format() for d in result.errors] == [
        d.format() for d in result.errors if d.location and str(d.location) == "models/m.sql:2:18"]
    assert "rand()" in result.errors[0].message
    with pytest.raises(SqlflowError):
        result.raise_if_errors()
    batch, plan = compiled(tmp_path / "b", sql, "batch")
    assert plan is not None and not batch.errors
    assert any("cannot stream" in w for w in plan.warnings)


def test_ref_to_streaming_model_is_a_stream(tmp_path):
    root = make_project(tmp_path, yml={"sources.yml": SOURCES}, models={
        "a.sql": HEAD % "" + FILTER,
        "b.sql": HEAD % "" + "SELECT a.req_id, a.imp_ts, a.dt FROM {{ ref('a') }} AS a",
    })
    plan = compile_project(root, mode="stream").plans["b"]
    (src,) = plan.sources
    assert (src.relation, src.read, src.event_time) == ("dw.a", "stream", "imp_ts")
    assert src.allowed_lateness_us == 10 * 60 * 10**6


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mode=st.sampled_from(["stream", "batch"]), upper=st.integers(min_value=1, max_value=3600))
def test_compile_is_deterministic(tmp_path_factory, mode, upper):
    sql = JOIN.replace("INTERVAL 20 MINUTES", f"INTERVAL {upper} SECONDS")
    outputs = []
    for _ in range(2):
        root = make_project(tmp_path_factory.mktemp("p"), models={"m.sql": HEAD % "" + sql},
                            yml={"sources.yml": SOURCES})
        result = compile_project(root, mode=mode)
        paths = write_artifacts(result, root)
        outputs.append({p.name: p.read_bytes() for p in paths})
    assert outputs[0] == outputs[1]
    assert json.loads(outputs[0]["m.json"])["mode"] == mode


def test_a_join_side_read_through_a_cte_gets_old_rows_unpruned(tmp_path):
    sql = ("WITH c AS (SELECT req_id, imp_ts FROM {{ source('ods', 'imps') }})\n"
           "SELECT c.req_id, k.click_ts, to_date(c.imp_ts) AS dt\n"
           "FROM c JOIN {{ source('ods', 'clicks') }} AS k ON c.req_id = k.req_id\n"
           "  AND k.click_ts BETWEEN c.imp_ts AND c.imp_ts + INTERVAL 20 MINUTES")
    result, plan = compiled(tmp_path, sql, "stream")
    assert not result.errors and plan is not None
    by_relation = {b.relation: b for b in plan.sources}
    assert {r: (b.old_view, b.prune) for r, b in by_relation.items()} == {
        "ods.imps": ("__sqlflow_old__ods__imps", ()),
        "ods.clicks": ("__sqlflow_old__ods__clicks", ())}
    assert "__sqlflow_old__ods__imps" in plan.sql and "__sqlflow_old__ods__clicks" in plan.sql
