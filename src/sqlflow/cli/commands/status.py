"""`sqlflow status [--select M] [--format table|json]`: each stream model's state, read from
files without a JVM (checkpoints, journals, the stream service's heartbeat, and the commit
log's Delta files through pyarrow: each model's dirty and provisional partitions);
`--commit-log` adds the commit log's tables (that one starts Spark): the partitions `sqlflow
repair` would rewrite (dirty or provisional, docs/design.md §2.7) with their reasons, per
table partitions written and committed, and each joined dimension's READY partitions.
"""

from __future__ import annotations

import click

from sqlflow.cli.support import console, context, err_console, error_handler, exclude_option, parse_vars


@click.command("status")
@click.option("--select", "-s", "select", multiple=True, help="Models to show (default: all).")
@exclude_option
@click.option("--vars", "vars_text", default=None, help="YAML mapping of vars, overriding dbt_project.yml.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table",
              help="json: the stable document described in the README.")
@click.option("--commit-log", is_flag=True,
              help="Also read the commit log with Spark: open partitions, tables, dimensions.")
@error_handler
def command(select: tuple[str, ...], exclude: tuple[str, ...], vars_text: str | None, fmt: str, commit_log: bool) -> None:
    """Each stream model's state (no JVM); --commit-log adds the commit log's tables."""
    from sqlflow.report.service_status import status_json, status_table
    from sqlflow.workflows.status import service_status, stream_plans

    ctx = context()
    plans = stream_plans(ctx.project_dir, select, ctx.target, parse_vars(vars_text), exclude)
    doc = service_status(ctx.project_dir, plans, target=ctx.target)
    if fmt == "json":
        click.echo(status_json(doc))
    else:
        console.print(status_table(doc))
    if commit_log:
        from sqlflow.report.status import status_tables
        from sqlflow.workflows.run import plans_for_run

        batch = plans_for_run(ctx, "batch", err_console, select=select, vars=parse_vars(vars_text),
                              exclude=exclude)
        for table in status_tables(ctx.spark, batch):
            console.print(table)
