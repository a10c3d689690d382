"""Run dbt in-process on sqlflow's SparkSession.

dbt-spark's `session` method calls `SparkSession.builder.getOrCreate()`, which returns the
session already running in this process: the one sqlflow built, with the project's Python
UDFs registered. A separate `dbt` process would make its own session without them, and an
embedded Derby metastore admits one process at a time, so tests and `sqlflow dbt` share one.
"""

from __future__ import annotations

from sqlflow.context import Context
from sqlflow.errors import SqlflowError


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

    ctx.spark  # build the session (and register UDFs) before dbt asks for one
    result = dbtRunner().invoke(dbt_args(ctx, args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise SqlflowError(f"dbt failed: {result.exception}", hint="see dbt's output above")
    return result.success
