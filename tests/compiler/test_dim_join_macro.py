"""The dim_join macro compiles to a recognised dimension join (no Spark): pinned views, the
dim_missing query for inner joins only, and clear errors for what the runtime cannot do."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import make_project
from sqlflow.compiler import compile_project
from sqlflow.errors import SqlflowError

ROOT = Path(__file__).resolve().parents[2]
MACROS = {n: (ROOT / "macros" / n).read_text() for n in ("dim_join.sql", "interval_join.sql")}
SOURCES = """\
version: 2
sources:
  - name: ods
    schema: ods
    tables:
      - name: ev
        meta:
          sqlflow: {event_time: event_ts, ingest_time: ingest_ts, allowed_lateness: 10 minutes, future_tolerance: 5 minutes}
  - name: dim
    schema: dim
    tables:
      - name: dim_user
        meta:
          sqlflow: {partition_column: dt, ready_marker: _SUCCESS}
"""


def compiled(tmp_path, select_list, kind="inner", mode="stream", fallback=2, where=""):
    sql = f"""{{{{ config(materialized='streaming_table', partition_by=['dt']) }}}}
select e.event_id, {select_list}, date_format(e.event_ts, 'yyyy-MM-dd') as dt
from {{{{ source('ods', 'ev') }}}} as e
{{{{ dim_join('{kind}', source('dim', 'dim_user'), 'u', 'e', keys=['user_id'],
             fact_date='to_date(e.event_ts)', max_fallback={fallback}) }}}}
{where}
"""
    root = make_project(tmp_path, models={"m.sql": sql}, yml={"sources.yml": SOURCES}, macros=MACROS)
    return compile_project(root, mode=mode)


@pytest.mark.parametrize("mode", ["stream", "batch"])
def test_inner_dim_join_is_recognised_and_pinned(tmp_path, mode):
    result = compiled(tmp_path, "u.vip, u.dt as user_dt", mode=mode, where="where e.event_id is not null")
    assert not result.diagnostics, [d.format() for d in result.diagnostics]
    (d,) = result.irs["m"].dim_joins
    assert (d.relation, d.join_type, d.fact_alias, d.max_fallback, d.lineage) == (
        "dim.dim_user", "inner", "e", 2, "user_dt")
    plan = result.plans["m"]
    assert "FROM dim.dim_user" not in plan.sql and "FROM sqlflow.commit_log" not in plan.sql
    assert "__sqlflow_dim__dim__dim_user" in plan.sql and plan.dim.ready_view in plan.sql
    assert [b.relation for b in plan.sources if b.relation == "sqlflow.commit_log"] == []
    (b,) = plan.dim.dims
    assert (b.lineage, b.ready_marker, b.max_fallback) == ("user_dt", "_SUCCESS", 2)
    fact_view = next(s.view for s in plan.sources if s.relation == "ods.ev")
    assert f"FROM {fact_view} AS e" in plan.dim.missing_sql
    assert "NOT e.event_id IS NULL AND __sqlflow_m0.__sqlflow_day IS NULL" in plan.dim.missing_sql
    assert "DATE_ADD(TO_DATE(__sqlflow_p), 2)" in plan.dim.days_sql


def test_left_dim_join_has_no_dim_missing_query(tmp_path):
    plan = compiled(tmp_path, "u.dt as user_dt", kind="left").plans["m"]
    assert plan.dim.missing_sql is None and plan.dim.dims[0].join_type == "left"


def test_the_chosen_partition_must_be_selected(tmp_path):
    result = compiled(tmp_path, "u.vip")
    (err,) = result.errors
    assert "does not select its chosen partition `u.dt`" in err.format() and "m.sql" in err.format()


@pytest.mark.parametrize("kind,fallback,message", [
    ("right", 1, "unknown join_type `right`"),
    ("inner", -1, "`max_fallback` must be a whole number"),
    ("inner", 1.5, "`max_fallback` must be a whole number"),
])
def test_bad_arguments_stop_the_render(tmp_path, kind, fallback, message):
    with pytest.raises(SqlflowError, match=message):
        compiled(tmp_path, "u.dt as user_dt", kind=kind, fallback=fallback)
