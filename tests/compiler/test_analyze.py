"""analyze: rendered model SQL -> ModelIR. No JVM; many one-line cases through shared helpers."""

from __future__ import annotations

import dataclasses
import doctest
import importlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sqlflow.analysis.analyze import analyze
from sqlflow.analysis.ir import InputRel, JoinIR, ModelIR
from sqlflow.project.eventtime import EventTime

MIN = 60_000_000
SEC = 1_000_000

INPUTS = {
    "ods.imp": InputRel("ods.imp", "ods.imp", "source", True, EventTime("imp_ts", "ingest_ts", 5 * MIN),
                        partition_by=("dt", "hour")),
    "ods.clk": InputRel("ods.clk", "ods.clk", "source", True, EventTime("click_ts", "ingest_ts")),
    "ods.raw": InputRel("ods.raw", "ods.raw", "source", True),
    "dw.dim_ad": InputRel("dw.dim_ad", "dim_ad", "model", False, partition_by=("dt",)),
    "dw.dim_user": InputRel("dw.dim_user", "dim_user", "model", False),
    "dw.stg_conv": InputRel("dw.stg_conv", "stg_conv", "model", True, EventTime("conv_ts")),
}


def ir_of(sql: str, mode: str = "stream", **kwargs) -> ModelIR:
    return analyze(sql, model="x", path="models/x.sql", inputs=kwargs.pop("inputs", INPUTS),
                   mode=mode, **kwargs)  # type: ignore[arg-type]


def join_of(on: str, *, left: str = "ods.imp i", right: str = "ods.clk c", how: str = "JOIN",
            where: str = "") -> JoinIR:
    sql = f"SELECT * FROM {left} {how} {right} ON {on}" + (f" WHERE {where}" if where else "")
    joins = ir_of(sql).joins
    assert len(joins) == 1, joins
    return joins[0]


def bound(on: str, **kwargs) -> tuple:
    j = join_of(on, **kwargs)
    assert j.kind == "interval", (j.reason, j.fix)
    b = j.interval
    return (b.lower_us, b.upper_us, b.lower_inclusive, b.upper_inclusive)


KEY = "i.ad_id = c.ad_id AND "


