"""The quarantine rule under `dbt run` equals sqlflow's at its edges, row for row.

A tiny project reads one event source twice (a union) whose event time is a STRING column,
so every reason can occur: exactly at the lateness and future bounds (kept), one microsecond
beyond (late / future), NULL (null_event_time), unparseable (malformed), and a NULL ingest
time (kept: nothing says when it arrived). sqlflow's batch runtime and real dbt build it into
two schemas; the model table and its quarantine table must be equal, every column.
"""

from __future__ import annotations

import os
import shutil
from collections import Counter
from pathlib import Path

import pytest

from helpers import make_project
from sqlflow.compiler import compile_project
from sqlflow.context import Context
from sqlflow.runtime.batch import run_models

pytestmark = [pytest.mark.spark, pytest.mark.dbt]

ROOT = Path(__file__).resolve().parents[1]
SRC, SF, DBT = "t_dbtq_src", "t_dbtq_sf", "t_dbtq_dbt"

ROWS = """
  (1, '2026-11-01 10:00:00',        TIMESTAMP'2026-11-01 10:01:00', '2026-11-01'),
  (2, '2026-11-01 09:50:00',        TIMESTAMP'2026-11-01 10:00:00', '2026-11-01'),
  (3, '2026-11-01 09:49:59.999999', TIMESTAMP'2026-11-01 10:00:00', '2026-11-01'),
  (4, '2026-11-01 10:05:00',        TIMESTAMP'2026-11-01 10:00:00', '2026-11-01'),
  (5, '2026-11-01 10:05:00.000001', TIMESTAMP'2026-11-01 10:00:00', '2026-11-01'),
  (6, NULL,                         TIMESTAMP'2026-11-01 10:00:00', '2026-11-01'),
  (7, 'not a time',                 TIMESTAMP'2026-11-01 10:00:00', '2026-11-01'),
  (8, '2026-11-02 03:00:00',        NULL,                           '2026-11-02')
"""
EXPECTED = {3: "late", 5: "future", 6: "null_event_time", 7: "malformed"}

MODEL = """{{ config(materialized='streaming_table', partition_by=['dt']) }}
select a.id, a.ev_ts, 'a' as side, a.dt from {{ source('raw', 'events') }} as a
union all
select b.id, b.ev_ts, 'b' as side, b.dt from {{ source('raw', 'events') }} as b
"""
SOURCES = f"""version: 2
sources:
  - name: raw
    schema: {SRC}
    tables:
      - name: events
        meta:
          sqlflow: {{event_time: ev_ts, ingest_time: ingest_ts, allowed_lateness: 10 minutes, future_tolerance: 300 s}}
"""
PROFILES = f"""sqlflow:
  target: sf
  outputs:
    sf: {{type: spark, method: session, host: NA, schema: {SF}}}
    dbt: {{type: spark, method: session, host: NA, schema: {DBT}}}
"""


def rows(spark, table: str) -> Counter:
    df = spark.table(table)
    cols = sorted(df.columns)
    return Counter(tuple(r[c] for c in cols) for r in df.select(*cols).collect())


@pytest.fixture(scope="module")
def built(spark, tmp_path_factory):
    os.environ.setdefault("DBT_SEND_ANONYMOUS_USAGE_STATS", "false")
    for schema in (SRC, SF, DBT):
        spark.sql(f"DROP DATABASE IF EXISTS {schema} CASCADE")
        spark.sql(f"CREATE DATABASE {schema}")
    spark.sql(f"CREATE TABLE {SRC}.events (id INT, ev_ts STRING, ingest_ts TIMESTAMP, dt STRING) "
              "USING delta")
    spark.sql(f"INSERT INTO {SRC}.events VALUES {ROWS}")
    root = make_project(tmp_path_factory.mktemp("dbtq") / "p", models={"m.sql": MODEL},
                        yml={"sources.yml": SOURCES}, profiles_yml=PROFILES)
    shutil.copytree(ROOT / "macros" / "materializations", root / "macros" / "materializations")

    ctx = Context.with_session(spark, root, "sf")
    result = compile_project(root, mode="batch", target=ctx.target)
    result.raise_if_errors()
    list(run_models(ctx, list(result.plans.values())))

    from dbt.cli.main import dbtRunner

    dbt = dbtRunner().invoke(["run", "--project-dir", str(root), "--profiles-dir",
                              str(root / "profiles"), "--target", "dbt", "--target-path",
                              str(root / "target"), "--log-path", str(root / "logs")])
    assert dbt.success, dbt.exception
    return root


def test_dbt_quarantines_exactly_the_rule_s_rows(spark, built):
    found = {(int(r.id), r.reason) for r in spark.sql(
        f"SELECT get_json_object(raw, '$.id') AS id, reason FROM {DBT}.m__quarantine").collect()}
    assert found == set(EXPECTED.items())
    assert spark.table(f"{DBT}.m__quarantine").count() == len(EXPECTED)  # read twice, once each
    kept = Counter(r.id for r in spark.table(f"{DBT}.m").collect())
    assert kept == {i: 2 for i in range(1, 9) if i not in EXPECTED}


@pytest.mark.parametrize("table", ["m", "m__quarantine"])
def test_dbt_and_sqlflow_write_the_same_rows(spark, built, table):
    assert rows(spark, f"{DBT}.{table}") == rows(spark, f"{SF}.{table}")


def test_dbt_leaves_no_clean_view_behind(spark, built):
    assert not [t.name for t in spark.catalog.listTables() if "__sqlflow_clean__" in t.name]
