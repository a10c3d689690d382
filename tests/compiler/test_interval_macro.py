"""The `interval_join` macro (macros/interval_join.sql): the SQL it renders, that the compiler
plans it exactly like a hand-written ON clause, its argument errors, and the repo's dwd models
built with it. No JVM (tests/compiler/test_dbt_conformance.py renders the repo under real dbt).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import AD_SOURCES_YML, make_project, render_sql
from sqlflow.analysis.ir import IntervalBound
from sqlflow.compiler import compile_project
from sqlflow.errors import SqlflowError

ROOT = Path(__file__).resolve().parents[2]
MACROS = {"interval_join.sql": (ROOT / "macros" / "interval_join.sql").read_text()}
MIN20 = 20 * 60 * 10**6

SOURCES = {"sources.yml": AD_SOURCES_YML}

# The join (macro call or hand-written) starts on line 4 of the model.
HEAD = """{{ config(materialized='streaming_table', partition_by=['dt']) }}
SELECT i.req_id, i.imp_ts, c.click_ts, to_date(i.imp_ts) AS dt
FROM {{ source('ods', 'imps') }} AS i
"""


def call(join_type: str = "inner", lower: str = "0 seconds", upper: str = "20 minutes",
         keys: str = "['req_id', 'ad_id']") -> str:
    """The model's macro call, on two lines as analysts write it."""
    return (f"{{{{ interval_join('{join_type}', source('ods', 'clicks'), 'c', 'i', keys={keys},\n"
            f"                 left_time='imp_ts', right_time='click_ts', "
            f"lower='{lower}', upper='{upper}') }}}}\n")


def hand(join: str, condition: str) -> str:
    return f"{join} {{{{ source('ods', 'clicks') }}}} AS c\n  ON {condition}\n"


def compile_join(tmp_path: Path, join_sql: str, mode: str):
    """Compile a one-model project whose model `m` is HEAD + `join_sql`: (result, plan, ir)."""
    root = make_project(tmp_path, models={"m.sql": HEAD + join_sql}, yml=SOURCES, macros=MACROS)
    result = compile_project(root, mode=mode)
    return result, result.plans.get("m"), result.irs.get("m")


def only_join(ir):
    (join,) = ir.joins
    return join


def bounds(ir) -> tuple[int | None, int | None]:
    b = only_join(ir).interval
    return b.lower_us, b.upper_us


def assert_same_plan(tmp_path: Path, macro_sql: str, hand_sql: str, mode: str,
                     same_sql: bool = True) -> None:
    """The macro's plan equals the hand-written one's: every field when `same_sql`, else
    everything but the SQL text (the join, its bound, bindings, prune ranges, sink)."""
    a_res, a, a_ir = compile_join(tmp_path / "macro", macro_sql, mode)
    b_res, b, b_ir = compile_join(tmp_path / "hand", hand_sql, mode)
    assert a is not None and b is not None, a_res.diagnostics + b_res.diagnostics
    assert a_res.diagnostics == b_res.diagnostics == []
    assert only_join(a_ir).kind == "interval"
    if same_sql:
        assert a.to_dict() == b.to_dict()
        assert a_ir.joins == b_ir.joins  # location included: both point at line 4
        return
    ja, jb = only_join(a_ir), only_join(b_ir)
    assert (ja.kind, ja.join_type, ja.interval) == (jb.kind, jb.join_type, jb.interval)
    assert set(ja.keys) == set(jb.keys)  # the order the keys are written in does not matter
    assert (a.sources, a.sink, type(a)) == (b.sources, b.sink, type(b))
    assert len(getattr(a, "padding_sql", ())) == len(getattr(b, "padding_sql", ()))


# --- what it renders ---------------------------------------------------------------------------