# -- interval bounds: every spelling normalises to bounds of c.click_ts - i.imp_ts ----------
@pytest.mark.parametrize("on, expected", [
    ("c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 20 MINUTES", (0, 20 * MIN, True, True)),
    ("c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL '20' MINUTE", (0, 20 * MIN, True, True)),
    ("c.click_ts BETWEEN i.imp_ts AND i.imp_ts + interval 1200 seconds", (0, 20 * MIN, True, True)),
    ("c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL '1 hour 20 minutes'", (0, 80 * MIN, True, True)),
    ("c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 1 HOUR 20 MINUTES", (0, 80 * MIN, True, True)),
    ("c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL '0 00:20:00' DAY TO SECOND", (0, 20 * MIN, True, True)),
    ("c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 2 DAYS", (0, 2 * 1440 * MIN, True, True)),
    ("c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 1 WEEK", (0, 7 * 1440 * MIN, True, True)),
    ("c.click_ts BETWEEN i.imp_ts AND timestampadd(MINUTE, 20, i.imp_ts)", (0, 20 * MIN, True, True)),
    ("c.click_ts BETWEEN i.imp_ts AND dateadd(SECOND, 1200, i.imp_ts)", (0, 20 * MIN, True, True)),
    ("c.click_ts BETWEEN i.imp_ts AND i.imp_ts + make_dt_interval(0, 0, 20, 0)", (0, 20 * MIN, True, True)),
    ("c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 1500 MICROSECONDS", (0, 1500, True, True)),
    ("c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 3 MILLISECONDS", (0, 3000, True, True)),
    ("c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 1.5 SECONDS", (0, 1_500_000, True, True)),
    ("c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL '0.000001' SECOND", (0, 1, True, True)),
    # negative lower bounds, both bounds negative
    ("c.click_ts >= i.imp_ts - INTERVAL 5 MINUTES AND c.click_ts <= i.imp_ts", (-5 * MIN, 0, True, True)),
    ("c.click_ts BETWEEN i.imp_ts - INTERVAL 1 HOUR AND i.imp_ts - INTERVAL 30 MINUTES", (-60 * MIN, -30 * MIN, True, True)),
    ("c.click_ts BETWEEN i.imp_ts + INTERVAL -5 MINUTES AND i.imp_ts", (-5 * MIN, 0, True, True)),
    ("c.click_ts BETWEEN i.imp_ts - INTERVAL '-5' MINUTE AND i.imp_ts + INTERVAL 6 MINUTES", (5 * MIN, 6 * MIN, True, True)),
    ("c.click_ts BETWEEN timestampadd(SECOND, -5, i.imp_ts) AND i.imp_ts", (-5 * SEC, 0, True, True)),
    # swapped sides: the left time in the middle of the BETWEEN, or on the left of <=/>=
    ("i.imp_ts BETWEEN c.click_ts - INTERVAL 20 MINUTES AND c.click_ts", (0, 20 * MIN, True, True)),
    ("i.imp_ts <= c.click_ts AND i.imp_ts + INTERVAL 20 MINUTES >= c.click_ts", (0, 20 * MIN, True, True)),
    ("c.click_ts + INTERVAL 5 MINUTES >= i.imp_ts AND c.click_ts - INTERVAL 5 MINUTES <= i.imp_ts", (-5 * MIN, 5 * MIN, True, True)),
    # strict comparisons stay strict: evaluated exactly as written
    ("c.click_ts > i.imp_ts AND c.click_ts < i.imp_ts + INTERVAL 20 MINUTES", (0, 20 * MIN, False, False)),
    ("c.click_ts > i.imp_ts AND c.click_ts <= i.imp_ts + INTERVAL 20 MINUTES", (0, 20 * MIN, False, True)),
    ("i.imp_ts < c.click_ts AND i.imp_ts >= c.click_ts - INTERVAL 20 MINUTES", (0, 20 * MIN, False, True)),
    # several bounds: the tightest wins, strict beats inclusive at the same value
    ("c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 20 MINUTES AND c.click_ts < i.imp_ts + INTERVAL 10 MINUTES", (0, 10 * MIN, True, False)),
    ("c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 20 MINUTES AND c.click_ts > i.imp_ts", (0, 20 * MIN, False, True)),
    # equality of the event times is a [0, 0] range
    ("c.click_ts = i.imp_ts", (0, 0, True, True)),
    # parentheses and casts do not hide anything
    ("(c.click_ts BETWEEN (i.imp_ts) AND (i.imp_ts + INTERVAL 20 MINUTES))", (0, 20 * MIN, True, True)),
    ("CAST(c.click_ts AS TIMESTAMP) BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 20 MINUTES", (0, 20 * MIN, True, True)),
])
def test_interval_bounds(on, expected):
    assert bound(KEY + on) == expected


def test_interval_fields():
    j = join_of(KEY + "c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 20 MINUTES", how="LEFT JOIN")
    assert (j.kind, j.join_type, j.left_alias, j.right_alias) == ("interval", "left", "i", "c")
    assert j.keys == (("ad_id", "ad_id"),)
    assert (j.interval.left_time, j.interval.right_time) == ("imp_ts", "click_ts")
    assert "NULL keys never match" in j.notes
    assert any("padded" in n for n in j.notes)


def test_hand_written_and_macro_spellings_classify_identically():
    macro = join_of("i.ad_id = c.ad_id AND c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 20 MINUTES")
    hand = join_of("c.click_ts >= i.imp_ts AND c.ad_id = i.ad_id "
                   "AND i.imp_ts >= c.click_ts - interval '1200' second")
    strip = lambda j: dataclasses.replace(j, location=None)  # noqa: E731
    assert strip(macro) == strip(hand)


def test_bound_in_where_counts_for_inner_joins_only():
    where = "c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 20 MINUTES"
    assert join_of("i.ad_id = c.ad_id", where=where).kind == "interval"
    assert join_of("i.ad_id = c.ad_id", where=where, how="LEFT JOIN").kind == "invalid"
    comma = ir_of(f"SELECT * FROM ods.imp i, ods.clk c WHERE i.ad_id = c.ad_id AND {where}").joins[0]
    assert (comma.kind, comma.join_type) == ("interval", "cross")


