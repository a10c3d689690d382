"""`sqlflow dbt ...`: dbt in sqlflow's SparkSession."""

from __future__ import annotations

import sys

import click

from sqlflow.cli.support import context, error_handler


@click.command("dbt", context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.argument("dbt_args", nargs=-1, type=click.UNPROCESSED)
@error_handler
def dbt_cmd(dbt_args: tuple[str, ...]) -> None:
    """Run dbt in this process, in sqlflow's SparkSession (so the project's Python UDFs exist).

    Example: `sqlflow dbt run --select staging`. `--profiles-dir profiles` is added for you.
    """
    from sqlflow.workflows.dbt_bridge import run_dbt

    ok = run_dbt(context(), list(dbt_args))
    sys.exit(0 if ok else 1)


command = dbt_cmd