@pytest.mark.parametrize("join_type", ["inner", "left", "right", "LEFT"])
def test_renders_each_join_type(tmp_path, join_type):
    sql = render_sql(tmp_path, HEAD + call(join_type), yml=SOURCES, macros=MACROS)
    assert sql.splitlines()[3:] == [
        f"{join_type.lower()} join ods.clicks as c",
        "  on i.req_id = c.req_id",
        " and i.ad_id = c.ad_id",
        " and c.click_ts between i.imp_ts and i.imp_ts + interval '20 minutes'",
    ]


def test_renders_key_pairs_a_single_key_and_signed_bounds(tmp_path):
    sql = render_sql(tmp_path, HEAD + call(keys="[['req_id', 'request_id'], 'ad_id']",
                                           lower="-90 seconds", upper="1 hour"),
                     yml=SOURCES, macros=MACROS)
    assert sql.splitlines()[4:] == [
        "  on i.req_id = c.request_id",
        " and i.ad_id = c.ad_id",
        " and c.click_ts between i.imp_ts + interval '-90 seconds' and i.imp_ts + interval '1 hour'",
    ]
    sql = render_sql(tmp_path / "2", HEAD + call(keys="'req_id'", lower="0 minutes", upper="0 days"),
                     yml=SOURCES, macros=MACROS)
    # a zero bound is the column itself, as a person would write it
    assert sql.splitlines()[4:] == ["  on i.req_id = c.req_id",
                                    " and c.click_ts between i.imp_ts and i.imp_ts"]


# --- the compiler sees the same join as a hand-written ON clause --------------------------------


@pytest.mark.parametrize("mode", ["stream", "batch"])
@pytest.mark.parametrize("join_type", ["inner", "left", "right"])
def test_same_plan_as_the_hand_written_join(tmp_path, join_type, mode):
    written = hand(f"{join_type.upper()} JOIN",
                   "i.req_id = c.req_id AND i.ad_id = c.ad_id "
                   "AND c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 20 MINUTES")
    assert_same_plan(tmp_path, call(join_type), written, mode)
    _, plan, ir = compile_join(tmp_path / "again", call(join_type), mode)
    assert bounds(ir) == (0, MIN20)
    if mode == "stream":  # the outer side waits for its interval to close, then is padded
        assert len(plan.padding_sql) == (0 if join_type == "inner" else 1)


@pytest.mark.parametrize("mode", ["stream", "batch"])
@pytest.mark.parametrize("lower, upper, condition", [
    ("0 seconds", "1200 seconds",
     "i.req_id = c.req_id AND i.ad_id = c.ad_id "
     "AND c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL '20' MINUTE"),
    ("0 milliseconds", "1200000 milliseconds",
     "c.ad_id = i.ad_id AND c.req_id = i.req_id "
     "AND i.imp_ts <= c.click_ts AND c.click_ts <= i.imp_ts + INTERVAL 1200 SECONDS"),
    ("0 microseconds", "20 minute",
     "i.req_id = c.req_id AND i.ad_id = c.ad_id "
     "AND i.imp_ts >= c.click_ts - INTERVAL 20 MINUTES AND i.imp_ts <= c.click_ts"),

    # several parts add up, as Spark reads the string literal the macro writes
    ("-3 minutes -30 seconds", "1 hour 2 minutes 3 seconds 4 milliseconds 5 microseconds",
     "i.req_id = c.req_id AND i.ad_id = c.ad_id AND c.click_ts BETWEEN "
     "i.imp_ts - INTERVAL 210 SECONDS AND i.imp_ts + INTERVAL 3723004005 MICROSECONDS"),
    ("0 minutes 0 seconds", "20 minutes 0 seconds",
     "i.req_id = c.req_id AND i.ad_id = c.ad_id "
     "AND c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 20 MINUTES"),
])
def test_same_plan_whatever_the_spelling_of_the_bounds(tmp_path, lower, upper, condition, mode):
    assert_same_plan(tmp_path, call("left", lower, upper), hand("LEFT JOIN", condition), mode,
                     same_sql=False)