def test_expression_keys_and_reversed_key_sides():
    j = join_of("lower(c.ad) = lower(i.ad) AND c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 1 MINUTE")
    assert j.keys == (("LOWER(i.ad)", "LOWER(c.ad)"),)


@pytest.mark.parametrize("how, join_type", [
    ("JOIN", "inner"), ("INNER JOIN", "inner"), ("LEFT JOIN", "left"), ("LEFT OUTER JOIN", "left"),
    ("RIGHT JOIN", "right"), ("FULL OUTER JOIN", "full"), ("LEFT SEMI JOIN", "left_semi"),
    ("LEFT ANTI JOIN", "left_anti"),
])
def test_join_types_of_interval_joins(how, join_type):
    j = join_of(KEY + "c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 20 MINUTES", how=how)
    assert (j.kind, j.join_type) == ("interval", join_type)


# -- kinds: stream-static, static-static, invalid --------------------------------------
@pytest.mark.parametrize("sql, kind", [
    ("SELECT * FROM ods.imp i JOIN dw.dim_ad d ON i.ad_id = d.ad_id", "stream_static"),
    ("SELECT * FROM ods.imp i LEFT JOIN dw.dim_ad d ON i.ad_id = d.ad_id", "stream_static"),
    ("SELECT * FROM dw.dim_ad d JOIN ods.imp i ON i.ad_id = d.ad_id", "stream_static"),
    ("SELECT * FROM dw.dim_ad d RIGHT JOIN ods.imp i ON i.ad_id = d.ad_id", "stream_static"),
    ("SELECT * FROM dw.dim_ad d JOIN dw.dim_user u ON u.id = d.owner", "static_static"),
    ("SELECT * FROM dw.dim_ad d CROSS JOIN dw.dim_user u", "static_static"),
    ("SELECT * FROM dw.dim_ad d LEFT JOIN ods.imp i ON i.ad_id = d.ad_id", "invalid"),
    ("SELECT * FROM ods.imp i RIGHT JOIN dw.dim_ad d ON i.ad_id = d.ad_id", "invalid"),
    ("SELECT * FROM ods.imp i FULL JOIN dw.dim_ad d ON i.ad_id = d.ad_id", "invalid"),
    ("SELECT * FROM ods.imp i JOIN ods.clk c ON i.ad_id = c.ad_id", "invalid"),
    ("SELECT * FROM ods.imp i FULL JOIN ods.clk c ON i.ad_id = c.ad_id", "invalid"),
    ("SELECT * FROM ods.imp i CROSS JOIN ods.clk c", "invalid"),
    ("SELECT * FROM ods.imp i JOIN ods.clk c USING (ad_id)", "invalid"),
])
def test_join_kind(sql, kind):
    assert ir_of(sql).joins[0].kind == kind


def test_stream_static_fields():
    j = ir_of("SELECT * FROM ods.imp i LEFT JOIN dw.dim_ad d ON d.ad_id = i.ad_id").joins[0]
    assert (j.left_alias, j.right_alias, j.left_streaming, j.right_streaming) == ("i", "d", True, False)
    assert j.keys == (("ad_id", "ad_id"),)


@pytest.mark.parametrize("on, reason", [
    ("i.ad_id = c.ad_id", "has no time bound"),
    ("c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 20 MINUTES", "has no equality key"),
    (KEY + "c.click_ts >= i.imp_ts", "has only a lower time bound"),
    (KEY + "c.click_ts < i.imp_ts + INTERVAL 1 HOUR", "has only an upper time bound"),
    (KEY + "c.other_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 20 MINUTES", "not the event-time columns"),
    (KEY + "c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 1 MONTH", "no fixed length"),
    ("ad_id = c.ad_id AND click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 1 MINUTE", "is not qualified"),
    (KEY + "(c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 1 MINUTE OR c.ad_id = 0)", "has no time bound"),
    (KEY + "c.click_ts NOT BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 1 MINUTE", "has no time bound"),
])
def test_invalid_join_reasons(on, reason):
    j = join_of(on)
    assert j.kind == "invalid"
    assert reason in j.reason, j.reason
    assert j.fix


