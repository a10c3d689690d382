"""delta_rule: the incremental rewrite of joins of streams. No JVM.

Golden cases go through `check`; the differential tests run the original query over all the
input and the rewritten query over every micro-batch with sqlglot's Python executor, and
assert the union of the micro-batches' rows is the batch result (multiset), for random data,
random micro-batch splits and arrival orders.
"""

from __future__ import annotations

import datetime as dt
import doctest
import functools
import re
import sqlite3
from collections import Counter

import pytest
import sqlglot
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from sqlglot import exp
from sqlglot.executor.python import PythonExecutor
from sqlglot.executor.table import ensure_tables
from sqlglot.optimizer import optimize
from sqlglot.optimizer.eliminate_ctes import eliminate_ctes
from sqlglot.planner import Plan
from sqlglot.schema import ensure_schema

import sqlflow.planning.delta.rule
from sqlflow.planning.delta.rule import (
    DeltaBinding,
    DeltaRuleError,
    Interval,
    delta_rewrite,
    padding_queries,
    padding_query,
    pruning_ranges,
)


def bindings(*names: str) -> dict[str, DeltaBinding]:
    views = {n: n.replace(".", "_") for n in names}
    return {n: DeltaBinding(n, f"{v}_delta", f"{v}_old") for n, v in views.items()}


def rewrite(sql: str, *streams: str) -> str:
    return delta_rewrite(sqlglot.parse_one(sql, read="spark"), bindings(*streams)).sql("spark")


def check(sql: str, expected: str, *streams: str) -> None:
    assert rewrite(sql, *streams) == expected


def pad(sql: str, outer: str, *streams: str) -> str:
    q = sqlglot.parse_one(sql, read="spark")
    return padding_query(q, bindings(*streams), outer, "pending").sql("spark")


FULL_R = "(SELECT * FROM r_old UNION ALL SELECT * FROM r_delta) AS r"


# --- golden rewrites -------------------------------------------------------------------


def test_single_stream_is_bound_to_its_delta():
    check("SELECT l.k, l.v + 1 AS v FROM l WHERE l.v > 1",
          "SELECT l.k, l.v + 1 AS v FROM l_delta AS l WHERE l.v > 1", "l")
    check("SELECT k FROM l", "SELECT k FROM l_delta AS l", "l")


def test_single_stream_with_static_tables():
    check("SELECT c.k, d.name FROM dw.clicks AS c JOIN dw.dim AS d ON d.k = c.k "
          "LEFT JOIN dw.geo AS g ON g.ip = c.ip",
          "SELECT c.k, d.name FROM dw_clicks_delta AS c JOIN dw.dim AS d ON d.k = c.k "
          "LEFT JOIN dw.geo AS g ON g.ip = c.ip", "dw.clicks")


def test_binding_by_alias_and_by_bare_name():
    check("SELECT c.k FROM dw.clicks AS c", "SELECT c.k FROM c_delta AS c", "c")
    check("SELECT clicks.k FROM dw.clicks", "SELECT clicks.k FROM clicks_delta AS clicks",
          "clicks")
    check("SELECT `c`.k FROM `dw`.`clicks` AS `c`", "SELECT `c`.k FROM dw_clicks_delta AS `c`",
          "dw.clicks")


def test_two_streams_interval_join():
    on = "ON l.k = r.k AND r.t BETWEEN l.t AND l.t + INTERVAL '20' MINUTE"
    check(f"SELECT l.k, r.v FROM l JOIN r {on} WHERE r.v > 0",
          f"SELECT l.k, r.v FROM l_delta AS l JOIN {FULL_R} {on} WHERE r.v > 0 UNION ALL "
          f"SELECT l.k, r.v FROM l_old AS l JOIN r_delta AS r {on} WHERE r.v > 0", "l", "r")


def test_terms_follow_the_text_order_not_the_binding_order():
    check("SELECT * FROM l JOIN r ON l.k = r.k",
          f"SELECT * FROM l_delta AS l JOIN {FULL_R} ON l.k = r.k UNION ALL "
          "SELECT * FROM l_old AS l JOIN r_delta AS r ON l.k = r.k", "r", "l")


def test_static_tables_stay_in_every_term():
    check("SELECT l.k FROM l JOIN d ON d.k = l.k JOIN r ON r.k = l.k",
          f"SELECT l.k FROM l_delta AS l JOIN d ON d.k = l.k JOIN {FULL_R} ON r.k = l.k "
          "UNION ALL SELECT l.k FROM l_old AS l JOIN d ON d.k = l.k JOIN r_delta AS r "
          "ON r.k = l.k", "l", "r")


