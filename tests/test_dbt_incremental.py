"""`incremental` models run incrementally in sqlflow with dbt-spark's semantics, and build the
same tables as real `dbt run` on a first run, a second run over new rows, and `--full-refresh`.

One small project in tmp, four incremental models over one source table (each of dbt-spark's
strategies; parquet by dbt-spark's default and Delta), the classic `is_incremental()` filter on
`{{ this }}`. The second batch of source rows holds a row older than what the tables hold
(the incremental filter skips it, a rebuild keeps it), an update of an existing id (`merge`
replaces it, `append` adds it) and rows in an existing partition (`insert_overwrite` replaces
that partition). sqlflow (`sqlflow build`) writes schema `t_inc_sf`, dbt `t_inc_dbt`; after
each step every table is compared, every column as multisets, and its format.
"""

from __future__ import annotations

import io
import os
from collections import Counter

import pytest
from rich.console import Console

from helpers import make_project
from sqlflow.engine.context import Context
from sqlflow.runtime.delta.deltalog import describe

pytestmark = [pytest.mark.spark, pytest.mark.dbt]

SF, DBT, RAW = "t_inc_sf", "t_inc_dbt", "t_inc_raw"
NEWER = "{% if is_incremental() %}where updated_at > (select max(updated_at) from {{ this }}){% endif %}"
MODELS = {
    # dbt-spark's default strategy (append) and format (parquet)
    "appended.sql": "{{ config(materialized='incremental') }}\n"
                    f"select id, v, updated_at from {{{{ source('raw', 'events') }}}}\n{NEWER}\n",
    "logged.sql": "{{ config(materialized='incremental', file_format='delta') }}\n"
                  "select id, v, day from {{ source('raw', 'events') }}\n"
                  "{% if is_incremental() %}where day > (select max(day) from {{ this }}){% endif %}\n",
    "merged.sql": "{{ config(materialized='incremental', incremental_strategy='merge', "
                  "unique_key='id', file_format='delta') }}\n"
                  "select id, v, updated_at, '{{ this.identifier }}' as me\n"
                  f"from {{{{ source('raw', 'events') }}}}\n{NEWER}\n",
    "by_day.sql": "{{ config(materialized='incremental', incremental_strategy='insert_overwrite', "
                  "partition_by=['day']) }}\n"
                  "select day, count(*) as n, sum(v) as total from {{ source('raw', 'events') }}\n"
                  "{% if is_incremental() %}where day >= (select max(day) from {{ this }}){% endif %}\n"
                  "group by day\n",
}
SOURCES = {"sources.yml": f"version: 2\nsources:\n  - name: raw\n    schema: {RAW}\n    tables:\n"
                          "      - name: events\n"}
PROFILES = f"""\
sqlflow:
  target: sf
  outputs:
    sf: {{type: spark, method: session, host: NA, schema: {SF}}}
    dbt: {{type: spark, method: session, host: NA, schema: {DBT}}}
"""
FIRST = [(1, 10, "2024-01-01 10:00:00", "2024-01-01"), (2, 20, "2024-01-01 11:00:00", "2024-01-01"),
         (3, 30, "2024-01-02 09:00:00", "2024-01-02")]
# an update of id 2, a new id in the last day, a new day, and a row older than every row built
SECOND = [(2, 25, "2024-01-02 12:00:00", "2024-01-02"), (4, 40, "2024-01-02 13:00:00", "2024-01-02"),
          (5, 50, "2024-01-03 08:00:00", "2024-01-03"), (6, 60, "2023-12-31 23:00:00", "2023-12-31")]


def insert(spark, rows) -> None:
    values = ", ".join(f"({i}, {v}, timestamp'{ts}', '{day}')" for i, v, ts, day in rows)
    spark.sql(f"INSERT INTO {RAW}.events VALUES {values}")


