"""`sqlflow dbt run`: dbt in-process on sqlflow's session, where the project's Python UDFs exist."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from helpers import make_project
from sqlflow.engine.context import Context
from sqlflow.workflows.dbt_bridge import dbt_args, run_dbt

ROOT = Path(__file__).resolve().parents[1]

MODEL = """{{ config(materialized='table', file_format='delta') }}
select spmid, spmid_department(spmid) as department, parse_spmid(spmid).page as page
from {{ source('raw', 'spmids') }}
"""

SOURCES = """version: 2
sources:
  - name: raw
    schema: t_dbt_udfs_raw
    tables:
      - name: spmids
"""


@pytest.mark.dbt
def test_sqlflow_dbt_run_builds_a_model_that_calls_python_udfs(spark, tmp_path):
    spark.sql("CREATE DATABASE IF NOT EXISTS t_dbt_udfs_raw")
    spark.createDataFrame([("live.room.gift.3",), ("main.home.feed.1",), ("bad",), (None,)],
                          "spmid string").write.format("delta").mode("overwrite") \
        .saveAsTable("t_dbt_udfs_raw.spmids")
    project = make_project(tmp_path / "p", models={"departments.sql": MODEL},
                           yml={"sources.yml": SOURCES},
                           project_yml={"name": "udfproj", "profile": "sqlflow"},
                           profiles_yml=(ROOT / "profiles" / "profiles.yml").read_text())
    shutil.copytree(ROOT / "udfs", project / "udfs")
    ctx = Context.with_session(spark, project)
    ok = run_dbt(ctx, ["run", "--target-path", str(tmp_path / "target"),
                       "--log-path", str(tmp_path / "logs"), "--vars", "{}"])
    assert ok
    rows = {(r.spmid, r.department, r.page) for r in spark.table("dw.departments").collect()}
    assert rows == {("live.room.gift.3", "live", "room"), ("main.home.feed.1", "main", "home"),
                    ("bad", None, None), (None, None, None)}


def test_dbt_args_fill_in_project_and_profiles(tmp_path):
    ctx = Context(project_dir=tmp_path, target_name="cluster")
    args = dbt_args(ctx, ["run", "--select", "staging"])
    assert args == ["run", "--select", "staging", "--profiles-dir", str(tmp_path / "profiles"),
                    "--project-dir", str(tmp_path), "--target", "cluster"]
    assert dbt_args(ctx, ["run", "--profiles-dir", "x", "--project-dir", "y", "-t", "z"]) == [
        "run", "--profiles-dir", "x", "--project-dir", "y", "-t", "z"]