def test_join_inside_a_cte_renames_it_per_term():
    check("WITH s AS (SELECT * FROM d), j AS (SELECT l.k FROM l JOIN r ON l.k = r.k) "
          "SELECT j.k FROM j JOIN s ON s.k = j.k",
          "WITH s AS (SELECT * FROM d), "
          f"j__t1 AS (SELECT l.k FROM l_delta AS l JOIN {FULL_R} ON l.k = r.k), "
          "j__t2 AS (SELECT l.k FROM l_old AS l JOIN r_delta AS r ON l.k = r.k) "
          "SELECT j.k FROM j__t1 AS j JOIN s ON s.k = j.k UNION ALL "
          "SELECT j.k FROM j__t2 AS j JOIN s ON s.k = j.k", "l", "r")


def test_cte_chain_keeps_its_aliases():
    check("WITH a AS (SELECT * FROM l), b AS (SELECT a.k FROM a AS x JOIN r ON x.k = r.k) "
          "SELECT * FROM b AS y",
          "WITH a__t1 AS (SELECT * FROM l_delta AS l), "
          f"b__t1 AS (SELECT a.k FROM a__t1 AS x JOIN {FULL_R} ON x.k = r.k), "
          "a__t2 AS (SELECT * FROM l_old AS l), "
          "b__t2 AS (SELECT a.k FROM a__t2 AS x JOIN r_delta AS r ON x.k = r.k) "
          "SELECT * FROM b__t1 AS y UNION ALL SELECT * FROM b__t2 AS y", "l", "r")


def test_three_streams_telescope():
    full = "(SELECT * FROM {0}_old UNION ALL SELECT * FROM {0}_delta) AS {0}"
    check("SELECT a.k FROM a JOIN b ON a.k = b.k JOIN c ON c.k = b.k",
          f"SELECT a.k FROM a_delta AS a JOIN {full.format('b')} ON a.k = b.k "
          f"JOIN {full.format('c')} ON c.k = b.k UNION ALL "
          f"SELECT a.k FROM a_old AS a JOIN b_delta AS b ON a.k = b.k "
          f"JOIN {full.format('c')} ON c.k = b.k UNION ALL "
          "SELECT a.k FROM a_old AS a JOIN b_old AS b ON a.k = b.k "
          "JOIN c_delta AS c ON c.k = b.k", "a", "b", "c")


def test_self_join_is_two_occurrences():
    check("SELECT x.k FROM l AS x JOIN l AS y ON x.k = y.k",
          "SELECT x.k FROM l_delta AS x JOIN (SELECT * FROM l_old UNION ALL "
          "SELECT * FROM l_delta) AS y ON x.k = y.k UNION ALL "
          "SELECT x.k FROM l_old AS x JOIN l_delta AS y ON x.k = y.k", "l")


def test_cte_read_twice_is_inlined():
    check("WITH c AS (SELECT * FROM l WHERE v > 0) SELECT x.k FROM c AS x JOIN c AS y "
          "ON x.k = y.k",
          "SELECT x.k FROM (SELECT * FROM l_delta AS l WHERE v > 0) AS x JOIN (SELECT * FROM "
          "(SELECT * FROM l_old UNION ALL SELECT * FROM l_delta) AS l WHERE v > 0) AS y "
          "ON x.k = y.k UNION ALL SELECT x.k FROM (SELECT * FROM l_old AS l WHERE v > 0) AS x "
          "JOIN (SELECT * FROM l_delta AS l WHERE v > 0) AS y ON x.k = y.k", "l")


def test_unused_cte_over_a_stream_is_dropped():
    check("WITH c AS (SELECT * FROM r) SELECT * FROM l", "SELECT * FROM l_delta AS l", "l",
          "r")


def test_union_all_of_streams_keeps_one_branch_per_term():
    check("SELECT u.k FROM (SELECT k FROM a UNION ALL SELECT k FROM b) AS u JOIN c "
          "ON c.k = u.k",
          "SELECT u.k FROM (SELECT k FROM a_delta AS a) AS u JOIN (SELECT * FROM c_old "
          "UNION ALL SELECT * FROM c_delta) AS c ON c.k = u.k UNION ALL "
          "SELECT u.k FROM (SELECT k FROM b_delta AS b) AS u JOIN (SELECT * FROM c_old "
          "UNION ALL SELECT * FROM c_delta) AS c ON c.k = u.k UNION ALL "
          "SELECT u.k FROM (SELECT k FROM a_old AS a UNION ALL SELECT k FROM b_old AS b) AS u "
          "JOIN c_delta AS c ON c.k = u.k", "a", "b", "c")


