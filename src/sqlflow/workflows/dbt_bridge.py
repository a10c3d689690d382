"""Run dbt in-process on sqlflow's SparkSession.

dbt-spark's `session` method calls `SparkSession.builder.getOrCreate()`, which returns the
session already running in this process: the one sqlflow built, with the project's Python
UDFs registered. A separate `dbt` process would make its own session without them, and an
embedded Derby metastore admits one process at a time, so tests and `sqlflow dbt` share one.

Before a command that builds models, the `_SUCCESS` ready markers of every source that
declares `ready_marker` are recorded in the commit log, as sqlflow does before it pins a
dimension (docs/design.md §2.3): `dim_join` under dbt reads READY from the commit log alone (Spark SQL
lists no `_`-files), so under `sqlflow dbt run` a marked partition is ready exactly as under
`sqlflow run`. Plain `dbt run` sees a marker once some sqlflow command recorded it.
"""

from __future__ import annotations

from sqlflow.engine.context import Context
from sqlflow.errors import SqlflowError

# dbt commands that run models (and so may read READY through dim_join)
_BUILDS = {"run", "build", "retry"}


def sync_ready_markers(ctx: Context) -> list[str]:
    """Record the ready markers of every source with `ready_marker` and `partition_column` in
    the commit log (`snapshot.sync_all_markers`: one read of the log for all of them); returns
    `relation/column=value` of each new one."""
    from sqlflow.project.load import load_project
    from sqlflow.rendering.render import Renderer
    from sqlflow.runtime.delta import commitlog as C
    from sqlflow.runtime.snapshot import sync_all_markers

    project = load_project(ctx.project_dir)
    marked = [t for t in project.sources.values() if t.ready_marker and t.partition_column]
    if not marked:
        return []
    renderer, spark = Renderer(project, ctx.target), ctx.spark
    C.ensure(spark)
    tables = []
    for table in marked:
        assert table.partition_column and table.ready_marker  # `marked`
        tables.append((str(renderer.source_relation(table)).lower(), table.partition_column, table.ready_marker))
    found = sync_all_markers(spark, tables)
    return [f"{relation}/{column}={v}" for relation, column, _ in tables for v in found.get(relation, [])]


def dbt_args(ctx: Context, args: list[str]) -> list[str]:
    """`args` with the project and profiles folders filled in unless the caller gave them."""
    out = list(args)
    if "--profiles-dir" not in out:
        out += ["--profiles-dir", str(ctx.project_dir / "profiles")]
    if "--project-dir" not in out:
        out += ["--project-dir", str(ctx.project_dir)]
    if ctx.target_name and "--target" not in out and "-t" not in out:
        out += ["--target", ctx.target_name]
    return out


def run_dbt(ctx: Context, args: list[str]):
    """Invoke dbt with `args` after making sure the session exists; returns dbt's result."""
    if not args:
        raise SqlflowError("no dbt command given", hint="e.g. `sqlflow dbt run`")
    from dbt.cli.main import dbtRunner

    _ = ctx.spark  # build the session (and register UDFs) before dbt asks for one
    if args[0] in _BUILDS:
        sync_ready_markers(ctx)
    result = dbtRunner().invoke(dbt_args(ctx, args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise SqlflowError(f"dbt failed: {result.exception}", hint="see dbt's output above")
    return result.success