def test_join_without_event_time_is_invalid():
    j = join_of("r.ad_id = c.ad_id", left="ods.raw r")
    assert j.kind == "invalid" and "`r` has no event-time column" in j.reason


def test_unqualified_columns_resolve_against_declared_columns():
    inputs = {**INPUTS, "ods.clk": dataclasses.replace(INPUTS["ods.clk"], columns=("ad_id", "click_ts", "cid"))}
    sql = ("SELECT * FROM ods.imp i JOIN ods.clk c ON i.ad_id = cid "
           "AND click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 1 MINUTE")
    assert ir_of(sql, inputs=inputs).joins[0].kind == "interval"


def test_three_way_join_chain():
    sql = """SELECT * FROM ods.imp i
    JOIN ods.clk c ON i.ad_id = c.ad_id AND c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 20 MINUTES
    JOIN dw.dim_ad d ON d.ad_id = i.ad_id
    LEFT JOIN dw.stg_conv v ON v.click_id = c.click_id AND v.conv_ts BETWEEN c.click_ts AND c.click_ts + INTERVAL 1 DAY"""
    kinds = [(j.kind, j.left_alias, j.right_alias) for j in ir_of(sql).joins]
    assert kinds == [("interval", "i", "c"), ("stream_static", "i", "d"), ("interval", "c", "v")]


def test_join_in_cte_and_subquery_sources():
    sql = """WITH imps AS (SELECT imp_ts AS t, ad_id FROM ods.imp)
    SELECT * FROM imps i JOIN (SELECT click_ts, ad_id FROM ods.clk) c
      ON i.ad_id = c.ad_id AND c.click_ts BETWEEN i.t - INTERVAL 1 MINUTE AND i.t"""
    j = ir_of(sql).joins[0]
    assert j.kind == "interval"
    assert (j.interval.left_time, j.interval.right_time, j.interval.lower_us) == ("t", "click_ts", -MIN)


def test_empty_interval_is_still_an_interval_join():
    j = join_of(KEY + "c.click_ts BETWEEN i.imp_ts + INTERVAL 1 MINUTE AND i.imp_ts")
    assert j.kind == "interval" and j.interval.empty


# -- event time through projections, aliases, CTEs and subqueries -----------------------
@pytest.mark.parametrize("sql, event_time", [
    ("SELECT i.imp_ts AS ts, i.ad_id FROM ods.imp i", "ts"),
    ("SELECT imp_ts FROM ods.imp", "imp_ts"),
    ("SELECT * FROM ods.imp", "imp_ts"),
    ("SELECT i.* FROM ods.imp i", "imp_ts"),
    ("SELECT CAST(imp_ts AS TIMESTAMP) AS t FROM ods.imp", "t"),
    ("SELECT to_date(imp_ts) AS dt FROM ods.imp", None),
    ("SELECT ad_id FROM ods.imp", None),
    ("WITH x AS (SELECT imp_ts AS t0 FROM ods.imp) SELECT t0 AS ts FROM x", "ts"),
    ("WITH x AS (SELECT imp_ts AS t0 FROM ods.imp), y AS (SELECT * FROM x) SELECT y.t0 AS ts FROM y", "ts"),
    ("SELECT s.t FROM (SELECT imp_ts AS t FROM ods.imp) s", "t"),
    ("SELECT s.a FROM (SELECT imp_ts FROM ods.imp) AS s(a)", "a"),
    ("SELECT c.click_ts, i.imp_ts FROM ods.imp i JOIN ods.clk c ON i.k = c.k "
     "AND c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 1 MINUTE", "imp_ts"),
    ("SELECT window.start AS ws, count(*) AS n FROM ods.clk GROUP BY window(click_ts, '1 hour')", "ws"),
    ("SELECT w.end AS we FROM (SELECT window(click_ts, '5 minutes') AS w, count(*) AS n FROM ods.clk "
     "GROUP BY window(click_ts, '5 minutes')) t", "we"),
    ("SELECT imp_ts AS ts FROM ods.imp UNION ALL SELECT click_ts AS ts FROM ods.clk", "ts"),
])
def test_event_time_propagation(sql, event_time):
    assert ir_of(sql).event_time == event_time


