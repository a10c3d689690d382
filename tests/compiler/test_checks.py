"""Stream-safety checks: one error per rejected construct, with its message and path:line:col."""

from __future__ import annotations

import dataclasses

import pytest

from sqlflow.analysis.stream_safety import check
from sqlflow.errors import DiagnosticSink, Location, SqlflowError

from .test_analyze import INPUTS, ir_of

E = "models/x.sql:{}: error: model `x`: "


def diags(sql: str, mode: str = "stream", **kwargs) -> list[str]:
    return [d.format() for d in check(ir_of(sql, mode, **kwargs))]


def one(sql: str, mode: str = "stream", **kwargs) -> str:
    found = diags(sql, mode, **kwargs)
    assert len(found) == 1, found
    return found[0]


def test_rand_reports_its_line_and_column():
    sql = "SELECT ad_id,\n       click_ts,\n         rand() AS r\nFROM ods.clk"
    assert one(sql) == (
        E.format("3:10") + "`rand()` is not deterministic: a stream and its backfill would give "
        "different rows; derive it from the row, e.g. `pmod(xxhash64(<key columns>), 100)`"
    )


@pytest.mark.parametrize("expr, what, fix", [
    ("now()", "`now()` reads the wall clock", "use the row's event time `click_ts` instead"),
    ("current_timestamp", "`current_timestamp()` reads the wall clock", "event time `click_ts`"),
    ("current_date()", "`current_date()` reads the wall clock", "`to_date(click_ts)`"),
    ("localtimestamp", "`localtimestamp()` reads the wall clock", "event time `click_ts`"),
    ("uuid()", "`uuid()` is not deterministic", "`sha2(concat_ws('|', <key columns>, <event time>), 256)`"),
    ("randn()", "`randn()` is not deterministic", "xxhash64"),
    ("input_file_name()", "`input_file_name()` depends on the file a row was read from", "drop it"),
    ("monotonically_increasing_id()", "`monotonically_increasing_id()` depends on how rows are split",
     "`xxhash64(<key columns>, <event time>)`"),
    ("first(ad_id)", "`first()` depends on the order rows arrive in", "`min_by(x, click_ts)`"),
    ("collect_list(ad_id)", "`collect_list()` depends on the order", "`array_sort(collect_list(...))`"),
])
def test_nondeterministic_function_error(expr, what, fix):
    sql = f"SELECT to_date(click_ts) AS dt,\n  {expr} AS v\nFROM ods.clk\nGROUP BY 1"
    found = one(sql)
    assert found.startswith(E.format("2:3") + what), found
    assert "a stream and its backfill would give different rows" in found
    assert fix in found


def test_join_of_streams_without_time_bound():
    sql = "SELECT i.ad_id\nFROM ods.imp i\nJOIN ods.clk c ON i.ad_id = c.ad_id"
    assert one(sql) == (
        E.format("3:1") + "join of two streams `i` and `c` has no time bound (unbounded state); "
        "add `AND c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 20 MINUTES` or make `c` a dimension"
    )


@pytest.mark.parametrize("join, where, fix", [
    ("  LEFT OUTER JOIN ods.clk c ON c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 1 HOUR", "3:3",
     "has no equality key between them (unbounded state); add an equality on a shared key, e.g. `AND c.<key> = i.<key>`"),
    ("  FULL JOIN ods.clk c ON i.ad_id = c.ad_id AND c.click_ts >= i.imp_ts", "3:3",
     "has only a lower time bound (`c.click_ts >= i.imp_ts`), so its state is unbounded; "
     "add an upper bound, e.g. `AND c.click_ts <= i.imp_ts + INTERVAL 20 MINUTES`"),
    ("  JOIN ods.clk c ON i.ad_id = c.ad_id AND c.click_ts <= i.imp_ts + INTERVAL 1 HOUR", "3:3",
     "has only an upper time bound (`c.click_ts <= i.imp_ts + INTERVAL '1' HOUR`), so its state is "
     "unbounded; add a lower bound, e.g. `AND c.click_ts >= i.imp_ts`"),
    ("  CROSS JOIN ods.clk c", "3:3",
     "is a cross join: every pair of rows is kept forever; join on a key and a time range: "
     "`ON c.<key> = i.<key> AND c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 20 MINUTES`"),
    ("  JOIN ods.clk c ON i.ad_id = c.ad_id AND c.seen_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 1 HOUR", "3:3",
     "bounds `i.imp_ts`/`c.seen_ts`, not the event-time columns `i.imp_ts` and `c.click_ts` (unbounded state); "
     "bound the event times instead: `AND c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 20 MINUTES`"),
])
def test_invalid_stream_join_messages(join, where, fix):
    sql = f"SELECT i.ad_id\nFROM ods.imp i\n{join}"
    assert one(sql) == E.format(where) + "join of two streams `i` and `c` " + fix