def test_union_all_of_three_branches():
    check("SELECT u.k FROM (SELECT k FROM a UNION ALL SELECT k FROM b UNION ALL SELECT k FROM e)"
          " AS u",
          "SELECT u.k FROM (SELECT k FROM a_delta AS a) AS u UNION ALL "
          "SELECT u.k FROM (SELECT k FROM b_delta AS b) AS u UNION ALL "
          "SELECT u.k FROM (SELECT k FROM e_delta AS e) AS u", "a", "b", "e")


def test_union_all_at_the_top():
    check("SELECT k FROM a UNION ALL SELECT k FROM b",
          "SELECT k FROM a_delta AS a UNION ALL SELECT k FROM b_delta AS b", "a", "b")
    check("WITH s AS (SELECT 1 AS one) SELECT k FROM a UNION ALL SELECT k FROM b",
          "WITH s AS (SELECT 1 AS one) SELECT k FROM a_delta AS a UNION ALL "
          "SELECT k FROM b_delta AS b", "a", "b")
    check("WITH u AS (SELECT k FROM a UNION ALL SELECT k FROM b) SELECT * FROM u",
          "WITH u__t1 AS (SELECT k FROM a_delta AS a), u__t2 AS (SELECT k FROM b_delta AS b) "
          "SELECT * FROM u__t1 AS u UNION ALL SELECT * FROM u__t2 AS u", "a", "b")


def test_union_all_of_a_stream_and_a_static_table_inside_a_join():
    check("SELECT u.k FROM (SELECT k FROM a UNION ALL SELECT k FROM s) AS u JOIN c "
          "ON c.k = u.k",
          "SELECT u.k FROM (SELECT k FROM a_delta AS a) AS u JOIN (SELECT * FROM c_old "
          "UNION ALL SELECT * FROM c_delta) AS c ON c.k = u.k UNION ALL "
          "SELECT u.k FROM (SELECT k FROM a_old AS a UNION ALL SELECT k FROM s) AS u "
          "JOIN c_delta AS c ON c.k = u.k", "a", "c")


def test_outer_join_of_streams_keeps_the_matched_part():
    check("SELECT l.k, r.v FROM l LEFT JOIN r ON l.k = r.k",
          f"SELECT l.k, r.v FROM l_delta AS l JOIN {FULL_R} ON l.k = r.k UNION ALL "
          "SELECT l.k, r.v FROM l_old AS l JOIN r_delta AS r ON l.k = r.k", "l", "r")
    check("SELECT * FROM l FULL OUTER JOIN r ON l.k = r.k",
          f"SELECT * FROM l_delta AS l JOIN {FULL_R} ON l.k = r.k UNION ALL "
          "SELECT * FROM l_old AS l JOIN r_delta AS r ON l.k = r.k", "l", "r")


def test_stream_preserving_joins_with_static_tables_stay():
    check("SELECT * FROM l LEFT JOIN d ON d.k = l.k LEFT SEMI JOIN e ON e.k = l.k",
          "SELECT * FROM l_delta AS l LEFT JOIN d ON d.k = l.k LEFT SEMI JOIN e ON e.k = l.k",
          "l")
    check("SELECT * FROM d RIGHT JOIN l ON d.k = l.k",
          "SELECT * FROM d RIGHT JOIN l_delta AS l ON d.k = l.k", "l")


def test_the_input_tree_is_not_modified():
    q = sqlglot.parse_one("SELECT * FROM l JOIN r ON l.k = r.k")
    before = q.sql()
    delta_rewrite(q, bindings("l", "r"))
    assert q.sql() == before


def test_doctests():
    assert doctest.testmod(sqlflow.planning.delta.rule).failed == 0