@pytest.mark.parametrize("mode", ["stream", "batch"])
def test_negative_lower_bound(tmp_path, mode):
    macro = call("left", "-20 minutes", "20 minutes")
    # the same text as `+ INTERVAL -20 MINUTES`, the same join as `- INTERVAL 20 MINUTES`
    assert_same_plan(tmp_path / "a", macro, hand("LEFT JOIN",
                     "i.req_id = c.req_id AND i.ad_id = c.ad_id AND c.click_ts BETWEEN "
                     "i.imp_ts + INTERVAL -20 MINUTES AND i.imp_ts + INTERVAL 20 MINUTES"), mode)
    assert_same_plan(tmp_path / "b", macro, hand("LEFT JOIN",
                     "i.req_id = c.req_id AND i.ad_id = c.ad_id AND c.click_ts BETWEEN "
                     "i.imp_ts - INTERVAL 20 MINUTES AND i.imp_ts + INTERVAL 20 MINUTES"), mode,
                     same_sql=False)
    _, plan, ir = compile_join(tmp_path / "c", macro, mode)
    assert bounds(ir) == (-MIN20, MIN20)
    if mode == "stream":
        prune = {s.relation: s.prune for s in plan.sources}
        (p,) = prune["ods.clicks"]
        assert (p.column, p.lower_us, p.upper_us) == ("click_ts", -MIN20, MIN20)


_UNIT_US = {"microsecond": 1, "millisecond": 1_000, "second": 10**6, "minute": 60 * 10**6,
            "hour": 3600 * 10**6, "day": 86400 * 10**6}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lower=st.tuples(st.integers(-500, 0), st.sampled_from(sorted(_UNIT_US)), st.booleans()),
       upper=st.tuples(st.integers(1, 500), st.sampled_from(sorted(_UNIT_US)), st.booleans()))
def test_bounds_are_read_exactly_in_microseconds(tmp_path_factory, lower, upper):
    def spelled(amount: int, unit: str, plural: bool) -> str:
        return f"{amount} {unit}{'s' if plural else ''}"

    _, plan, ir = compile_join(tmp_path_factory.mktemp("p"),
                               call("inner", spelled(*lower), spelled(*upper)), "stream")
    assert plan is not None
    assert bounds(ir) == (lower[0] * _UNIT_US[lower[1]], upper[0] * _UNIT_US[upper[1]])
    assert only_join(ir).interval.lower_inclusive and only_join(ir).interval.upper_inclusive


def test_swapped_bounds_get_the_compilers_empty_range_warning_at_the_call(tmp_path):
    result, plan, _ = compile_join(tmp_path, call("inner", "20 minutes", "0 seconds"), "stream")
    (warning,) = result.diagnostics
    assert warning.severity == "warning" and "is empty, so it never matches" in warning.message
    assert str(warning.location) == "models/m.sql:4:1"


# --- argument errors -------------------------------------------------------------------------