def test_output_columns():
    ir = ir_of("SELECT i.imp_ts AS ts, to_date(i.imp_ts) AS dt, i.ad_id FROM ods.imp i")
    cols = {c.name: (c.event_time, c.time_partition, c.origin) for c in ir.outputs}
    assert cols == {"ts": (True, False, "i.imp_ts"), "dt": (False, True, None), "ad_id": (False, False, "i.ad_id")}
    assert ir.outputs_complete
    assert not ir_of("SELECT * FROM ods.imp").outputs_complete


def test_partition_by_and_inputs():
    ir = ir_of("SELECT i.*, d.name FROM ods.imp i JOIN dw.dim_ad d ON d.ad_id = i.ad_id", partition_by=["dt", "hour"])
    assert ir.partition_by == ("dt", "hour")
    assert ir.tables == {"i": INPUTS["ods.imp"], "d": INPUTS["dw.dim_ad"]}
    assert [r.relation for r in ir.inputs] == ["ods.imp", "dw.dim_ad"]
    assert ir.streaming


def test_unknown_table_is_static_and_listed():
    ir = ir_of("SELECT * FROM ods.imp i JOIN other.t o ON o.k = i.k")
    assert [r.input.relation for r in ir.unresolved] == ["other.t"]
    assert ir.joins[0].kind == "stream_static"


# -- aggregations ------------------------------------------------------------------------
@pytest.mark.parametrize("sql, kind", [
    ("SELECT ad_id, count(*) FROM ods.clk GROUP BY ad_id, window(click_ts, '1 hour')", "window"),
    ("SELECT ad_id, count(*) FROM ods.clk GROUP BY ad_id, window(click_ts, '1 hour', '5 minutes')", "window"),
    ("SELECT count(*) FROM ods.clk GROUP BY session_window(click_ts, '5 minutes')", "session_window"),
    ("SELECT window(click_ts, '1 hour') AS w, count(*) FROM ods.clk GROUP BY w", "window"),
    ("SELECT to_date(click_ts) AS d, count(*) FROM ods.clk GROUP BY 1", "time_partition"),
    ("SELECT to_date(click_ts) AS d, count(*) FROM ods.clk GROUP BY d", "time_partition"),
    ("SELECT count(*) FROM ods.clk GROUP BY date(click_ts)", "time_partition"),
    ("SELECT count(*) FROM ods.clk GROUP BY CAST(click_ts AS DATE), ad_id", "time_partition"),
    ("SELECT count(*) FROM ods.clk GROUP BY date_trunc('hour', click_ts)", "time_partition"),
    ("SELECT count(*) FROM ods.clk GROUP BY date_format(click_ts, 'yyyy-MM-dd HH')", "time_partition"),
    ("SELECT dt, hour, count(*) FROM ods.imp GROUP BY dt, hour", "time_partition"),
    ("SELECT count(*) FROM ods.clk GROUP BY click_ts, ad_id", "event_time"),
    ("WITH x AS (SELECT to_date(click_ts) AS day, ad_id FROM ods.clk) SELECT day, count(*) FROM x GROUP BY day", "time_partition"),
    ("SELECT ad_id, count(*) FROM ods.clk GROUP BY ad_id", "unbounded"),
    ("SELECT count(*) FROM ods.clk", "unbounded"),
    ("SELECT hour(click_ts), count(*) FROM ods.clk GROUP BY hour(click_ts)", "unbounded"),
    ("SELECT count(*) FROM ods.clk GROUP BY date_format(click_ts, 'HH')", "unbounded"),
    ("SELECT count(*) FROM ods.imp GROUP BY hour", "unbounded"),
    ("SELECT count(*) FROM ods.clk GROUP BY window(other_ts, '1 hour')", "unbounded"),
    ("SELECT DISTINCT ad_id FROM ods.clk", "unbounded"),
    ("SELECT DISTINCT ad_id, to_date(click_ts) FROM ods.clk", "time_partition"),
])
def test_aggregation_kind(sql, kind):
    aggs = ir_of(sql).aggregations
    assert [a.kind for a in aggs] == [kind]


