"""`sqlflow build`: seeds, models and data tests in DAG order, as `dbt build` does."""

from __future__ import annotations

import sys

import click

from sqlflow.cli.support import console, context, err_console, error_handler, exclude_option, parse_vars


@click.command("build")
@click.option("--select", "-s", "select", multiple=True,
              help="Nodes to build (dbt selectors); default: everything.")
@exclude_option
@click.option("--vars", "vars_text", default=None, help="YAML mapping of vars, overriding dbt_project.yml.")
@click.option("--adopt-dbt-tables", is_flag=True,
              help="Let a table, incremental or view model take over the table at its own name "
                   "that `dbt run` built without a sqlflow owner (recorded from then on).")
@click.option("--full-refresh", is_flag=True,
              help="Rebuild `incremental` models instead of running them incrementally.")
@error_handler
def command(select: tuple[str, ...], exclude: tuple[str, ...], vars_text: str | None,
            adopt_dbt_tables: bool, full_refresh: bool) -> None:
    """Load seeds, run models (batch) and run data tests in DAG order; a failing test or
    node skips everything downstream of it, and the exit code is 1."""
    from sqlflow.workflows.build import build_project

    report = build_project(context(), console, err_console, select=select, exclude=exclude,
                           vars=parse_vars(vars_text), adopt_dbt_tables=adopt_dbt_tables,
                           full_refresh=full_refresh)
    if report.failed:
        sys.exit(1)