def state(spark, schema: str, formats: bool = False) -> dict[str, tuple[str, Counter]]:
    """Each model's table: its rows (every column, as a multiset), and its format when asked
    (after the first run only: a catalog look-up per table is slow on a busy machine)."""
    out = {}
    for name in MODELS:
        table = f"{schema}.{name.removesuffix('.sql')}"
        df = spark.table(table)
        rows = Counter(tuple(r) for r in df.select(*sorted(df.columns)).collect())
        out[name.removesuffix(".sql")] = (describe(spark, table).format if formats else "", rows)
    return out


def dbt_run(project, *extra: str) -> None:
    from dbt.cli.main import dbtRunner

    res = dbtRunner().invoke([
        "run", "--project-dir", str(project), "--profiles-dir", str(project / "profiles"),
        "--target", "dbt", "--target-path", str(project / "target"),
        "--log-path", str(project / "logs"), *extra])
    failures = [f"{r.node.name}: {r.status} {r.message}" for r in (res.result or [])
                if str(r.status) != "success"]
    assert res.success, failures or res.exception


def sqlflow_build(spark, project, **kwargs) -> str:
    from sqlflow.workflows.build import build_project

    out = io.StringIO()
    console = Console(file=out, width=200)
    report = build_project(Context.with_session(spark, project, "sf"), console, console, **kwargs)
    assert not report.failed, out.getvalue()
    return out.getvalue()


@pytest.fixture(scope="module")
def steps(spark, tmp_path_factory):
    """(step, sqlflow's tables, dbt's tables) after a first run, a second over new rows, and a
    full refresh."""
    os.environ.setdefault("DBT_SEND_ANONYMOUS_USAGE_STATS", "false")
    project = make_project(tmp_path_factory.mktemp("incremental"), models=MODELS, yml=SOURCES,
                           profiles_yml=PROFILES)
    for schema in (SF, DBT, RAW):
        spark.sql(f"DROP DATABASE IF EXISTS {schema} CASCADE")
    spark.sql(f"CREATE DATABASE {RAW}")
    spark.sql(f"CREATE TABLE {RAW}.events (id INT, v INT, updated_at TIMESTAMP, day STRING) "
              "USING parquet")
    out = []
    insert(spark, FIRST)
    sqlflow_build(spark, project)
    dbt_run(project)
    out.append(("first run", state(spark, SF, formats=True), state(spark, DBT, formats=True)))
    insert(spark, SECOND)
    sqlflow_build(spark, project)
    dbt_run(project)
    out.append(("second run", state(spark, SF), state(spark, DBT)))
    sqlflow_build(spark, project, full_refresh=True)
    dbt_run(project, "--full-refresh")
    out.append(("full refresh", state(spark, SF), state(spark, DBT)))
    return out


def test_every_step_equals_dbt_run(steps):
    for step, ours, dbts in steps:
        for name, (fmt, rows) in ours.items():
            assert fmt == dbts[name][0], (step, name)
            assert rows == dbts[name][1], (step, name, rows - dbts[name][1], dbts[name][1] - rows)


def test_the_second_run_is_incremental_and_the_full_refresh_is_not(steps):
    (_, first, _), (_, second, _), (_, refreshed, _) = steps
    assert {name: fmt for name, (fmt, _) in first.items()} == {
        "appended": "parquet", "logged": "delta", "merged": "delta", "by_day": "parquet"}
    appended = second["appended"][1]
    ids = Counter(row[0] for row in appended)  # columns sorted: id, updated_at, v
    assert ids[2] == 2 and ids[6] == 0 and sum(ids.values()) == 6  # appended, old row skipped
    assert sum(refreshed["appended"][1].values()) == 7 and Counter(
        r[0] for r in refreshed["appended"][1])[6] == 1
    merged = {row[0]: row for row in second["merged"][1]}  # id, me, updated_at, v
    assert sorted(merged) == [1, 2, 3, 4, 5] and merged[2][3] == 25 and merged[1][1] == "merged"
    by_day = {row[0]: row[1:] for row in second["by_day"][1]}  # day, n, total
    # day 1 kept from the first run, day 2 overwritten with its rows of both runs, day 3 new
    assert by_day == {"2024-01-01": (2, 30), "2024-01-02": (3, 95), "2024-01-03": (1, 50)}
    assert "2023-12-31" in {row[0] for row in refreshed["by_day"][1]}