def test_aggregation_fields():
    agg = ir_of("SELECT ad_id, count(*) FROM ods.clk GROUP BY ad_id, window(click_ts, '1 hour', '5 minutes')").aggregations[0]
    assert agg.streaming and agg.group_keys == ("ad_id", "WINDOW(click_ts, '1 hour', '5 minutes')")
    assert (agg.window.function, agg.window.time_column, agg.window.duration, agg.window.slide) == (
        "window", "click_ts", "1 hour", "5 minutes")


def test_static_aggregation_in_a_streaming_model_is_not_streaming():
    sql = """WITH top AS (SELECT ad_id, max(bid) AS bid FROM dw.dim_ad GROUP BY ad_id)
    SELECT i.*, t.bid FROM ods.imp i JOIN top t ON t.ad_id = i.ad_id"""
    ir = ir_of(sql)
    assert [(a.scope, a.streaming, a.kind) for a in ir.aggregations] == [("CTE `top`", False, "unbounded")]
    assert ir.joins[0].kind == "stream_static"


def test_aggregate_after_interval_join_grouped_by_window():
    sql = """SELECT i.ad_id, window(i.imp_ts, '1 hour') AS w, count(c.ad_id) AS clicks
    FROM ods.imp i LEFT JOIN ods.clk c ON i.ad_id = c.ad_id
      AND c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 20 MINUTES
    GROUP BY i.ad_id, window(i.imp_ts, '1 hour')"""
    ir = ir_of(sql)
    assert [j.kind for j in ir.joins] == ["interval"] and ir.aggregations[0].kind == "window"


# -- window functions and the dedup pattern ------------------------------------------------
ROWNUM = "row_number() OVER (PARTITION BY ad_id ORDER BY click_ts)"


@pytest.mark.parametrize("sql", [
    f"SELECT * FROM (SELECT *, {ROWNUM} AS rn FROM ods.clk) WHERE rn = 1",
    f"SELECT * FROM (SELECT *, {ROWNUM} AS rn FROM ods.clk) t WHERE t.rn <= 1",
    f"SELECT * FROM (SELECT *, {ROWNUM} AS rn FROM ods.clk) t WHERE 1 = rn AND ad_id > 0",
    f"SELECT * FROM (SELECT *, {ROWNUM} AS rn FROM ods.clk) t WHERE rn < 2",
    f"WITH r AS (SELECT *, {ROWNUM} AS rn FROM ods.clk) SELECT * FROM r WHERE rn = 1",
    f"SELECT * FROM ods.clk QUALIFY {ROWNUM} = 1",
    f"SELECT *, {ROWNUM} AS rn FROM ods.clk QUALIFY rn = 1",
])
def test_dedup_pattern_recognised(sql):
    ir = ir_of(sql)
    assert len(ir.dedups) == 1 and all(w.dedup for w in ir.windows)
    d = ir.dedups[0]
    assert (d.keys, d.order_by, d.streaming) == (("ad_id",), ("click_ts",), True)


@pytest.mark.parametrize("sql", [
    f"SELECT * FROM (SELECT *, {ROWNUM} AS rn FROM ods.clk) WHERE rn = 2",
    f"SELECT * FROM (SELECT *, {ROWNUM} AS rn FROM ods.clk) WHERE rn = 1 OR ad_id = 0",
    f"SELECT * FROM (SELECT *, {ROWNUM} AS rn FROM ods.clk)",
    f"SELECT *, {ROWNUM} AS rn FROM ods.clk",
    f"WITH r AS (SELECT *, {ROWNUM} AS rn FROM ods.clk) SELECT * FROM r WHERE rn = 1 UNION ALL SELECT * FROM r",
    "SELECT * FROM (SELECT *, rank() OVER (PARTITION BY ad_id ORDER BY click_ts) AS rn FROM ods.clk) WHERE rn = 1",
])
def test_not_a_dedup(sql):
    ir = ir_of(sql)
    assert not ir.dedups and any(not w.dedup for w in ir.windows)


def test_dedup_keys_include_time():
    sql = ("SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY ad_id, to_date(click_ts) "
           "ORDER BY click_ts DESC) AS rn FROM ods.clk) WHERE rn = 1")
    d = ir_of(sql).dedups[0]
    assert d.keys_include_time and d.order_by == ("click_ts DESC",) and d.row_number == "rn"


