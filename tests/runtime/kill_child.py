"""A separate `sqlflow` process for the kill -9 cases of the fault catalogue (`test_kill9.py`).

`python kill_child.py <project dir> <script.json> <progress file>` runs the script's steps in
order in one process (one JVM), against the project's own local target (warehouse and Derby
metastore under its `.sqlflow/`, which no other process opens meanwhile):

- `{"append": [table, schema, rows]}` appends `rows` (text values, NULL as null) to
  the Delta table `table`, created with `schema` when missing, as one commit;
- `{"cli": [args...], "fault": "point:batch"}` runs `sqlflow --project-dir <dir> <args>`
  through the real command line (`sqlflow.cli.main`), with `SQLFLOW_FAULT` set to `fault`
  (`sqlflow.runtime.fault_points`) for this step only; the test kills the process there.

Before each step it writes the step's index to the progress file, so the test knows which
steps a kill left undone and a timeout names the step that did not end.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from sqlflow.cli.main import main
from sqlflow.engine.context import Context
from sqlflow.runtime import fault_points


def append(ctx: Context, table: str, schema: str, rows: list) -> None:
    spark = ctx.spark
    columns = [c.strip().split(" ", 1) for c in schema.split(",")]
    text = spark.createDataFrame(rows, ", ".join(f"{name} string" for name, _ in columns))
    typed = text.selectExpr(*[f"CAST({name} AS {kind}) AS {name}" for name, kind in columns])
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {table.split('.')[0]}")
    typed.coalesce(1).write.format("delta").mode("append").saveAsTable(table)


def run(project: Path, steps: list[dict], progress: Path) -> None:
    ctx = Context.discover(project)
    for k, step in enumerate(steps):
        progress.write_text(str(k))
        print(f"step {k}: {json.dumps(step)[:200]}", flush=True)
        if "append" in step:
            append(ctx, *step["append"])
            continue
        os.environ.pop(fault_points.ENV, None)
        if step.get("fault"):
            os.environ[fault_points.ENV] = step["fault"]
        try:
            main(["--project-dir", str(project), *step["cli"]], standalone_mode=False)
        except SystemExit as exc:
            if exc.code:
                raise
    progress.write_text(str(len(steps)))


if __name__ == "__main__":
    run(Path(sys.argv[1]), json.loads(Path(sys.argv[2]).read_text()), Path(sys.argv[3]))
