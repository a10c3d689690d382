"""`sqlflow diff --base REF`: per changed model, what changes in plan terms, and the impact."""

from __future__ import annotations

import click

from sqlflow.cli.support import console, context, error_handler, escape


@click.command("diff")
@click.option("--base", required=True, metavar="REF",
              help="The git ref to compare the working tree with (e.g. origin/main).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@error_handler
def command(base, fmt):
    """Compare every model's plan at REF with the working tree, without Spark.

    Prints columns added/removed, join type/keys/interval bounds, event time, watermark,
    partitioning and sink changes, and whether a running stream needs a full refresh.
    """
    from sqlflow.workflows.diff import diff_project, to_json, to_text

    diffs = diff_project(context().project_dir, base)
    if fmt == "json":
        click.echo(to_json(diffs))
    else:
        console.print(escape(to_text(diffs)), soft_wrap=True)
