"""Stream plans of outer interval joins at the edges (docs/semantics.md, "Outer interval joins
in stream mode"), without a JVM: an empty range and a self join get a padding side with a
time range (the runtime used to take `next()` of an empty list: a raw `StopIteration`), a
left self join pads the left occurrence only, and a FULL self join is refused at its line.
The Spark runs are in tests/runtime/test_outer_edge_joins.py."""

from __future__ import annotations

import pytest
import sqlglot

from helpers import ad_sources_yml, make_project
from sqlflow.compiler import compile_project
from sqlflow.planning.delta.rule import DeltaBinding, padding_queries
from sqlflow.runtime.incremental import padding

HEAD = "{{ config(materialized='streaming_table', partition_by=['dt']) }}\n"
SECOND, MINUTE = 1_000_000, 60_000_000


def model(join: str, bound: str, left="i", right="c", right_source="clicks", right_time="click_ts") -> str:
    return HEAD + f"""SELECT {left}.req_id, {left}.imp_ts, {right}.{right_time} AS t, to_date({left}.imp_ts) AS dt
FROM {{{{ source('ods', 'imps') }}}} AS {left}
{join} {{{{ source('ods', '{right_source}') }}}} AS {right}
  ON {left}.ad_id = {right}.ad_id AND {bound}
"""


def compiled(tmp_path, sql: str, mode: str = "stream"):
    root = make_project(tmp_path, models={"m.sql": sql}, yml={"sources.yml": ad_sources_yml("ods")})
    return compile_project(root, mode=mode)


def test_an_empty_range_left_join_has_a_padding_side(tmp_path):
    result = compiled(tmp_path, model(
        "LEFT JOIN", "c.click_ts BETWEEN i.imp_ts + INTERVAL 5 MINUTES AND i.imp_ts + INTERVAL 1 MINUTE"))
    (warning,) = result.diagnostics
    assert "is empty, so it never matches" in warning.message and warning.severity == "warning"
    (side,) = padding.sides(result.plans["m"])
    # the point `lower`: a row at t closes once t + 5 min is past the clicks' lateness
    assert (side.binding.relation, side.other.relation) == ("ods.imps", "ods.clicks")
    assert (side.lower_us, side.upper_us) == (5 * MINUTE, 5 * MINUTE)


@pytest.mark.parametrize("join", ["LEFT JOIN", "RIGHT JOIN"])
def test_a_self_outer_join_pads_one_occurrence_of_its_input(tmp_path, join):
    bound = "b.imp_ts BETWEEN a.imp_ts + INTERVAL 1 SECOND AND a.imp_ts + INTERVAL 5 MINUTES"
    result = compiled(tmp_path, model(join, bound, "a", "b", "imps", "imp_ts"))
    assert [d for d in result.diagnostics if d.severity == "error"] == []
    plan = result.plans["m"]
    (side,) = padding.sides(plan)
    assert side.binding.relation == side.other.relation == "ods.imps"
    # both directions of the bound: a row closes no earlier than either alias needs
    assert (side.lower_us, side.upper_us) == (-5 * MINUTE, 5 * MINUTE)
    sql = " ".join(plan.padding_sql[0].split())
    padded, other = ("a", "b") if join == "LEFT JOIN" else ("b", "a")
    assert f"__sqlflow_pending__ods__imps AS {padded}" in sql
    assert f"__sqlflow_pending__ods__imps AS {other}" not in sql
    assert ("SELECT * FROM __sqlflow_old__ods__imps UNION ALL SELECT * FROM "
            f"__sqlflow_delta__ods__imps ) AS {other}") in sql


def test_the_padding_of_a_left_self_join_reads_the_left_occurrence_from_pending():
    q = sqlglot.parse_one("SELECT a.k, b.v FROM s AS a LEFT JOIN s AS b ON a.k = b.k "
                          "AND b.t BETWEEN a.t AND a.t + 2", read="spark")
    out = padding_queries(q, {"s": DeltaBinding("s", "s_delta", "s_old")}, {"s": "pending"})
    assert out["s"].sql("spark") == (
        "SELECT a.k, b.v FROM pending AS a LEFT JOIN (SELECT * FROM s_old AS b WHERE FALSE) AS b "
        "ON a.k = b.k AND b.t BETWEEN a.t AND a.t + 2 WHERE NOT EXISTS(SELECT 1 FROM "
        "(SELECT * FROM s_old UNION ALL SELECT * FROM s_delta) AS b "
        "WHERE a.k = b.k AND b.t BETWEEN a.t AND a.t + 2)")


def test_a_full_self_join_is_refused_at_its_line_in_stream_mode(tmp_path):
    bound = "b.imp_ts BETWEEN a.imp_ts AND a.imp_ts + INTERVAL 5 MINUTES"
    result = compiled(tmp_path, model("FULL JOIN", bound, "a", "b", "imps", "imp_ts"))
    (error,) = result.diagnostics
    assert error.severity == "error" and "m" not in result.plans
    assert error.format().startswith(
        "models/m.sql:4:1: error: model `m`: FULL interval join of `ods.imps` with itself "
        "(`a` and `b`)")
    assert "use a LEFT JOIN" in error.hint
    batch = compiled(tmp_path / "batch", model("FULL JOIN", bound, "a", "b", "imps", "imp_ts"), "batch")
    assert "m" in batch.plans and batch.diagnostics[0].severity == "warning"


def test_a_stream_plan_the_delta_rule_cannot_build_is_an_error_at_the_model(tmp_path):
    """Not a traceback: the delta rule's reason, at the model's file."""
    sql = model("LEFT JOIN", "c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 5 MINUTES") + (
        "JOIN {{ source('ods', 'clicks') }} AS d\n"
        "  ON i.req_id = d.req_id AND d.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 5 MINUTES\n")
    result = compiled(tmp_path, sql)
    (error,) = result.diagnostics
    assert error.format().startswith(
        "models/m.sql: error: model `m` cannot stream with the incremental strategy: padding needs "
        "exactly two stream inputs, found 3")
    assert "m" not in result.plans
