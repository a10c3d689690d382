"""`sqlflow lineage MODEL.COLUMN`: the upstream columns a column is computed from."""

from __future__ import annotations

import json

import click

from sqlflow.cli.support import console, context, error_handler, escape, parse_vars


@click.command("lineage")
@click.argument("column", metavar="MODEL.COLUMN")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@click.option("--vars", "vars_text", help="YAML mapping overriding dbt_project.yml vars.")
@error_handler
def command(column, fmt, vars_text):
    """Trace MODEL.COLUMN through CTEs, macros and refs to source columns (no Spark)."""
    from sqlflow.workflows.lineage import column_lineage, to_text

    tree = column_lineage(context().project_dir, column, vars=parse_vars(vars_text))
    if fmt == "json":
        click.echo(json.dumps({**tree.to_dict(), "sources": tree.sources()}, indent=2))
    else:
        console.print(escape(to_text(tree)), soft_wrap=True)
        console.print(escape("source columns: " + (", ".join(tree.sources()) or "none")))