def test_window_function_fields():
    w = ir_of("SELECT lag(x) OVER (PARTITION BY ad_id ORDER BY click_ts) AS p FROM ods.clk").windows[0]
    assert (w.function, w.partition_by, w.order_by, w.streaming, w.dedup) == (
        "lag", ("ad_id",), ("click_ts",), True, False)


# -- determinism -------------------------------------------------------------------------
@pytest.mark.parametrize("expr, name, category", [
    ("rand()", "rand", "random"), ("random()", "random", "random"), ("randn(1)", "randn", "random"),
    ("uuid()", "uuid", "random"), ("shuffle(a)", "shuffle", "random"),
    ("now()", "now", "clock"), ("current_timestamp()", "current_timestamp", "clock"),
    ("current_timestamp", "current_timestamp", "clock"), ("current_date", "current_date", "clock"),
    ("localtimestamp", "localtimestamp", "clock"), ("unix_timestamp()", "unix_timestamp", "clock"),
    ("input_file_name()", "input_file_name", "origin"),
    ("monotonically_increasing_id()", "monotonically_increasing_id", "row_id"),
    ("spark_partition_id()", "spark_partition_id", "row_id"),
    ("first(a)", "first", "order"), ("collect_list(a)", "collect_list", "order"),
])
def test_nondeterministic_calls(expr, name, category):
    calls = ir_of(f"SELECT {expr} AS v FROM ods.clk").nondeterministic
    assert [(c.name, c.category) for c in calls] == [(name, category)]


@pytest.mark.parametrize("expr", [
    "sort_array(collect_list(a))", "array_sort(collect_set(a))", "unix_timestamp(click_ts)",
    "current_timezone()", "xxhash64(ad_id)", "to_date(click_ts)",
])
def test_deterministic_calls(expr):
    assert ir_of(f"SELECT {expr} AS v FROM ods.clk GROUP BY 1").nondeterministic == ()


def test_clauses():
    ir = ir_of("SELECT * FROM ods.clk ORDER BY click_ts LIMIT 5")
    assert [(c.clause, c.streaming) for c in ir.clauses] == [("order_by", True), ("limit", True)]
    static = ir_of("SELECT * FROM ods.clk c WHERE c.ad_id IN (SELECT ad_id FROM dw.dim_ad ORDER BY 1 LIMIT 3)")
    assert [(c.clause, c.streaming) for c in static.clauses] == [("order_by", False), ("limit", False)]


# -- IR values: printable, JSON-able, deterministic -----------------------------------------
MODEL = """WITH imp AS (SELECT imp_id, ad_id, imp_ts, to_date(imp_ts) AS dt FROM ods.imp)
SELECT i.imp_id, i.imp_ts AS ts, i.dt, c.click_ts, d.name, rand() AS r
FROM imp i
LEFT JOIN ods.clk c ON i.ad_id = c.ad_id AND c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 20 MINUTES
JOIN dw.dim_ad d ON d.ad_id = i.ad_id
ORDER BY ts"""


def test_to_dict_is_json_and_excludes_the_ast():
    ir = ir_of(MODEL, partition_by=("dt",))
    data = json.loads(json.dumps(ir.to_dict()))
    assert "ast" not in data and "sql" not in data
    assert data["joins"][0]["interval"]["upper_us"] == 20 * MIN
    assert data["joins"][0]["location"] == "models/x.sql:4:1"
    assert ir.to_json() == ir_of(MODEL, partition_by=("dt",)).to_json()
    assert "ast" not in repr(ir) and "ModelIR(model='x'" in repr(ir)


SQL_SNIPPETS = st.sampled_from([
    MODEL,
    f"SELECT * FROM (SELECT *, {ROWNUM} AS rn FROM ods.clk) WHERE rn = 1",
    "SELECT ad_id, count(*) FROM ods.clk GROUP BY ad_id, window(click_ts, '1 hour')",
    "SELECT * FROM ods.imp i JOIN ods.clk c ON i.ad_id = c.ad_id ORDER BY 1 LIMIT 3",
])


@settings(max_examples=20, deadline=None)
@given(SQL_SNIPPETS, st.sampled_from(["stream", "batch"]))
def test_analyze_is_deterministic(sql, mode):
    assert ir_of(sql, mode).to_dict() == ir_of(sql, mode).to_dict()


