"""`sqlflow build`: seeds, models and data tests in DAG order, as `dbt build` does."""

from __future__ import annotations

import sys

import click

from sqlflow.cli.support import console, context, err_console, error_handler, parse_vars


@click.command("build")
@click.option("--select", "-s", "select", multiple=True,
              help="Nodes to build (dbt selectors); default: everything.")
@click.option("--vars", "vars_text", default=None, help="YAML mapping of vars, overriding dbt_project.yml.")
@error_handler
def command(select: tuple[str, ...], vars_text: str | None) -> None:
    """Load seeds, run models (batch) and run data tests in DAG order; a failing test or
    node skips everything downstream of it, and the exit code is 1."""
    from sqlflow.workflows.build import build_project

    report = build_project(context(), console, err_console, select=select,
                           vars=parse_vars(vars_text))
    if report.failed:
        sys.exit(1)
