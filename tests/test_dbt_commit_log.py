"""`dbt run` of a model with `dim_join` and the `sqlflow_commit_log()` post-hook, in-process on
the test's SparkSession: the same fallback rule as sqlflow, and one commit-log row per partition.
`sqlflow dbt run` (`run_dbt`) records the dimension's `_SUCCESS` markers in the commit log
first, so a partition ready only by its marker is ready under dbt too."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from helpers import make_project
from sqlflow.engine.context import Context
from sqlflow.runtime.delta import commitlog as C
from sqlflow.runtime.delta.markers import mark_ready, table_location
from sqlflow.workflows.dbt_bridge import run_dbt

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.dbt
DB = "t_dbt_commit_log"

MODEL = """{{ config(materialized='table', file_format='delta', partition_by=['dt'],
              post_hook="{{ sqlflow_commit_log() }}") }}
select e.event_id, u.vip, u.dt as user_dt, date_format(e.event_ts, 'yyyy-MM-dd') as dt
from {{ source('raw', 'ev') }} as e
{{ dim_join('left', source('raw', 'dim_user'), 'u', 'e', keys=['user_id'],
            fact_date='to_date(e.event_ts)', partition_column='dt', max_fallback=1) }}
"""

SOURCES = f"""version: 2
sources:
  - name: raw
    schema: {DB}
    tables:
      - name: ev
      - name: dim_user
        meta:
          sqlflow: {{partition_column: dt, ready_marker: _SUCCESS}}
"""


def test_dbt_run_joins_ready_partitions_and_appends_to_the_commit_log(spark, tmp_path):
    spark.sql(f"DROP DATABASE IF EXISTS {DB} CASCADE")
    spark.sql(f"CREATE DATABASE {DB}")
    spark.createDataFrame([("a", 1, datetime(2026, 11, 1, 9)), ("b", 1, datetime(2026, 11, 2, 9)),
                           ("c", 1, datetime(2026, 11, 3, 9))],
                          "event_id string, user_id bigint, event_ts timestamp") \
        .write.format("delta").saveAsTable(f"{DB}.ev")
    spark.createDataFrame([(1, 11, "2026-11-01"), (1, 12, "2026-11-02"), (1, 13, "2026-11-03")],
                          "user_id bigint, vip bigint, dt string") \
        .write.format("delta").partitionBy("dt").saveAsTable(f"{DB}.dim_user")
    C.append(spark, [C.Entry(f"{DB}.dim_user", "dt=2026-11-01", "commit", "manual")])  # 11-02 not ready
    mark_ready(spark, table_location(spark, f"{DB}.dim_user"), "dt", "2026-11-03")  # ready by marker
    project = make_project(tmp_path / "p", models={"enriched.sql": MODEL}, yml={"sources.yml": SOURCES},
                           macros={n: (ROOT / "macros" / n).read_text()
                                   for n in ("dim_join.sql", "interval_join.sql", "sqlflow_commit_log.sql")},
                           project_yml={"name": "commitlogproj", "profile": "sqlflow"},
                           profiles_yml=(ROOT / "profiles" / "profiles.yml").read_text().replace("schema: dw", f"schema: {DB}"))
    ctx = Context.with_session(spark, project)
    assert run_dbt(ctx, ["run", "--target-path", str(tmp_path / "target"),
                         "--log-path", str(tmp_path / "logs"), "--vars", "{}"])
    table = f"{DB}.enriched"
    got = sorted(tuple(r) for r in spark.table(table).select("event_id", "vip", "user_dt", "dt").collect())
    assert got == [("a", 11, "2026-11-01", "2026-11-01"), ("b", 11, "2026-11-01", "2026-11-02"),
                   ("c", 13, "2026-11-03", "2026-11-03")]
    marker = C.read(spark).where(f"`table` = '{DB}.dim_user' AND kind = 'commit' AND mode = 'marker'")
    assert [r["partition"] for r in marker.collect()] == ["dt=2026-11-03"]
    rows = C.read(spark).where(f"`table` = '{table}'").collect()
    assert sorted((r["partition"], r["kind"], r["mode"], r["model"], r["rows"]) for r in rows) == [
        ("dt=2026-11-01", "write", "dbt", "enriched", 1), ("dt=2026-11-02", "write", "dbt", "enriched", 1),
        ("dt=2026-11-03", "write", "dbt", "enriched", 1)]
    assert len({r["run_id"] for r in rows}) == 1 and json.dumps(rows[0]["run_id"])
    spark.sql(f"DROP DATABASE IF EXISTS {DB} CASCADE")