UNITS = [("MICROSECONDS", 1), ("MILLISECONDS", 1_000), ("SECONDS", SEC), ("MINUTES", MIN), ("HOURS", 60 * MIN)]


def _spell(us: int) -> str:
    """`i.imp_ts + INTERVAL n UNIT` for `us` microseconds, in the coarsest exact unit."""
    name, size = next((n, s) for n, s in reversed(UNITS) if us % s == 0)
    n = us // size
    if n == 0:
        return "i.imp_ts"
    return f"i.imp_ts {'+' if n > 0 else '-'} INTERVAL {abs(n)} {name}"


@settings(max_examples=60, deadline=None)
@given(st.integers(-10**11, 10**11), st.integers(0, 10**11), st.booleans(), st.booleans(), st.booleans())
def test_generated_interval_bounds_round_trip(lower, width, lo_inc, hi_inc, swap):
    upper = lower + width
    lo_op, hi_op = (">=" if lo_inc else ">"), ("<=" if hi_inc else "<")
    if swap:  # the same bounds written with the left time on the left-hand side
        flip = {">=": "<=", ">": "<", "<=": ">=", "<": ">"}
        on = f"{_spell(lower)} {flip[lo_op]} c.click_ts AND {_spell(upper)} {flip[hi_op]} c.click_ts"
    else:
        on = f"c.click_ts {lo_op} {_spell(lower)} AND c.click_ts {hi_op} {_spell(upper)}"
    assert bound(KEY + on) == (lower, upper, lo_inc, hi_inc)
    j = join_of(KEY + on)
    again = join_of(KEY + j.interval.predicate_sql("i", "c"))
    assert again.interval == j.interval


@pytest.mark.parametrize("module", [
    "sqlflow.dialect", "sqlflow.analysis.ir", "sqlflow.analysis.analyze", "sqlflow.analysis.passes.positions",
    "sqlflow.analysis.passes.timecols", "sqlflow.analysis.passes.scopes", "sqlflow.analysis.passes.joins",
    "sqlflow.analysis.passes.aggregates", "sqlflow.analysis.passes.windows", "sqlflow.analysis.passes.determinism",
    "sqlflow.analysis.passes.clauses",
])
def test_doctests(module):
    result = doctest.testmod(importlib.import_module(module))
    assert result.failed == 0 and result.attempted > 0


def test_names_resolve_case_insensitively_and_catalog_qualified():
    j = join_of("I.AD_ID = c.ad_id AND C.Click_Ts BETWEEN i.IMP_TS AND i.imp_ts + INTERVAL 1 MINUTE",
                right="spark_catalog.ods.clk c")
    assert j.kind == "interval" and j.interval.upper_us == MIN


def test_count_star_is_not_a_star_expansion():
    ir = ir_of("SELECT dt, count(*) FROM ods.imp GROUP BY dt")
    assert [c.name for c in ir.outputs] == ["dt", "COUNT(*)"] and ir.outputs_complete


def test_ir_items_point_back_to_their_ast_nodes():
    from sqlglot import exp

    ir = ir_of(MODEL)
    assert [j.node for j in ir.joins] == list(ir.ast.find_all(exp.Join))
    assert all(any(j.node is n for n in ir.ast.find_all(exp.Join)) for j in ir.joins)
    assert "node" not in json.dumps(ir.to_dict())
    dedup = ir_of(f"SELECT * FROM ods.clk QUALIFY {ROWNUM} = 1").dedups[0]
    assert isinstance(dedup.node, exp.Window) and dedup.node.find_ancestor(exp.Qualify) is not None


def test_set_operation_branches_have_their_own_scope_labels():
    sql = ("SELECT * FROM ods.imp i JOIN ods.clk c ON i.k = c.k UNION ALL "
           "SELECT * FROM ods.imp i JOIN dw.dim_ad d ON i.k = d.k")
    assert [(j.scope, j.index, j.kind) for j in ir_of(sql).joins] == [
        ("UNION branch 1 of the model query", 0, "invalid"),
        ("UNION branch 2 of the model query", 0, "stream_static")]