def test_join_stream_with_a_stream_without_event_time():
    sql = "SELECT * FROM ods.imp i JOIN ods.raw r ON r.ad_id = i.ad_id"
    assert one(sql) == (
        E.format("1:25") + "join of two streams `i` and `r` cannot be bounded: `r` has no event-time "
        "column; declare `event_time` for `r` (in its yml), or make `r` a dimension"
    )


def test_static_side_preserved_in_a_stream_static_join():
    sql = "SELECT *\nFROM dw.dim_ad d\nLEFT JOIN ods.imp i ON i.ad_id = d.ad_id"
    assert one(sql) == (
        E.format("3:1") + "left join keeps rows of the static side `d` that depend on the whole stream "
        "`i`; each micro-batch would emit them again; make the stream the preserved side "
        "(`i LEFT JOIN d`), or use an inner join"
    )


def test_full_outer_join_of_streams_is_allowed_only_as_an_interval_join():
    ok = ("SELECT * FROM ods.imp i FULL OUTER JOIN ods.clk c ON i.ad_id = c.ad_id "
          "AND c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 20 MINUTES")
    assert diags(ok) == []
    bad = "SELECT * FROM ods.imp i FULL OUTER JOIN ods.clk c ON i.ad_id = c.ad_id"
    assert "join of two streams `i` and `c` has no time bound" in one(bad)


def test_aggregation_without_event_time_window():
    sql = "SELECT ad_id, count(*) AS n\nFROM ods.clk\nGROUP BY ad_id"
    assert one(sql) == (
        E.format("3:1") + "aggregation over a stream is grouped by `ad_id`, which is not an event-time "
        "window or event-time partition column (unbounded state); add `window(click_ts, '1 hour')` "
        "to the GROUP BY, or group by the event date `to_date(click_ts)`"
    )


def test_global_aggregate_and_distinct():
    assert one("SELECT count(*) AS n FROM ods.clk") == (
        E.format("1:8") + "aggregation over a stream has no GROUP BY: a running total over all time; "
        "add `GROUP BY window(click_ts, '1 hour')`"
    )
    found = one("SELECT DISTINCT ad_id FROM ods.clk")
    assert found.startswith(E.format("1:8") + "SELECT DISTINCT over a stream keeps every distinct row forever")
    assert "add `to_date(click_ts)`" in found


def test_aggregation_in_a_cte_names_the_cte():
    sql = "WITH per_ad AS (\n  SELECT ad_id, count(*) AS n FROM ods.clk GROUP BY ad_id\n)\nSELECT * FROM per_ad"
    found = one(sql)
    assert found.startswith(E.format("2:44") + "aggregation in CTE `per_ad` over a stream is grouped by `ad_id`")


def test_ambiguous_group_key_says_so():
    sql = ("SELECT dt, count(*) AS n FROM ods.clk c JOIN dw.dim_user u ON u.id = c.user_id GROUP BY dt")
    found = one(sql)
    assert "column `dt` is not qualified and could come from any of `c`, `u`; qualify it" in found


