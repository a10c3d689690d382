"""`sqlflow check`: the stream-safety checks of every (or every changed) model, no Spark."""

from __future__ import annotations

import sys

import click

from sqlflow.cli.support import console, context, error_handler, escape, parse_vars


@click.command("check")
@click.option("--changed-since", "changed_since", metavar="REF",
              help="Check only models changed since this git ref (and their descendants).")
@click.option("--format", "fmt", type=click.Choice(["text", "github"]), default="text",
              show_default=True, help="`github` prints workflow annotations.")
@click.option("--vars", "vars_text", help="YAML mapping overriding dbt_project.yml vars.")
@error_handler
def command(changed_since, fmt, vars_text):
    """Compile models in batch and stream mode and report every problem as path:line:col.

    Exits 1 when any error is found (warnings alone exit 0). Starts no Spark.
    """
    from sqlflow.workflows.check import check_project, format_github, format_text

    ctx = context()
    result = check_project(ctx.project_dir, changed_since=changed_since,
                           vars=parse_vars(vars_text))
    for diag in result.diagnostics:
        if fmt == "github":
            click.echo(format_github(diag))
        else:
            colour = "red" if diag.severity == "error" else "yellow"
            console.print(f"[{colour}]{escape(format_text(diag))}[/{colour}]", soft_wrap=True)
    errors, warnings = len(result.errors), len(result.diagnostics) - len(result.errors)
    scope = f"changed since {changed_since}" if changed_since else "all"
    summary = (f"checked {len(result.models)} model(s) ({scope}): "
               f"{errors} error(s), {warnings} warning(s)")
    if fmt == "github":
        click.echo(summary)
    else:
        console.print(escape(summary))
    if errors:
        sys.exit(1)
