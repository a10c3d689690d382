"""An incremental join's SQL for a small micro-batch (`planning.delta.hash_join`): the plan's SQL
with a SHUFFLE_HASH hint naming each new-rows view a SELECT joins directly, and nothing else
changed; None for any query that could make Spark shuffle or warn. No JVM (the plan it makes
Spark choose is tested in tests/runtime/test_small_batches.py)."""

from __future__ import annotations

import pytest
import sqlglot
from sqlglot import exp

from compiler.test_plan import JOIN, compiled
from sqlflow.compiler import plan_sql_text
from sqlflow.planning.delta.hash_join import hash_join_sql

NEW = {"dn", "dm"}
VIEWS = NEW | {"on_", "om"}


def hints(tree: exp.Expr) -> list[list[str]]:
    """The relations each SELECT's SHUFFLE_HASH hint names, SELECT by SELECT."""
    return [[t.name for h in s.args["hint"].expressions for t in h.expressions]
            for s in tree.find_all(exp.Select) if s.args.get("hint")]


def without_hints(sql: str) -> str:
    tree = sqlglot.parse_one(sql, read="spark")
    for s in tree.find_all(exp.Select):
        s.set("hint", None)
    return tree.sql("spark")


def test_an_interval_join_plan_hashes_the_new_rows_of_each_term(tmp_path):
    _, plan = compiled(tmp_path, JOIN, "stream")
    assert plan.hash_join_sql is not None
    hashed = sqlglot.parse_one(plan.hash_join_sql, read="spark")
    # ΔL ⋈ (R_old ∪ ΔR)  ∪  L_old ⋈ ΔR: the first term hashes ΔL (alias i), the second ΔR (c);
    # ΔR inside the first term's UNION ALL is no direct join source of it
    assert hints(hashed) == [["i"], ["c"]]
    assert without_hints(plan.hash_join_sql) == without_hints(plan.sql)
    assert "SHUFFLE_HASH" not in plan.sql.upper()
    # the compiled file an analysis error names holds both forms, the plan's first
    text = plan_sql_text(plan)
    assert text.index(plan.sql.rstrip() + ";") < text.index(plan.hash_join_sql.rstrip() + ";")


@pytest.mark.parametrize("sql", [
    JOIN.replace("JOIN {{", "LEFT JOIN {{"),  # an outer join: padded rows, another plan
    JOIN + "\nJOIN {{ source('dim', 'dim_ad') }} AS d ON i.ad_id = d.ad_id",  # a static table
], ids=["left join", "static table"])
def test_a_plan_that_would_shuffle_has_no_hash_join_form(tmp_path, sql):
    _, plan = compiled(tmp_path, sql, "stream")
    assert plan.strategy == "incremental" and plan.hash_join_sql is None


def test_a_stream_without_a_join_has_no_hash_join_form(tmp_path):
    sql = "SELECT i.req_id, i.imp_ts, to_date(i.imp_ts) AS dt FROM {{ source('ods', 'imps') }} AS i"
    _, plan = compiled(tmp_path, sql, "stream")
    assert plan.hash_join_sql is None


def test_the_hint_names_a_quoted_alias_as_one_identifier():
    tree = sqlglot.parse_one("SELECT `a``b`.x FROM dn AS `a``b` JOIN om AS o ON `a``b`.k = o.k", read="spark")
    out = hash_join_sql(tree, NEW, VIEWS)
    assert out is not None
    assert hints(out) == [["a`b"]]
    assert "SHUFFLE_HASH(`a``b`)" in out.sql("spark")
    assert "hint" not in tree.args or not tree.args["hint"]  # the input tree is not changed


def test_both_new_sides_of_one_join_are_named():
    out = hash_join_sql(sqlglot.parse_one("SELECT a.x FROM dn a JOIN dm b ON a.k = b.k", read="spark"), NEW, VIEWS)
    assert out is not None and hints(out) == [["a", "b"]]


@pytest.mark.parametrize("sql", [
    "SELECT DISTINCT a.x FROM dn a JOIN om b ON a.k = b.k",
    "SELECT a.x, row_number() OVER (PARTITION BY a.k ORDER BY a.x) FROM dn a JOIN om b ON a.k = b.k",
    "SELECT a.x FROM dn a JOIN om b ON a.k = b.k ORDER BY a.x",
    "SELECT a.x FROM dn a JOIN om b ON a.k = b.k LIMIT 5",
    "SELECT a.x, max(b.y) FROM dn a JOIN om b ON a.k = b.k GROUP BY a.x",
    "SELECT a.x FROM dn a JOIN om b ON a.k = b.k UNION SELECT a.x FROM on_ a JOIN dm b ON a.k = b.k",
    "SELECT a.x FROM dn a JOIN om b ON a.k = b.k EXCEPT SELECT a.x FROM on_ a JOIN dm b ON a.k = b.k",
    "SELECT a.x FROM dn a JOIN dim.d b ON a.k = b.k",  # a table that is not one of the views
    "SELECT a.x FROM dn a JOIN other b ON a.k = b.k",
    "SELECT a.x FROM dn a LEFT JOIN om b ON a.k = b.k",
    "SELECT a.x FROM dn a CROSS JOIN om b",
    "SELECT a.x FROM dn a JOIN om b ON a.t BETWEEN b.t AND b.t + INTERVAL 1 MINUTE",  # no key
    "SELECT a.x FROM dn a JOIN om b USING (k)",
    "SELECT a.x FROM dn a JOIN om b ON a.k = b.k WHERE a.x IN (SELECT x FROM on_)",
    "SELECT a.x, (SELECT 1 FROM on_) AS s FROM dn a JOIN om b ON a.k = b.k",
    "SELECT a.x FROM dn a JOIN om b ON a.k = b.k WHERE EXISTS (SELECT 1 FROM on_)",
    "SELECT /*+ BROADCAST(b) */ a.x FROM dn a JOIN om b ON a.k = b.k",
    "WITH w AS (SELECT * FROM om) SELECT a.x FROM dn a JOIN w b ON a.k = b.k",
    "SELECT a.x FROM dn a",  # nothing joined: a hint would only make Spark warn
])
def test_a_query_spark_would_shuffle_for_or_warn_about_gets_none(sql):
    assert hash_join_sql(sqlglot.parse_one(sql, read="spark"), NEW, VIEWS) is None