@pytest.mark.parametrize("tail, clause, where, fix", [
    ("ORDER BY click_ts", "global ORDER BY over a stream", "3:1", "remove the ORDER BY"),
    ("LIMIT 10", "LIMIT over a stream", "3:1",
     "remove the LIMIT; to keep one row per key use `row_number() OVER (PARTITION BY <key> ORDER BY click_ts) = 1`"),
])
def test_order_by_and_limit(tail, clause, where, fix):
    found = one(f"SELECT ad_id, click_ts\nFROM ods.clk\n{tail}")
    assert found.startswith(E.format(where) + clause), found
    assert fix in found


def test_window_function_over_stream():
    sql = "SELECT ad_id,\n  lag(click_ts) OVER (PARTITION BY ad_id ORDER BY click_ts) AS prev\nFROM ods.clk"
    assert one(sql) == (
        E.format("2:3") + "window function `lag() OVER (...)` over a stream needs every earlier row of its "
        "partition (unbounded state); use an aggregation grouped by `window(click_ts, '1 hour')` instead, "
        "or keep one row per key with `row_number() OVER (PARTITION BY ad_id ORDER BY click_ts) = 1`"
    )


def test_row_number_without_the_dedup_filter():
    sql = "SELECT *, row_number() OVER (PARTITION BY ad_id ORDER BY click_ts) AS rn FROM ods.clk"
    found = one(sql)
    assert found.startswith(E.format("1:11") + "`row_number()` over a stream is only allowed as the dedup pattern")
    assert "filter `WHERE rn = 1`" in found


@pytest.mark.parametrize("sql", [
    "SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY ad_id ORDER BY click_ts) AS rn FROM ods.clk) WHERE rn = 1",
    "SELECT * FROM ods.clk QUALIFY row_number() OVER (PARTITION BY ad_id ORDER BY click_ts) = 1",
    "WITH d AS (SELECT *, row_number() OVER (PARTITION BY ad_id ORDER BY click_ts DESC) AS rn FROM ods.clk)\n"
    "SELECT ad_id, click_ts FROM d WHERE rn <= 1",
])
def test_dedup_pattern_is_accepted(sql):
    assert diags(sql) == []


def test_union_distinct_of_streams():
    sql = "SELECT ad_id FROM ods.clk\nUNION\nSELECT ad_id FROM ods.imp"
    found = one(sql)
    assert found.startswith(E.format("2:1") + "UNION (distinct) of streams keeps every row forever")
    assert "use UNION ALL" in found
    assert diags("SELECT ad_id FROM ods.clk UNION ALL SELECT ad_id FROM ods.imp") == []


def test_subquery_over_a_stream_in_an_expression():
    found = one("SELECT * FROM ods.imp i WHERE i.ad_id IN (SELECT ad_id FROM ods.clk)")
    assert "subquery over a stream inside an expression needs the whole stream" in found


def test_every_error_is_reported_in_file_order():
    sql = """SELECT i.ad_id, now() AS loaded_at,
  count(*) OVER (PARTITION BY i.ad_id) AS n
FROM ods.imp i
JOIN ods.clk c ON i.ad_id = c.ad_id
ORDER BY 1
LIMIT 5"""
    found = diags(sql)
    assert [f.split(": error")[0] for f in found] == [
        "models/x.sql:1:17", "models/x.sql:2:3", "models/x.sql:4:1", "models/x.sql:5:1", "models/x.sql:6:1"]
    assert all(": error: model `x`: " in f for f in found)
    sink = DiagnosticSink(check(ir_of(sql)))
    with pytest.raises(SqlflowError) as err:
        sink.raise_if_errors()
    assert len(err.value.diagnostics) == 5 and str(err.value).count("\n") == 4


def test_batch_mode_gives_the_same_findings_as_warnings():
    sql = "SELECT ad_id, rand() AS r, count(*) AS n\nFROM ods.clk\nGROUP BY ad_id\nORDER BY n"
    stream = check(ir_of(sql, "stream"))
    batch = check(ir_of(sql, "batch"))
    assert [d.severity for d in stream] == ["error"] * 3
    assert [d.severity for d in batch] == ["warning"] * 3
    assert [d.location for d in stream] == [d.location for d in batch]
    assert all(d.message.startswith("model `x` cannot stream: ") for d in batch)
    assert [d.message.split(": ", 1)[1] for d in stream] == [d.message.split(": ", 1)[1] for d in batch]
    assert check(ir_of(sql, "stream"), "batch") == batch


