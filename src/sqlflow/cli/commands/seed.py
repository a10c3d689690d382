"""`sqlflow seed`: load `seeds/*.csv` into tables, as `dbt seed` does."""

from __future__ import annotations

import click

from sqlflow.cli.support import console, context, err_console, error_handler, exclude_option, parse_vars


@click.command("seed")
@click.option("--select", "-s", "select", multiple=True,
              help="Seeds to load (dbt selectors); default: every seed.")
@exclude_option
@click.option("--vars", "vars_text", default=None, help="YAML mapping of vars, overriding dbt_project.yml.")
@error_handler
def command(select: tuple[str, ...], exclude: tuple[str, ...], vars_text: str | None) -> None:
    """Load each seed CSV into its table (dbt's column types, `column_types`, `delimiter`)."""
    from sqlflow.workflows.build import seed_project

    seed_project(context(), console, err_console, select=select, exclude=exclude,
                 vars=parse_vars(vars_text))
