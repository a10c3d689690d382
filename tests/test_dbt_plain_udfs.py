"""Plain `dbt run --profiles-dir profiles`, a separate process, calls the project's Python UDFs.

dbt-spark's `session` method builds its own SparkSession; the `dbt_sqlflow` plugin (found by
dbt-core's plugin discovery of `dbt_*` modules) registers `udfs/*.py` in it first. The
project here is a throwaway copy with the repo's own profile (state under its `.sqlflow/`),
so the dbt process has its own Derby metastore; the test reads the Delta table it wrote.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import make_project

pytestmark = [pytest.mark.spark, pytest.mark.dbt]

ROOT = Path(__file__).resolve().parents[1]

MODEL = """{{ config(materialized='table', file_format='delta') }}
select spmid, spmid_department(spmid) as department, parse_spmid(spmid).page as page
from values ('live.room.gift.3'), ('main.home.feed.1'), ('bad'), (cast(null as string)) as t(spmid)
"""


def test_plain_dbt_run_sees_the_project_udfs(spark, tmp_path):
    project = make_project(tmp_path / "p", models={"departments.sql": MODEL},
                           project_yml={"name": "plainudf", "profile": "sqlflow"},
                           profiles_yml=(ROOT / "profiles" / "profiles.yml").read_text())
    shutil.copytree(ROOT / "udfs", project / "udfs")
    env = {**os.environ, "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    dbt = Path(sys.executable).parent / "dbt"
    done = subprocess.run([str(dbt), "run", "--profiles-dir", "profiles"], cwd=project, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    table = project / ".sqlflow" / "warehouse" / "dw.db" / "departments"
    rows = {(r.spmid, r.department, r.page)
            for r in spark.read.format("delta").load(str(table)).collect()}
    assert rows == {("live.room.gift.3", "live", "room"), ("main.home.feed.1", "main", "home"),
                    ("bad", None, None), (None, None, None)}