def test_batch_mode_uses_streamable_inputs():
    batch_inputs = {k: dataclasses.replace(v, streaming=False, streamable=v.streaming) for k, v in INPUTS.items()}
    sql = "SELECT * FROM ods.imp i JOIN ods.clk c ON i.ad_id = c.ad_id"
    ir = ir_of(sql, "batch", inputs=batch_inputs)
    assert ir.tables["i"].streaming is False and ir.joins[0].kind == "invalid"
    assert [d.severity for d in check(ir)] == ["warning"]


def test_a_model_without_streams_has_no_stream_findings():
    sql = "SELECT d.*, rand() AS r FROM dw.dim_ad d JOIN dw.dim_user u ON u.id = d.owner ORDER BY 1 LIMIT 3"
    assert diags(sql) == []


def test_locate_maps_rendered_positions_to_the_model_file():
    seen = []

    def locate(line: int, col: int) -> Location:
        seen.append((line, col))
        return Location("models/dwd/ad.sql", line + 10, col + 2)

    sql = "SELECT ad_id,\n  rand() AS r\nFROM ods.clk"
    found = [d.format() for d in check(ir_of(sql, locate=locate))]
    assert found[0].startswith("models/dwd/ad.sql:12:5: error: model `x`: `rand()`")
    assert (2, 3) in seen


def test_partition_column_missing_from_the_query():
    sql = "SELECT click_ts, to_date(click_ts) AS dte FROM ods.clk"
    found = diags(sql, partition_by=("dt",))
    assert found == [
        "models/x.sql: error: model `x`: partition column `dt` (config `partition_by`) is not a column "
        "of the query; select it (e.g. `to_date(<event time>) AS dt`); did you mean `dte`?"
    ]
    assert diags(sql, "batch", partition_by=("dt",))[0].startswith("models/x.sql: error:")
    assert diags("SELECT * FROM ods.clk", partition_by=("dt",)) == []  # columns unknown: no claim


def test_unknown_table_warns_in_both_modes():
    for mode in ("stream", "batch"):
        assert diags("SELECT *\nFROM raw.events", mode) == [
            "models/x.sql:2:6: warning: model `x` reads `raw.events`, which is neither a `ref()` nor a "
            "`source()`; it is read as a static table; use `{{ ref('...') }}` or `{{ source('...', '...') }}`"
        ]


def test_empty_interval_warns():
    sql = ("SELECT * FROM ods.imp i JOIN ods.clk c ON i.ad_id = c.ad_id "
           "AND c.click_ts BETWEEN i.imp_ts AND i.imp_ts - INTERVAL 1 MINUTE")
    found = one(sql)
    assert "warning: model `x`: the time range of the join of `i` and `c` is empty" in found


def test_syntax_error_is_a_located_sqlflow_error():
    with pytest.raises(SqlflowError) as err:
        ir_of("SELECT ad_id,\nFROM ods.clk WHERE (")
    assert str(err.value).startswith("models/x.sql:2:")
    assert "SQL syntax error" in str(err.value)


def test_not_a_query_is_an_error():
    with pytest.raises(SqlflowError, match="must be a SELECT query"):
        ir_of("INSERT INTO t SELECT 1")


@pytest.mark.parametrize("right, where", [
    ("ods.clk c", "2:3"),
    ("(SELECT (ad_id + 0) AS ad_id, click_ts FROM ods.clk) c", "2:3"),
    ("(\n  SELECT max(ad_id) AS ad_id, click_ts FROM ods.clk GROUP BY click_ts) c", "2:3"),
])
def test_join_error_points_at_the_join_keyword(right, where):
    found = one(f"SELECT * FROM ods.imp i\n  LEFT OUTER JOIN {right} ON i.ad_id = c.ad_id")
    assert found.startswith(E.format(where) + "join of two streams `i` and `c` has no time bound"), found
