"""Fan-out fusion at compile time (no JVM): routed siblings of one parent become ONE
RoutedPlan; a routed model that does more than filter/project is an error naming its file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import DEFAULT_PROFILES_YML, make_project
from sqlflow.compiler import compile_project, plan_json_text, plan_sql_text
from sqlflow.errors import SqlflowError
from sqlflow.planning.plan import RoutedPlan, StreamPlan
from sqlflow.project.profiles import load_target

ROOT = Path(__file__).resolve().parents[2]
SOURCES = """\
version: 2
sources:
  - name: ods
    schema: ods
    tables:
      - name: events
        meta:
          sqlflow: {event_time: event_ts, ingest_time: ingest_ts, allowed_lateness: 10 minutes, future_tolerance: 5 minutes}
"""
PROJECT = {"models": {"testproj": {"routed": {"+materialized": "streaming_table",
                                 "+partition_by": ["dt", "hour", "event_type", "product"],
                                 "+routing": {"group": "by_dept"}}}}}
# the operator's notification hook of group by_dept (sqlflow.project.notify)
PROFILES = DEFAULT_PROFILES_YML + '''      sqlflow_notify: {by_dept: {url: "http://127.0.0.1:9/x", command: ./on_ready.sh}}
'''


def project(tmp_path, extra=None, project_yml=None, profiles_yml=PROFILES):
    models = {f"routed/r_{d}.sql": f"{{{{ route_to(source('ods', 'events'), '{d}', "
                                   f"columns=['event_id', 'event_ts']) }}}}" for d in ("a", "b", "c")}
    models.update(extra or {})
    return make_project(tmp_path, models=models, yml={"sources.yml": SOURCES},
                        macros={"route.sql": (ROOT / "macros" / "route.sql").read_text()},
                        project_yml=project_yml or PROJECT, profiles_yml=profiles_yml)


@pytest.mark.parametrize("mode", ["stream", "batch"])
def test_siblings_fuse_into_one_routed_plan(tmp_path, mode):
    root = project(tmp_path)
    result = compile_project(root, mode=mode, target=load_target(root, "sqlflow"))
    result.raise_if_errors()
    assert list(result.plans) == ["by_dept"]
    plan = result.plans["by_dept"]
    assert isinstance(plan, RoutedPlan)
    assert [t.model for t in plan.targets] == ["r_a", "r_b", "r_c"]
    assert [t.sink.table for t in plan.targets] == ["dw.r_a", "dw.r_b", "dw.r_c"]
    assert len(plan.sources) == 1 and plan.sources[0].relation == "ods.events"
    view = plan.sources[0].view
    assert all(f"FROM {view}" in t.sql and "SPMID_DEPARTMENT(spmid) = " in t.sql for t in plan.targets)
    assert plan.commit.allowed_lateness_us == 600_000_000
    assert (plan.commit.notify_url, plan.commit.notify_command) == ("http://127.0.0.1:9/x", "./on_ready.sh")
    data = json.loads(plan_json_text(plan, None))
    assert data["kind"] == "RoutedPlan" and len(data["targets"]) == 3
    assert plan_sql_text(plan).count("-- target r_") == 3
    if mode == "stream":
        assert plan.checkpoint.endswith("route__by_dept") and plan.strategy == "incremental"


def test_one_selected_member_keeps_its_ordinary_plan(tmp_path):
    result = compile_project(project(tmp_path), mode="stream", select=["r_b"])
    assert isinstance(result.plans["r_b"], StreamPlan)


def test_a_routed_model_that_aggregates_is_an_error_naming_its_file(tmp_path):
    bad = {"routed/r_bad.sql": "select event_type, to_date(event_ts) as dt, 1 as hour, 'x' as product, "
                               "count(*) as n from {{ source('ods', 'events') }} group by 1, 2"}
    result = compile_project(project(tmp_path, bad), mode="batch")
    errors = [d for d in result.errors if "r_bad" in d.message]
    assert errors and errors[0].location.path == "models/routed/r_bad.sql"
    assert "only filter and project" in errors[0].hint
    with pytest.raises(SqlflowError):
        result.raise_if_errors()


def test_bad_routing_config_is_reported(tmp_path):
    yml = {"models": {"testproj": {"routed": {**PROJECT["models"]["testproj"]["routed"],
                                              "+routing": {"group": "g", "bytes_per_row": "lots"}}}}}
    result = compile_project(project(tmp_path, project_yml=yml), mode="batch")
    assert any("bytes_per_row" in d.message and d.location.path.startswith("models/routed/")
               for d in result.errors)


@pytest.mark.parametrize("key", ["notify_command", "notify_url"])
def test_a_notification_hook_in_a_model_config_is_refused_at_its_line(tmp_path, key):
    """A config comes with pull requests: it may never run a command or call a URL."""
    hostile = {"routed/r_x.sql": "{{ config(materialized='streaming_table',\n"
                                 "  partition_by=['dt', 'hour', 'event_type', 'product'],\n"
                                 f"  routing={{'group': 'by_dept', '{key}': 'touch /tmp/pwned'}}) }}}}\n"
                                 "{{ route_to(source('ods', 'events'), 'x', columns=['event_id', 'event_ts']) }}"}
    for mode in ("batch", "stream"):
        result = compile_project(project(tmp_path, hostile), mode=mode)
        errors = [d for d in result.errors if key in d.message]
        assert errors, result.diagnostics
        assert (errors[0].location.path, errors[0].location.line) == ("models/routed/r_x.sql", 3)
        assert "operator setting" in errors[0].message and "sqlflow_notify" in errors[0].hint
        assert "r_x" not in {t.model for p in result.plans.values() for t in getattr(p, "targets", ())}


def test_a_bad_profile_hook_is_an_error_naming_the_profile(tmp_path):
    root = project(tmp_path, profiles_yml=PROFILES.replace("http://127.0.0.1:9/x", "ftp://x"))
    with pytest.raises(SqlflowError) as exc:
        compile_project(root, mode="batch", target=load_target(root, "sqlflow"))
    assert "sqlflow_notify" in str(exc.value) and "profiles/profiles.yml" in str(exc.value)


def test_the_demo_routes_user_events_into_six_department_tables():
    result = compile_project(ROOT, mode="stream")
    result.raise_if_errors()
    plan = result.plans["user_events_by_department"]
    assert isinstance(plan, RoutedPlan)
    assert sorted(t.model for t in plan.targets) == [
        "ue_ad", "ue_game", "ue_live", "ue_main", "ue_manga", "ue_music"]
    assert all(t.sink.partition_by == ("dt", "hour", "event_type", "product") for t in plan.targets)
    assert plan.sources[0].relation == "dw.stg_user_events"
    assert "stg_user_events" in result.plans  # the parent stays its own model


def routed_with(tmp_path, routing):
    yml = {"models": {"testproj": {"routed": {**PROJECT["models"]["testproj"]["routed"],
                                              "+routing": {"group": "g", **routing}}}}}
    return compile_project(project(tmp_path, project_yml=yml), mode="stream")


def test_row_size_presets_reach_the_plan_and_bad_ones_name_the_level(tmp_path):
    presets = {"event_type=play": "900B", "event_type=play/product=app": "1KB"}
    result = routed_with(tmp_path / "ok", {"row_bytes": presets})
    result.raise_if_errors()
    assert result.plans["g"].row_bytes == (("event_type=play", 900), ("event_type=play/product=app", 1024))
    bad = routed_with(tmp_path / "level", {"row_bytes": {"hour=3": "1KB"}})
    assert any("`routing.row_bytes` names level(s) hour" in d.message and "event_type, product" in d.hint
               for d in bad.errors)
    shape = routed_with(tmp_path / "shape", {"row_bytes": {"play": "1KB"}})
    assert any("row_bytes" in d.message and "`play` is not a sub-partition" in d.message for d in shape.errors)


def test_a_partition_not_yet_seen_uses_its_most_specific_preset():
    from sqlflow.runtime.routed.filebudget import SizeModel, budgets

    sizes = SizeModel(100.0, ("dt", "hour"), presets={"event_type=play": 1000.0,
                                                      "event_type=play/product=app": 2000.0})
    spec = "dt=2026-11-01/hour=10/event_type={}/product={}"
    assert sizes.per_row(spec.format("play", "app")) == 2000.0  # the most specific key
    assert sizes.per_row(spec.format("play", "web")) == 1000.0
    assert sizes.per_row(spec.format("pv", "app")) == 100.0  # no preset: bytes_per_row
    sizes.learn(spec.format("pv", "web"), 5000, 10)  # the table's statistics: 500 B a row
    assert sizes.per_row(spec.format("pv", "app")) == 500.0  # learned table average
    assert sizes.per_row(spec.format("play", "web")) == 1000.0  # preset beats the average
    sizes.learn(spec.format("play", "web"), 3000, 10)
    assert sizes.per_row(spec.format("play", "web")) == 300.0  # its own statistics win
    plan = budgets({spec.format("play", "app"): 1000}, sizes, 1_000_000, None)
    assert plan[spec.format("play", "app")].files == 2  # 1000 rows x 2000 B / 1 MB


def test_the_routing_key_is_a_shared_call_computed_once_per_row():
    """Six targets filter on `spmid_department(spmid)`: the plan computes it once per input
    row (a shared column) and each target's second SQL filters on that column."""
    plan = compile_project(ROOT, mode="batch").plans["user_events_by_department"]
    assert plan.shared == (("__sqlflow_shared_0", "SPMID_DEPARTMENT(spmid)"),)
    for t in plan.targets:
        dept = t.model.removeprefix("ue_")
        assert f"SPMID_DEPARTMENT(spmid) = '{dept}'" in t.sql  # as written: errors name it
        assert f"__sqlflow_shared_0 = '{dept}'" in t.shared_sql
        assert "SPMID_DEPARTMENT" not in t.shared_sql