@pytest.mark.parametrize(("sql", "message"), [
    ("SELECT k, COUNT(*) FROM l GROUP BY k", "GROUP BY"),
    ("SELECT COUNT(*) FROM l", "an aggregate (COUNT(*))"),
    ("SELECT DISTINCT k FROM l", "DISTINCT"),
    ("SELECT k, ROW_NUMBER() OVER (PARTITION BY k ORDER BY t) FROM l", "a window function"),
    ("SELECT * FROM l LIMIT 3", "LIMIT"),
    ("SELECT * FROM l ORDER BY t", "ORDER BY"),
    ("SELECT k FROM l UNION SELECT k FROM r", "UNION (distinct)"),
    ("SELECT k FROM l INTERSECT SELECT k FROM r", "INTERSECT"),
    ("SELECT k FROM l EXCEPT SELECT k FROM r", "EXCEPT"),
    ("SELECT * FROM d WHERE d.k IN (SELECT k FROM l)", "a subquery expression"),
    ("SELECT * FROM d WHERE EXISTS (SELECT 1 FROM l WHERE l.k = d.k)", "a subquery expression"),
    ("SELECT (SELECT l.v FROM l WHERE l.k = d.k) AS m FROM d", "a subquery expression"),
    ("SELECT * FROM d LEFT SEMI JOIN l ON l.k = d.k", "SEMI join filtering by a stream"),
    ("SELECT * FROM d LEFT ANTI JOIN l ON l.k = d.k", "ANTI join filtering by a stream"),
    ("SELECT * FROM d LEFT JOIN l ON l.k = d.k", "LEFT JOIN that keeps static rows"),
    ("SELECT * FROM l RIGHT JOIN d ON l.k = d.k", "RIGHT JOIN that keeps static rows"),
    ("SELECT * FROM l FULL JOIN d ON l.k = d.k", "FULL JOIN of a stream and a static"),
    ("SELECT * FROM (SELECT k, SUM(v) AS s FROM l GROUP BY k) AS x JOIN r ON r.k = x.k",
     "GROUP BY"),
    ("SELECT * FROM (SELECT * FROM l LIMIT 1) AS x", "LIMIT"),
    ("SELECT k FROM l UNION ALL SELECT k FROM d", "a UNION ALL branch reads no stream"),
    ("SELECT * FROM d", "stream input `l` is not read"),
    ("WITH l AS (SELECT * FROM d) SELECT * FROM l", "stream input `l` is not read"),
    ("WITH RECURSIVE c AS (SELECT * FROM l) SELECT * FROM c", "recursive WITH"),
])
def test_rejected(sql, message):
    with pytest.raises(DeltaRuleError) as err:
        rewrite(sql, "l", *(["r"] if re.search(r"\br\b", sql) else []))
    assert message in str(err.value)


def test_rejection_names_the_stream_and_a_fix():
    with pytest.raises(DeltaRuleError) as err:
        rewrite("SELECT c.k, COUNT(*) FROM dw.clicks AS c GROUP BY c.k", "dw.clicks")
    assert str(err.value) == (
        "error: stream input `c` is read under GROUP BY: the delta rule rewrites only joins, "
        "filters, projections and UNION ALL; move it to a downstream model, or use "
        "stream_strategy='stateful'")


# --- padding ----------------------------------------------------------------------------

LEFT = "SELECT l.k, r.v FROM l LEFT JOIN r ON l.k = r.k AND r.t BETWEEN l.t AND l.t + 2"


def test_padding_left_join():
    assert pad(LEFT, "l", "l", "r") == (
        "SELECT l.k, r.v FROM pending AS l LEFT JOIN (SELECT * FROM r_old AS r WHERE FALSE) "
        "AS r ON l.k = r.k AND r.t BETWEEN l.t AND l.t + 2 WHERE NOT EXISTS(SELECT 1 FROM "
        f"{FULL_R} WHERE l.k = r.k AND r.t BETWEEN l.t AND l.t + 2)")


def test_padding_keeps_filters_and_static_joins():
    assert pad("SELECT l.k, d.n FROM l JOIN d ON d.k = l.k LEFT JOIN (SELECT * FROM r "
               "WHERE r.v > 0) AS rr ON rr.k = l.k WHERE l.v > 1", "l", "l", "r") == (
        "SELECT l.k, d.n FROM pending AS l JOIN d ON d.k = l.k LEFT JOIN (SELECT * FROM "
        "(SELECT * FROM r_old AS r WHERE r.v > 0) AS rr WHERE FALSE) AS rr ON rr.k = l.k "
        "WHERE l.v > 1 AND NOT EXISTS(SELECT 1 FROM (SELECT * FROM (SELECT * FROM r_old "
        "UNION ALL SELECT * FROM r_delta) AS r WHERE r.v > 0) AS rr WHERE rr.k = l.k)")


