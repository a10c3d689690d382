"""Compile throughput: sqlflow compile (both modes) against dbt compile on a 1,000-model project.

    .venv/bin/python bench/compile.py [--models 1000] [--chains 50] [--skip-dbt]

Generates a project in a temp folder (chains of refs, a project macro in every model, event
sources in yml), then times, side by side in this one process:
  - `sqlflow compile --mode batch` and `--mode stream` (load, render, DAG, analyze, check, plan),
  - `dbt compile` on the same project (dbt-spark session method, in-process).
Prints models/s for each and the ratios against dbt. A benchmark, not a test: nothing here
asserts a time.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

MACRO = """{% macro event_partitions(ts) -%}
date_format({{ ts }}, 'yyyy-MM-dd') AS dt, date_format({{ ts }}, 'HH') AS hour
{%- endmacro %}
"""

SOURCES = """version: 2
sources:
  - name: ods
    schema: ods
    tables:
      - name: events
        meta:
          sqlflow: {event_time: event_ts, ingest_time: ingest_ts, allowed_lateness: 10 minutes, future_tolerance: 5 minutes}
"""

HEAD = "{{ config(materialized='streaming_table', partition_by=['dt', 'hour']) }}\n"


def model_sql(chain: int, step: int) -> str:
    parent = "{{ source('ods', 'events') }}" if step == 0 else f"{{{{ ref('m_{chain}_{step - 1}') }}}}"
    return (
        HEAD
        + "SELECT e.event_id, e.user_id, e.event_ts, e.ingest_ts,\n"
        + f"       e.user_id % {step + 2} AS bucket_{step},\n"
        + "       {{ event_partitions('e.event_ts') }}\n"
        + f"FROM {parent} AS e\n"
        + f"WHERE e.user_id IS NOT NULL AND e.event_id > {step}\n"
    )


def make_project(folder: Path, models: int, chains: int) -> Path:
    (folder / "models").mkdir(parents=True)
    (folder / "macros").mkdir()
    (folder / "profiles").mkdir()
    (folder / "macros" / "partitions.sql").write_text(MACRO)
    (folder / "models" / "sources.yml").write_text(SOURCES)
    state = folder / ".state"
    (folder / "profiles" / "profiles.yml").write_text(
        "bench:\n  target: local\n  outputs:\n    local:\n      type: spark\n      method: session\n"
        "      host: NA\n      schema: dw\n      server_side_parameters:\n"
        "        spark.master: 'local[2]'\n"
        f"        spark.sql.warehouse.dir: '{state}/warehouse'\n"
        f"        spark.hadoop.javax.jdo.option.ConnectionURL: 'jdbc:derby:;databaseName={state}/metastore_db;create=true'\n"
        f"        spark.driver.extraJavaOptions: '-Dderby.system.home={state}'\n"
        "        spark.ui.enabled: 'false'\n"
    )
    (folder / "dbt_project.yml").write_text(
        "name: bench\nversion: '1.0'\nconfig-version: 2\nprofile: bench\n"
        "macro-paths: ['macros', 'sqlflow_macros']\n"
    )
    # the project ships sqlflow's streaming_table materialization, as the demo project does
    shutil.copytree(ROOT / "macros" / "materializations", folder / "sqlflow_macros")
    per_chain = max(1, models // chains)
    for chain in range(chains):
        for step in range(per_chain):
            (folder / "models" / f"m_{chain}_{step}.sql").write_text(model_sql(chain, step))
    return folder


def time_sqlflow(project: Path, mode: str) -> tuple[float, int]:
    from sqlflow.compiler import compile_project

    start = time.perf_counter()
    result = compile_project(project, mode=mode)
    elapsed = time.perf_counter() - start
    if result.errors:
        sys.exit(f"sqlflow compile --mode {mode} failed: {result.errors[0].format()}")
    return elapsed, len(result.plans)


def time_dbt(project: Path) -> tuple[float, int]:
    from dbt.cli.main import dbtRunner

    args = ["compile", "--project-dir", str(project), "--profiles-dir", str(project / "profiles"),
            "--target-path", str(project / "target"), "--log-path", str(project / "logs"), "--quiet"]
    start = time.perf_counter()
    res = dbtRunner().invoke(args)
    elapsed = time.perf_counter() - start
    if not res.success:
        sys.exit(f"dbt compile failed: {res.exception}")
    return elapsed, len(list((project / "target" / "compiled").rglob("*.sql")))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=int, default=1000)
    ap.add_argument("--chains", type=int, default=50)
    ap.add_argument("--skip-dbt", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="sqlflow-bench-") as tmp:
        project = make_project(Path(tmp) / "project", args.models, args.chains)
        print(f"project: {args.models} models in {args.chains} ref chains, one macro per model")
        rows = []
        for mode in ("batch", "stream"):
            secs, n = time_sqlflow(project, mode)
            rows.append((f"sqlflow compile --mode {mode}", secs, n))
        if not args.skip_dbt:
            secs, n = time_dbt(project)
            rows.append(("dbt compile (incl. Spark session start)", secs, n))
        base = rows[-1][1] if not args.skip_dbt else None
        print(f"{'run':44} {'models':>7} {'seconds':>8} {'models/s':>9} {'vs dbt':>7}")
        for name, secs, n in rows:
            ratio = f"{base / secs:6.1f}x" if base else "   n/a"
            print(f"{name:44} {n:7d} {secs:8.2f} {n / secs:9.1f} {ratio:>7}")


if __name__ == "__main__":
    main()
