"""dbt and sqlflow agree on each table's file format, so either may run after the other.

One small project in tmp (a parquet `table` by dbt-spark's default, a Delta `table`, a `view`,
an `incremental` parquet table with insert_overwrite) over one source table: `dbt run`, then
`sqlflow run --mode batch`, then `dbt run` again, on the shared SparkSession and one schema.
After each step every table has the format dbt-spark gives it and the same rows (every
column, as multisets) as after the first dbt run; no step fails on a format or an owner.
"""

from __future__ import annotations

import os
from collections import Counter

import pytest

from helpers import make_project
from sqlflow.compiler import compile_project
from sqlflow.engine.context import Context
from sqlflow.runtime.delta.deltalog import describe
from sqlflow.runtime.dispatch import run_models

pytestmark = [pytest.mark.spark, pytest.mark.dbt]

SCHEMA, RAW = "t_fmt", "t_fmt_raw"
MODELS = {
    "base.sql": "{{ config(materialized='table') }}\n"
                "select id, name from {{ source('raw', 'people') }}",
    "agg.sql": "{{ config(materialized='table', file_format='delta') }}\n"
               "select count(*) as n, max(id) as top from {{ ref('base') }}",
    "named.sql": "{{ config(materialized='view') }}\nselect id, upper(name) as name "
                 "from {{ ref('base') }} where id > 1",
    "parts.sql": "{{ config(materialized='incremental', incremental_strategy='insert_overwrite', "
                 "partition_by=['p']) }}\nselect id, name, id % 2 as p from {{ ref('base') }}",
}
SOURCES = {"sources.yml": f"version: 2\nsources:\n  - name: raw\n    schema: {RAW}\n    tables:\n"
                          "      - name: people\n"}
PROFILES = f"""\
sqlflow:
  target: local
  outputs:
    local: {{type: spark, method: session, host: NA, schema: {SCHEMA}}}
"""
# what dbt-spark writes (`view`: a view, no provider)
FORMATS = {"base": "parquet", "agg": "delta", "named": "", "parts": "parquet"}


def state(spark) -> dict[str, tuple[str, Counter]]:
    """Each model's format and its rows (every column, as a multiset)."""
    out = {}
    for name in MODELS:
        table = f"{SCHEMA}.{name.removesuffix('.sql')}"
        df = spark.table(table)
        rows = Counter(tuple(r) for r in df.select(*sorted(df.columns)).collect())
        out[name.removesuffix(".sql")] = (describe(spark, table).format, rows)
    return out


def dbt_run(project) -> None:
    from dbt.cli.main import dbtRunner

    res = dbtRunner().invoke([
        "run", "--project-dir", str(project), "--profiles-dir", str(project / "profiles"),
        "--target-path", str(project / "target"), "--log-path", str(project / "logs")])
    failures = [f"{r.node.name}: {r.status} {r.message}" for r in (res.result or [])
                if str(r.status) != "success"]
    assert res.success, failures or res.exception


@pytest.fixture(scope="module")
def steps(spark, tmp_path_factory):
    os.environ.setdefault("DBT_SEND_ANONYMOUS_USAGE_STATS", "false")
    project = make_project(tmp_path_factory.mktemp("formats"), models=MODELS, yml=SOURCES,
                           profiles_yml=PROFILES)
    for schema in (SCHEMA, RAW):
        spark.sql(f"DROP DATABASE IF EXISTS {schema} CASCADE")
        spark.sql(f"CREATE DATABASE {schema}")
    spark.sql(f"CREATE TABLE {RAW}.people USING parquet AS SELECT * FROM VALUES "
              "(1, 'ann'), (2, 'bob'), (3, 'cy'), (4, NULL) AS t(id, name)")
    out = []
    dbt_run(project)
    out.append(("dbt", state(spark)))
    ctx = Context.with_session(spark, project, "local")
    result = compile_project(project, mode="batch", target=ctx.target)
    result.raise_if_errors()
    list(run_models(ctx, list(result.plans.values())))
    out.append(("sqlflow after dbt", state(spark)))
    dbt_run(project)
    out.append(("dbt after sqlflow", state(spark)))
    return out


def test_every_step_keeps_dbt_sparks_formats(steps):
    for step, tables in steps:
        assert {name: fmt for name, (fmt, _) in tables.items()} == FORMATS, step


def test_every_step_builds_the_same_rows(steps):
    (_, first), *rest = steps
    assert sum(first["base"][1].values()) == 4 and first["agg"][1] == Counter({(4, 4): 1})
    for step, tables in rest:
        for name, (_, rows) in tables.items():
            assert rows == first[name][1], f"{step}: {name} differs"