def test_padding_right_and_full_joins():
    assert pad("SELECT * FROM l RIGHT JOIN r ON l.k = r.k", "r", "l", "r") == (
        "SELECT * FROM (SELECT * FROM l_old AS l WHERE FALSE) AS l RIGHT JOIN pending AS r "
        "ON l.k = r.k WHERE NOT EXISTS(SELECT 1 FROM (SELECT * FROM l_old UNION ALL "
        "SELECT * FROM l_delta) AS l WHERE l.k = r.k)")
    full = "SELECT * FROM l FULL JOIN r ON l.k = r.k"
    q = padding_queries(sqlglot.parse_one(full), bindings("l", "r"), {"r": "r_closed"})
    assert sorted(q) == ["l", "r"]
    assert q["l"].sql("spark") == pad(full, "l", "l", "r").replace("pending", "l_delta_pending")
    assert "FULL JOIN r_closed AS r" in q["r"].sql("spark")


def test_padding_of_a_join_inside_a_cte():
    assert pad("WITH j AS (SELECT l.k, r.v FROM l LEFT JOIN r ON l.k = r.k) SELECT * FROM j",
               "l", "l", "r") == (
        "SELECT * FROM (SELECT l.k, r.v FROM pending AS l LEFT JOIN (SELECT * FROM r_old AS r "
        "WHERE FALSE) AS r ON l.k = r.k WHERE NOT EXISTS(SELECT 1 FROM "
        f"{FULL_R} WHERE l.k = r.k)) AS j")


def test_padding_queries_of_inner_joins_is_empty():
    assert padding_queries(sqlglot.parse_one("SELECT * FROM l JOIN r ON l.k = r.k"),
                           bindings("l", "r")) == {}


@pytest.mark.parametrize(("sql", "outer", "message"), [
    ("SELECT * FROM l JOIN r ON l.k = r.k", "l", "no outer join keeps `l`"),
    ("SELECT * FROM l LEFT JOIN r ON l.k = r.k", "r", "no outer join keeps `r`"),
    ("SELECT * FROM l LEFT JOIN r USING (k)", "l", "ON clause whose columns are all qualified"),
    ("SELECT * FROM l LEFT JOIN r ON k = r.k", "l", "ON clause whose columns are all qualified"),
    ("SELECT * FROM l LEFT JOIN r ON l.k = r.k JOIN c ON c.k = l.k", "l", "exactly two"),
    ("SELECT * FROM d JOIN l ON d.k = l.k RIGHT JOIN r ON l.k = r.k", "r", "first join"),
    ("SELECT * FROM l LEFT JOIN r ON l.k = r.k", "x", "`x` is not exactly one"),
])
def test_padding_rejected(sql, outer, message):
    streams = ["l", "r", "c"] if " c " in sql else ["l", "r"]
    with pytest.raises(DeltaRuleError) as err:
        pad(sql, outer, *streams)
    assert message in str(err.value)


# --- pruning ----------------------------------------------------------------------------

MIN = 60_000_000


def test_pruning_ranges():
    p = pruning_ranges(Interval("imp_ts", "click_ts", -20 * MIN, 5 * MIN))
    assert p.old_left.bounds(100 * MIN, 130 * MIN) == (95 * MIN, 150 * MIN)
    assert p.old_right.bounds(100 * MIN, 130 * MIN) == (80 * MIN, 135 * MIN)
    assert p.old_left.bounds(None, None) is None
    assert p.old_right.predicate(None, None).sql() == "FALSE"
    t = dt.datetime(2026, 11, 1, 0, 0)
    assert p.old_left.bounds(t, t) == (t - dt.timedelta(minutes=5), t + dt.timedelta(minutes=20))
    assert p.old_left.predicate(t, t).sql("spark") == (
        "imp_ts BETWEEN CAST('2026-10-31 23:55:00' AS TIMESTAMP) "
        "AND CAST('2026-11-01 00:20:00' AS TIMESTAMP)")
    with pytest.raises(DeltaRuleError, match="empty interval"):
        pruning_ranges(("a", "b", 1, 0))


