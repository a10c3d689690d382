"""`sqlflow build` equals real `dbt build` on what issue 25 left: an incremental model's
`on_schema_change`, data test configs (`where`, `limit`, `severity`, `warn_if`/`error_if`,
`fail_calc`, `store_failures`, `store_failures_as`, the project's `data_tests:` tree),
root-project yml properties of a package model, and `microbatch` models left to dbt.

One small project in tmp, built twice by each tool: the second build renders with
`--vars {wide: true}`, so the incremental models' SQL gains a column `w`. sqlflow writes schema
`t_cfg_sf` (its stored test failures `t_cfg_sf_dbt_test__audit`), dbt `t_cfg_dbt`; after the
second build every table of both schemas is compared, every column as a multiset, and every
node's status.
"""

from __future__ import annotations

import io
import os
from collections import Counter

import pytest
from rich.console import Console

from helpers import make_project, table_names
from sqlflow.engine.context import Context

pytestmark = [pytest.mark.spark, pytest.mark.dbt]

SF, DBT, RAW = "t_cfg_sf", "t_cfg_dbt", "t_cfg_raw"
WIDE = "{% if var('wide', false) %}, v * 2 as w{% endif %}"
MODELS = {
    "items.sql": "{{ config(materialized='table') }}\nselect id, v, day from {{ source('raw', 'events') }}\n",
    # on_schema_change: the second build's rows carry `w`
    "grown.sql": "{{ config(materialized='incremental', file_format='delta', "
                 "on_schema_change='append_new_columns') }}\n"
                 f"select id, v{WIDE} from {{{{ ref('items') }}}}\n"
                 "{% if is_incremental() %}where id > (select max(id) from {{ this }}){% endif %}\n",
    "synced.sql": "{{ config(materialized='incremental', file_format='delta', "
                  "incremental_strategy='merge', unique_key='id', "
                  "on_schema_change='sync_all_columns') }}\n"
                  f"select id, v{WIDE} from {{{{ ref('items') }}}}\n",
    "ignored.sql": "{{ config(materialized='incremental', file_format='delta') }}\n"
                   f"select id, v{WIDE} from {{{{ ref('items') }}}}\n"
                   "{% if is_incremental() %}where id > (select max(id) from {{ this }}){% endif %}\n",
    "strict.sql": "{{ config(materialized='incremental', file_format='delta', "
                  "on_schema_change='fail') }}\n"
                  f"select id, v{WIDE} from {{{{ ref('items') }}}}\n",
    "after_strict.sql": "{{ config(materialized='table', file_format='delta') }}\n"
                        "select count(*) as n from {{ ref('strict') }}\n",
}
YML = {
    "sources.yml": f"version: 2\nsources:\n  - name: raw\n    schema: {RAW}\n    tables:\n"
                   "      - name: events\n",
    "items.yml": """\
        version: 2
        models:
          - name: items
            columns:
              - name: v
                data_tests:
                  - not_null:
                      config: {where: "day = '2024-01-02'", store_failures: true, severity: warn}
                  - accepted_values:
                      arguments: {values: [1]}
                      config: {warn_if: ">= 2", error_if: ">= 4", store_failures_as: view}
                  - unique:
                      config: {limit: 1, store_failures: true, fail_calc: "count(*) * 10", warn_if: "> 10", error_if: "> 10"}
              - name: id
                data_tests:
                  - not_null: {severity: warn, where: "v is null"}
          - name: pkg_nums
            description: the package's numbers, tested by the root project
            columns:
              - name: n
                data_tests: [unique, not_null]
        """,
}
FILES = {
    "tests/few_big_values.sql": "{{ config(store_failures=true, severity='warn') }}\n"
                                "select * from {{ ref('items') }} where v > 2\n",
    "dbt_packages/nums/dbt_project.yml": "name: nums\nversion: '1.0'\nconfig-version: 2\n",
    "dbt_packages/nums/models/pkg_nums.sql": "{{ config(materialized='table') }}\n"
                                             "select 1 as n union all select 1 as n\n",
}
PROJECT = {"data_tests": {"testproj": {"+store_failures": False}}}
PROFILES = f"""\
sqlflow:
  target: sf
  outputs:
    sf: {{type: spark, method: session, host: NA, schema: {SF}}}
    dbt: {{type: spark, method: session, host: NA, schema: {DBT}}}
"""
ROWS = [(1, 1, "2024-01-01"), (2, 2, "2024-01-01"), (3, None, "2024-01-02"), (4, 3, "2024-01-02"),
        (5, 3, "2024-01-02"), (6, None, "2024-01-01")]