def test_shared_calls_only_where_two_targets_make_them_and_never_with_a_star():
    from sqlflow.planning.shared_calls import share_calls

    one = share_calls(["SELECT a FROM v WHERE f(k) = 'x' AND g(k) > 1", "SELECT a FROM v WHERE F(K) = 'y'",
                       "SELECT a, f(k) AS d FROM v"])
    assert one.columns == (("__sqlflow_shared_0", "F(k)"),)  # g: one target; SELECT: not shared
    assert one.sql == ("SELECT a FROM v WHERE __sqlflow_shared_0 = 'x' AND G(k) > 1",
                       "SELECT a FROM v WHERE __sqlflow_shared_0 = 'y'", None)
    star = share_calls(["SELECT * FROM v WHERE f(k) = 'x'", "SELECT a FROM v WHERE f(k) = 'y'"])
    assert star.columns == () and star.sql == (None, None)
    calls_on_calls = share_calls(["SELECT a FROM v WHERE f(lower(k)) = 'x'",
                                  "SELECT a FROM v WHERE f(lower(k)) = 'y'"])
    assert calls_on_calls.columns == ()  # only calls on plain columns


def test_shared_calls_doctests():
    import doctest

    import sqlflow.planning.shared_calls

    assert doctest.testmod(sqlflow.planning.shared_calls).failed == 0