def test_pruning_is_exact_at_the_edges():
    """Old rows exactly at the edge of the range match, one µs beyond does not."""
    lo, hi = -3, 7
    p = pruning_ranges(("t", "t", lo, hi))
    r_t = 100
    first, last = p.old_left.bounds(r_t, r_t)
    assert [lt for lt in range(80, 120) if lt + lo <= r_t <= lt + hi] == list(
        range(first, last + 1))
    first, last = p.old_right.bounds(r_t, r_t)
    assert [rt for rt in range(80, 120) if r_t + lo <= rt <= r_t + hi] == list(
        range(first, last + 1))


# --- differential: the micro-batches' union equals the batch result --------------------
#
# Each test runs on two engines: sqlglot's Python executor, and SQLite (stdlib) as a second
# opinion, since a wrong engine would make a wrong rewrite look right.

COLS = {"k": "INT", "t": "INT", "v": "INT"}
DIM_COLS = {"k": "INT", "w": "INT"}
DIM = [{"k": 0, "w": 10}, {"k": 1, "w": 11}, {"k": 1, "w": 12}, {"k": None, "w": 13}]

rows = st.lists(st.fixed_dictionaries({
    "k": st.one_of(st.none(), st.integers(0, 2)),  # NULL keys never match
    "t": st.integers(0, 6),  # a small range: many rows land exactly on an interval edge
    "v": st.integers(0, 2),  # few values: many duplicate rows
}), max_size=7)
bounds = st.tuples(st.integers(-3, 3), st.integers(0, 3)).map(lambda b: (b[0], b[0] + b[1]))
SLOW = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@st.composite
def arrivals(draw, *names: str):
    """Each stream's rows, each with the micro-batch it arrives in (any order in time)."""
    n = draw(st.integers(1, 4))
    data = {s: [(r, draw(st.integers(0, n - 1))) for r in draw(rows)] for s in names}
    return n, data


def executor(query: exp.Query, tables) -> Counter:
    """The rows of `query` (a multiset) by sqlglot's executor. A top-level UNION ALL runs
    branch by branch: the executor mixes up the rows of tables that have the same alias in
    two branches (`SELECT l.t FROM a AS l UNION ALL SELECT l.t FROM b AS l` reads `b` twice),
    and every delta term names its tables as the model does."""
    if isinstance(query, exp.Union) and not query.args.get("distinct"):
        branches = [query.this, query.expression]
        if query.args.get("with_"):
            branches = [_with(b, query.args["with_"]) for b in branches]
        return executor(branches[0], tables) + executor(branches[1], tables)
    names = tuple(sorted(tables))
    return Counter(PythonExecutor(tables=ensure_tables(tables)).execute(_plan(query.sql(), names)).rows)


@functools.cache
def _plan(sql: str, names: tuple[str, ...]) -> Plan:
    """What sqlglot's `execute` plans before it runs a query (the optimizer, two thirds of its
    time on these tiny tables), once per query text and tables: the micro-batches of an example,
    and the examples with the same bounds, run the same rewritten query."""
    schema = ensure_schema({name: DIM_COLS if name == "d" else COLS for name in names})
    return Plan(optimize(sqlglot.parse_one(sql), schema, leave_tables_isolated=True))


def _with(branch: exp.Query, with_: exp.With) -> exp.Query:
    """`branch` under the union's WITH, minus the CTEs it doesn't read (they may repeat the
    branch's aliases too)."""
    out = branch.copy()
    out.set("with_", with_.copy())
    return eliminate_ctes(out)


def sqlite(query: exp.Query, tables) -> Counter:
    """The rows of `query` by SQLite (3.39+ for RIGHT and FULL joins)."""
    db = sqlite3.connect(":memory:")
    for name, data in tables.items():
        cols = DIM_COLS if name == "d" else COLS
        db.execute(f"CREATE TABLE {name} ({', '.join(f'{c} {t}' for c, t in cols.items())})")
        db.executemany(f"INSERT INTO {name} VALUES ({', '.join('?' * len(cols))})",
                       [tuple(r[c] for c in cols) for r in data])
    return Counter(db.execute(query.sql("sqlite")).fetchall())


ENGINES = pytest.mark.parametrize("engine", [executor, sqlite], ids=["executor", "sqlite"])


def batch(engine, sql: str, data) -> Counter:
    tables = {s: [r for r, _ in rs] for s, rs in data.items()}
    return engine(sqlglot.parse_one(sql), {**tables, "d": DIM})


