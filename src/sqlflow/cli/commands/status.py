"""`sqlflow status [--select M]`: what the commit log says about the models' tables.

Lists the partitions `sqlflow repair` would rewrite (dirty or provisional, docs/design.md §2.7), then,
briefly, per table: partitions written and committed, and for each dimension a model joins,
its READY partitions.
"""

from __future__ import annotations

import click

from sqlflow.cli.support import console, context, err_console, error_handler, parse_vars


@click.command("status")
@click.option("--select", "-s", "select", multiple=True, help="Models to show (default: all).")
@click.option("--vars", "vars_text", default=None, help="YAML mapping of vars, overriding dbt_project.yml.")
@error_handler
def command(select: tuple[str, ...], vars_text: str | None) -> None:
    """List provisional and dirty partitions, and ready/committed ones briefly."""
    from sqlflow.workflows.run import plans_for_run
    from sqlflow.report.status import status_tables

    ctx = context()
    plans = plans_for_run(ctx, "batch", err_console, select=select, vars=parse_vars(vars_text))
    for table in status_tables(ctx.spark, plans):
        console.print(table)
