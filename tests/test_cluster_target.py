"""The `cluster` target against a real Spark standalone master and worker on 127.0.0.1.

The master and its two workers are the session's (tests/spark_servers.py, started once for
every cluster test); the job runs in a separate Python process because this test process
already owns a local SparkContext.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.spark  # a standalone master and worker, each a JVM

JOB = r"""
import json
import sys
from pathlib import Path
from sqlflow.engine.context import Context

ctx = Context.discover(Path(sys.argv[1]), "cluster")
spark = ctx.spark
assert spark.sparkContext.master.startswith("spark://"), spark.sparkContext.master
df = spark.range(0, 1000).selectExpr("id", "concat('live.room.gift.', id % 7) AS spmid")
df.write.format("delta").mode("overwrite").saveAsTable("default.cluster_probe")
# every row back, computed on the worker: id, spmid and the UDF's department
back = spark.sql("SELECT id, spmid, spmid_department(spmid) AS dep FROM default.cluster_probe")
print("RESULT", json.dumps(sorted([r.id, r.spmid, r.dep] for r in back.collect())))
spark.stop()
"""


def test_cluster_target_runs_delta_and_udfs_on_a_real_worker(standalone_cluster, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    shutil.copytree(ROOT / "profiles", project / "profiles")
    shutil.copytree(ROOT / "udfs", project / "udfs")
    shutil.copy(ROOT / "dbt_project.yml", project / "dbt_project.yml")
    env = {**os.environ, "SQLFLOW_SPARK_MASTER": standalone_cluster.url, "SPARK_LOCAL_IP": "127.0.0.1"}
    out = subprocess.run([sys.executable, "-c", JOB, str(project)], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    result = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    assert len(result) == 1, out.stdout[-2000:]
    expected = [[i, f"live.room.gift.{i % 7}", "live"] for i in range(1000)]
    assert json.loads(result[0].removeprefix("RESULT ")) == expected
    # the table landed in the project's own state folder, not in the cwd
    assert (project / ".sqlflow" / "warehouse" / "cluster_probe" / "_delta_log").is_dir()