@pytest.mark.parametrize("macro_call, message", [
    (call("full"), "interval_join: unknown join_type `full`; valid choices: 'inner', 'left', 'right'"),
    (call("left outer"), "unknown join_type `left outer`; valid choices: 'inner', 'left', 'right'"),
    (call(keys="[]"), "interval_join: `keys` must list at least one equality key, e.g. "
                      "keys=['req_id'] or keys=[['left_col', 'right_col']] (got: [])"),
    (call(keys="none"), "`keys` must list at least one equality key"),
    (call(keys="[['req_id']]"), "key `['req_id']` is neither a column name nor a "
                                "[left_col, right_col] pair"),
    (call(keys="[['a', 'b', 'c']]"), "is neither a column name nor a [left_col, right_col] pair"),
    (call(upper="20"), "interval_join: `upper` must be a duration '<integer> <unit>' (one or more "
                       "such parts), unit one of microseconds, milliseconds, seconds, minutes, "
                       "hours, days, e.g. '20 minutes', '3 minutes 30 seconds', '0 seconds' or "
                       "'-20 minutes' (got: 20)"),
    (call(upper="1 month"), "`upper` must be a duration"),
    (call(upper="20 mins"), "`upper` must be a duration"),
    (call(lower="1.5 seconds"), "`lower` must be a duration"),
    (call(lower="-1 hour 30 minutes"), "interval_join: `lower` mixes signs (got: -1 hour 30 "
                                       "minutes); Spark applies each part's own sign"),
    (call(upper="1 hour -30 minutes"), "`upper` mixes signs"),
    (call(upper="3 minutes 1 month"), "`upper` must be a duration"),
    (call(upper="3 minutes and 30 seconds"), "`upper` must be a duration"),
    (call().replace("source('ods', 'clicks')", "'ods.clicks'"),
     "`right` must be a ref() or source() value, e.g. ref('stg_ad_clicks') (got: ods.clicks)"),
    (call().replace("left_time='imp_ts'", "left_time=''"), "`left_time` must be a name"),
    (call().replace(", upper='20 minutes'", ""), "`upper` must be a duration"),
])
def test_argument_errors_name_the_choices_and_the_call(tmp_path, macro_call, message):
    with pytest.raises(SqlflowError) as err:
        compile_join(tmp_path, macro_call, "batch")
    (diag,) = err.value.diagnostics
    assert message in diag.message
    # reported at the model line of the call; the hint names the macro line that raised it
    assert str(diag.location) == "models/m.sql:4"
    assert diag.hint.startswith("") and "(raised in macros/interval_join.sql:" in diag.hint


# --- the repo's demo models ------------------------------------------------------------------

DWD = ("dwd_ad_click_samples", "dwd_ad_clicks_attributed")


@pytest.mark.parametrize("mode", ["stream", "batch"])
def test_repo_dwd_models_are_interval_joins_with_no_diagnostics(mode):
    result = compile_project(ROOT, mode=mode, select=list(DWD))
    ours = [d.format() for d in result.diagnostics
            if any(name in d.format() for name in DWD + ("interval_join",))]
    assert ours == []
    samples, attributed = (result.irs[name] for name in DWD)

    # impressions LEFT JOIN clicks, click within [imp_ts, imp_ts + 20 min]
    join = only_join(samples)
    assert (join.kind, join.join_type, join.left_alias, join.right_alias) == ("interval", "left", "i", "c")
    assert join.keys == (("req_id", "req_id"), ("ad_id", "ad_id"))
    assert join.interval == IntervalBound("imp_ts", "click_ts", 0, MIN20)

    # clicks INNER JOIN impressions, written from the click: the same pairs, mirrored
    join = only_join(attributed)
    assert (join.kind, join.join_type, join.left_alias, join.right_alias) == ("interval", "inner", "c", "i")
    assert join.keys == (("req_id", "req_id"), ("ad_id", "ad_id"))
    b = join.interval
    assert b == IntervalBound("click_ts", "imp_ts", -MIN20, 0)
    assert IntervalBound(b.right_time, b.left_time, -b.upper_us, -b.lower_us) == only_join(samples).interval

    # each model's event time is the one its dt/hour partitions come from
    assert (samples.event_time, attributed.event_time) == ("imp_ts", "click_ts")
    for ir in (samples, attributed):
        outputs = {o.name: o for o in ir.outputs}
        assert outputs["dt"].time_partition and "hour" in outputs

    for name in DWD:
        plan = result.plans[name]
        assert plan.sink.partition_by == ("dt", "hour")
        assert {s.relation for s in plan.sources} == {"dw.stg_ad_impressions", "dw.stg_ad_clicks"}
        if mode == "stream":
            assert (type(plan).__name__, plan.strategy, plan.sink.write) == (
                "StreamPlan", "incremental", "append_once")
            assert len(plan.padding_sql) == (1 if name == "dwd_ad_click_samples" else 0)
            assert all(s.read == "stream" and s.prune for s in plan.sources)
        else:
            assert (type(plan).__name__, plan.sink.write) == ("BatchPlan", "overwrite_partitions")