def micro_batch_tables(data, b: int) -> dict:
    tables: dict = {"d": DIM}
    for s, rs in data.items():
        tables[f"{s}_delta"] = [r for r, x in rs if x == b]
        tables[f"{s}_old"] = [r for r, x in rs if x < b]
    return tables


def incremental(engine, sql: str, n: int, data, prune=None) -> Counter:
    """The union of the rewritten query's rows over micro-batches 0..n-1."""
    query = delta_rewrite(sqlglot.parse_one(sql), bindings(*data))
    out: Counter = Counter()
    for b in range(n):
        tables = micro_batch_tables(data, b)
        if prune:
            prune(tables)
        out.update(engine(query, tables))
    return out


def interval(left: str, right: str, lo: int, hi: int) -> str:
    return f"{left}.k = {right}.k AND {right}.t BETWEEN {left}.t + ({lo}) AND {left}.t + ({hi})"


@ENGINES
@SLOW
@given(arrivals("l", "r"), bounds)
@example((2, {"l": [({"k": 1, "t": 3, "v": 0}, 1)],  # matches at both edges, across batches
              "r": [({"k": 1, "t": 1, "v": 0}, 0), ({"k": 1, "t": 5, "v": 0}, 1),
                    ({"k": 1, "t": 6, "v": 0}, 0)]}), (-2, 2))
@example((1, {"l": [({"k": 1, "t": 3, "v": 0}, 0)] * 2,  # duplicates in one micro-batch
              "r": [({"k": 1, "t": 3, "v": 0}, 0)] * 2}), (0, 0))
def test_interval_join_equals_batch(engine, arrivals, bounds):
    n, data = arrivals
    sql = (f"SELECT l.k, l.t AS lt, r.t AS rt, l.v + r.v AS s FROM l JOIN r "
           f"ON {interval('l', 'r', *bounds)} WHERE l.v <> 2")
    assert incremental(engine, sql, n, data) == batch(engine, sql, data)


EDGES = (2, {  # old rows exactly at both edges of both sides' ranges
    "l": [({"k": 1, "t": 3, "v": 0}, 1), ({"k": 2, "t": 1, "v": 0}, 0),
          ({"k": 2, "t": 5, "v": 0}, 0)],
    "r": [({"k": 1, "t": 1, "v": 0}, 0), ({"k": 1, "t": 5, "v": 0}, 0),
          ({"k": 2, "t": 3, "v": 0}, 1)]})


@ENGINES
@SLOW
@given(arrivals("l", "r"), bounds)
@example(EDGES, (-2, 2))
@example(EDGES, (2, 2))
@example(EDGES, (-2, -2))
def test_pruned_old_rows_are_enough(engine, arrivals, bounds):
    n, data = arrivals
    sql = f"SELECT l.t AS lt, r.t AS rt, r.v FROM l JOIN r ON {interval('l', 'r', *bounds)}"
    ranges = pruning_ranges(("t", "t", *bounds))

    def prune(tables):
        for old, delta, rng in (("l_old", "r_delta", ranges.old_left),
                                ("r_old", "l_delta", ranges.old_right)):
            times = [r["t"] for r in tables[delta]]
            span = rng.bounds(min(times, default=None), max(times, default=None))
            tables[old] = [r for r in tables[old] if span and span[0] <= r["t"] <= span[1]]

    assert incremental(engine, sql, n, data, prune) == batch(engine, sql, data)


@ENGINES
@SLOW
@given(arrivals("l", "r"), bounds)
def test_join_in_cte_with_static_dimension_equals_batch(engine, arrivals, bounds):
    n, data = arrivals
    sql = (f"WITH j AS (SELECT l.k, l.t, r.v FROM l JOIN r ON {interval('l', 'r', *bounds)}), "
           "dd AS (SELECT * FROM d WHERE d.w > 10) "
           "SELECT j.k, j.t, j.v, dd.w FROM j JOIN dd ON dd.k = j.k")
    assert incremental(engine, sql, n, data) == batch(engine, sql, data)


@ENGINES
@SLOW
@given(arrivals("a", "b", "c"), bounds, bounds)
def test_three_streams_equal_batch(engine, arrivals, ab, bc):
    n, data = arrivals
    sql = (f"SELECT a.t AS at, b.t AS bt, c.t AS ct, c.v FROM a "
           f"JOIN b ON {interval('a', 'b', *ab)} JOIN c ON {interval('b', 'c', *bc)}")
    assert incremental(engine, sql, n, data) == batch(engine, sql, data)


