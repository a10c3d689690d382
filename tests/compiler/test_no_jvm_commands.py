"""`compile`, `check`, `lineage`, `diff` and `status` never start a JVM (docs/design.md §3: the
compiler needs no Spark; `status` reads files).

The five commands run in ONE child process whose environment cannot start a JVM (no `java` on
PATH, JAVA_HOME and SPARK_HOME pointing nowhere, so a Spark start would fail), through the
CLI's own entry point; after them the child reports whether a py4j gateway or a SparkContext
exists. Each command must succeed, and none may be there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from helpers import ad_sources_yml, make_project

ROOT = Path(__file__).resolve().parents[2]
ST = "{{ config(materialized='streaming_table', partition_by=['dt']) }}\n"
MODELS = {
    "stg_imps.sql": ST + "select req_id, ad_id, imp_ts, ingest_ts, to_date(imp_ts) as dt\n"
                         "from {{ source('ods', 'imps') }}",
    "filtered.sql": ST + "select i.req_id, i.imp_ts, i.dt from {{ ref('stg_imps') }} as i "
                         "where i.ad_id > 0",
}
COMMANDS = [
    ["compile", "--mode", "stream"],
    ["compile", "--mode", "batch"],
    ["check"],
    ["lineage", "filtered.imp_ts"],
    ["diff", "--base", "HEAD~1"],
    ["status", "--format", "json"],
]

CHILD = textwrap.dedent("""
    import json, sys
    from click.testing import CliRunner
    from sqlflow.cli.main import main

    root, commands = sys.argv[1], json.loads(sys.argv[2])
    out = []
    for args in commands:
        res = CliRunner().invoke(main, ["--project-dir", root, *args])
        out.append({"args": args, "code": res.exit_code, "output": res.output[-2000:]})
    gateway = context = None
    if "pyspark" in sys.modules:
        from pyspark import SparkContext
        gateway, context = SparkContext._gateway, SparkContext._active_spark_context
    out.append({"gateway": gateway is not None, "context": context is not None})
    print(json.dumps(out))
""")


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.com",
                    *args], check=True, capture_output=True)


def test_compile_check_lineage_diff_status_start_no_jvm(tmp_path):
    root = make_project(tmp_path / "p", models=MODELS, yml={"sources.yml": ad_sources_yml("ods")})
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    (root / "models" / "filtered.sql").write_text(MODELS["filtered.sql"].replace("> 0", "> 1"))
    git(root, "commit", "-qam", "change")
    env = {**os.environ, "JAVA_HOME": "/nonexistent", "SPARK_HOME": "/nonexistent",
           "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin"}
    env.pop("PYSPARK_SUBMIT_ARGS", None)
    done = subprocess.run([sys.executable, "-c", CHILD, str(root), json.dumps(COMMANDS)],
                          capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    *runs, jvm = json.loads(done.stdout.strip().splitlines()[-1])
    for run in runs:
        assert run["code"] == 0, f"{run['args']}: {run['output']}"
    assert jvm == {"gateway": False, "context": False}
