"""`sqlflow run --mode stream --full-refresh`: drop a stream plan's tables and checkpoint.

A full refresh removes both a query's outputs and its checkpoint, so the model is rebuilt
from a new query over everything its inputs hold (the way dbt's `--full-refresh` rebuilds an
incremental model). The query's own state tables, progress table and journal go with the
checkpoint: a new query drops them when it starts. The commit log keeps the dropped table's
rows as history, but a `refresh` row makes them no longer count: the rebuilt table starts
with fresh commit state, so a routed group's first run does not find its hours committed
(and mark them dirty) by the dropped table's commits (docs/semantics.md, "Stream runs").
"""

from __future__ import annotations

import shutil
from pathlib import Path

from pyspark.sql import SparkSession

from sqlflow.errors import Location, SqlflowError
from sqlflow.planning.plan import COMMIT_LOG, RoutedPlan, StreamPlan
from sqlflow.runtime import ownership, run_lock
from sqlflow.runtime.delta import commitlog
from sqlflow.runtime.delta.deltalog import quote
from sqlflow.runtime.query import checkpoint_dir


def full_refresh(spark: SparkSession, project_dir: Path | str,
                 plan: StreamPlan | RoutedPlan) -> list[str]:
    """Drop the plan's output tables (sink or every routed target, and the quarantine table)
    and remove its checkpoint folder; returns what was removed, for the run's output."""
    tables = ownership.plan_tables(plan)
    for table, owner, role, origin in tables:  # refuse before anything is dropped
        ownership.check(spark, table, owner, role, action="drop", origin=origin)
    folder = checkpoint_dir(project_dir, plan)
    inside = Path(project_dir).resolve()
    if not folder.resolve().is_relative_to(inside) or folder.resolve() == inside:
        raise SqlflowError(f"model `{plan.model}`: its checkpoint folder {folder} is not inside "
                           "the project; nothing was dropped", location=Location(plan.path),
                           hint="checkpoints live under the project's .sqlflow/checkpoints/")
    # a refresh while a stream run of the model runs would pull its tables and checkpoint
    # from under it: refused like a second run (`run_lock`, docs/semantics.md, "Faults")
    run_lock.take(folder, what=f"model `{plan.model}`", path=plan.path, action="full refresh")
    try:
        removed = []
        for table, *_ in tables:
            if spark.catalog.tableExists(table):
                spark.sql(f"DROP TABLE {quote(table)}")
                removed.append(f"table {table}")
        if spark.catalog.tableExists(COMMIT_LOG):  # the rebuilt tables start with fresh commit state
            commitlog.refreshed(spark, [t for t, _ in plan.outputs], plan.model)
        if folder.exists():
            shutil.rmtree(folder)
            removed.append(f"checkpoint {folder}")
    finally:
        run_lock.release(folder)
    return removed