@ENGINES
@SLOW
@given(arrivals("l"), bounds)
def test_self_join_through_a_cte_equals_batch(engine, arrivals, bounds):
    n, data = arrivals
    sql = (f"WITH c AS (SELECT * FROM l WHERE l.v < 2) SELECT x.t AS xt, y.t AS yt "
           f"FROM c AS x JOIN c AS y ON {interval('x', 'y', *bounds)}")
    assert incremental(engine, sql, n, data) == batch(engine, sql, data)


@ENGINES
@SLOW
@given(arrivals("a", "b", "r"), bounds)
def test_union_all_of_streams_joined_equals_batch(engine, arrivals, bounds):
    n, data = arrivals
    sql = ("SELECT u.t AS ut, r.t AS rt, u.src FROM (SELECT k, t, 1 AS src FROM a UNION ALL "
           "SELECT k, t, 2 AS src FROM b UNION ALL SELECT k, 0 AS t, 3 AS src FROM d) AS u "
           f"JOIN r ON {interval('u', 'r', *bounds)}")
    assert incremental(engine, sql, n, data) == batch(engine, sql, data)


@ENGINES
@SLOW
@given(arrivals("l"))
def test_single_stream_with_dimension_equals_batch(engine, arrivals):
    n, data = arrivals
    sql = "SELECT l.k, l.t, d.w FROM l LEFT JOIN d ON d.k = l.k WHERE l.t > 1"
    assert incremental(engine, sql, n, data) == batch(engine, sql, data)


def matches(lrow, rrow, lo, hi) -> bool:
    return (lrow["k"] is not None and lrow["k"] == rrow["k"]
            and lrow["t"] + lo <= rrow["t"] <= lrow["t"] + hi)


def closing_batches(draw, n, mine, theirs, match) -> list[int]:
    """When the runtime may pad each row: never before the last row it matches has arrived
    (what the lateness rule guarantees), and by the end of the bounded run at the latest."""
    out = []
    for row, b in mine:
        last = max([b] + [x for other, x in theirs if match(row, other)])
        out.append(min(n - 1, last + draw(st.integers(0, 2))))
    return out


@ENGINES
@SLOW
@given(arrivals("l", "r"), bounds, st.sampled_from(["LEFT", "RIGHT", "FULL"]), st.data())
def test_outer_join_matched_part_plus_padding_equals_batch(engine, arrivals, bounds, side,
                                                           draws):
    n, data = arrivals
    lo, hi = bounds
    sql = (f"SELECT l.k, l.t AS lt, r.t AS rt, r.v FROM l {side} JOIN r "
           f"ON {interval('l', 'r', lo, hi)} WHERE r.v IS NULL OR r.v <> 1")
    padding = padding_queries(sqlglot.parse_one(sql), bindings("l", "r"),
                              {"l": "pending", "r": "pending"})
    assert sorted(padding) == {"LEFT": ["l"], "RIGHT": ["r"], "FULL": ["l", "r"]}[side]
    closing = {
        "l": closing_batches(draws.draw, n, data["l"], data["r"],
                             lambda a, b: matches(a, b, lo, hi)),
        "r": closing_batches(draws.draw, n, data["r"], data["l"],
                             lambda a, b: matches(b, a, lo, hi)),
    }
    out = incremental(engine, sql, n, data)
    for b in range(n):
        for name, query in padding.items():
            tables = micro_batch_tables(data, b)
            tables["pending"] = [row for (row, _), c in zip(data[name], closing[name], strict=False) if c == b]
            out.update(engine(query, tables))
    assert out == batch(engine, sql, data)


@ENGINES
def test_differential_harness_catches_a_wrong_rewrite(engine):
    """Reading full instead of old rows in the second term counts a pair whose rows arrive
    in one micro-batch twice: the harness must see that."""
    data = {"l": [({"k": 1, "t": 0, "v": 0}, 0)], "r": [({"k": 1, "t": 0, "v": 0}, 0)]}
    sql = "SELECT l.t, r.t FROM l JOIN r ON l.k = r.k"
    good = incremental(engine, sql, 1, data)
    wrong = good + engine(sqlglot.parse_one(
        "SELECT l.t, r.t FROM l_delta AS l JOIN r_delta AS r ON l.k = r.k"),
        micro_batch_tables(data, 0))
    assert good == batch(engine, sql, data) != wrong