def schema_tables(spark, schema: str) -> dict[str, tuple[tuple[str, ...], Counter]]:
    """Every table and view of `schema`: its columns (sorted) and rows as a multiset."""
    out = {}
    if not spark.catalog.databaseExists(schema):
        return out
    for name in table_names(spark, schema):
        df = spark.table(f"{schema}.{name}")
        cols = tuple(sorted(df.columns))
        out[name] = (cols, Counter(tuple(r) for r in df.select(*cols).collect()))
    return out


def dbt_build(project, *extra: str) -> dict[str, str]:
    from dbt.cli.main import dbtRunner

    res = dbtRunner().invoke([
        "build", "--project-dir", str(project), "--profiles-dir", str(project / "profiles"),
        "--target", "dbt", "--target-path", str(project / "target"),
        "--log-path", str(project / "logs"), *extra])
    statuses = {r.node.name: str(r.status).split(".")[-1].lower() for r in (res.result or [])}
    assert statuses, res.exception
    return statuses


def sqlflow_build(spark, project, **kwargs) -> tuple[dict[str, str], str]:
    from sqlflow.workflows.build import build_project

    out = io.StringIO()
    console = Console(file=out, width=300)
    report = build_project(Context.with_session(spark, project, "sf"), console, console, **kwargs)
    return {name: status for _, name, status in report.lines}, out.getvalue()


@pytest.fixture(scope="module")
def built(spark, tmp_path_factory):
    """After two builds by each tool: (sqlflow's statuses, its output, dbt's statuses)."""
    os.environ.setdefault("DBT_SEND_ANONYMOUS_USAGE_STATS", "false")
    project = make_project(tmp_path_factory.mktemp("configs"), models=MODELS, yml=YML,
                           project_yml=PROJECT, files=FILES, profiles_yml=PROFILES)
    for schema in (SF, DBT, RAW, f"{SF}_dbt_test__audit", f"{DBT}_dbt_test__audit"):
        spark.sql(f"DROP DATABASE IF EXISTS {schema} CASCADE")
    spark.sql(f"CREATE DATABASE {RAW}")
    spark.sql(f"CREATE TABLE {RAW}.events (id INT, v INT, day STRING) USING parquet")
    values = ", ".join(f"({i}, {'NULL' if v is None else v}, '{d}')" for i, v, d in ROWS[:4])
    spark.sql(f"INSERT INTO {RAW}.events VALUES {values}")
    sqlflow_build(spark, project)
    dbt_build(project)
    values = ", ".join(f"({i}, {'NULL' if v is None else v}, '{d}')" for i, v, d in ROWS[4:])
    spark.sql(f"INSERT INTO {RAW}.events VALUES {values}")
    ours, out = sqlflow_build(spark, project, vars={"wide": True})
    theirs = dbt_build(project, "--vars", "{wide: true}")
    return ours, out, theirs


def test_every_table_equals_dbt_build(spark, built):
    for suffix in ("", "_dbt_test__audit"):
        ours, theirs = schema_tables(spark, SF + suffix), schema_tables(spark, DBT + suffix)
        assert sorted(ours) == sorted(theirs), suffix
        for name, (cols, rows) in ours.items():
            assert cols == theirs[name][0], (name, cols, theirs[name][0])
            assert rows == theirs[name][1], (name, rows - theirs[name][1], theirs[name][1] - rows)


def test_every_node_has_dbt_build_status(built):
    ours, out, theirs = built
    dbt_names = {"pass": "ok", "success": "ok", "warn": "warn", "fail": "fail", "error": "fail",
                 "skipped": "skip"}
    assert {n: dbt_names[s] for n, s in theirs.items()} == ours, out


def test_the_configs_change_what_is_built_and_reported(spark, built):
    ours, out, _ = built
    grown = schema_tables(spark, f"{SF}")["grown"]
    assert grown[0] == ("id", "v", "w") and (5, 3, 6) in grown[1] and (1, 1, None) in grown[1]
    assert ours["strict"] == "fail" and ours["after_strict"] == "skip"
    assert "out of sync" in out and "Source columns not in target: [w (int)]" in out
    assert schema_tables(spark, f"{SF}")["ignored"][0] == ("id", "v")
    audit = schema_tables(spark, f"{SF}_dbt_test__audit")
    # the `where` leaves day 2024-01-01's null out; `limit: 1` stores one duplicate of v=3
    assert sum(audit["not_null_items_v"][1].values()) == 1
    assert sum(audit["unique_items_v"][1].values()) == 1 and ours["unique_items_v"] == "ok"
    assert ours["accepted_values_items_v__1"] == "warn" and ours["few_big_values"] == "warn"
    assert ours["unique_pkg_nums_n"] == "fail" and ours["not_null_items_id"] == "ok"
