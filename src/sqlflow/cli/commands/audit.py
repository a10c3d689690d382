"""`sqlflow audit`: compare each live streaming model's tables with its batch plan over exactly
the input the stream has processed, per closed partition (`sqlflow.workflows.audit`)."""

from __future__ import annotations

import sys
from datetime import datetime

import click

from sqlflow.cli.support import (
    console,
    context,
    err_console,
    error_handler,
    escape,
    exclude_option,
    parse_vars,
)


@click.command("audit")
@click.option("--select", "-s", "select", multiple=True,
              help="Models to audit (dbt's selection grammar; default: every streaming_table).")
@exclude_option
@click.option("--start", type=click.DateTime(formats=["%Y-%m-%d"]), default=None,
              help="First date partition to compare (default: the oldest).")
@click.option("--end", type=click.DateTime(formats=["%Y-%m-%d"]), default=None,
              help="Last date partition to compare (default: the newest the stream has closed).")
@click.option("--repair", is_flag=True,
              help="Rewrite exactly the differing partitions of the live tables from the batch "
                   "plan's (refused while the model's stream runs).")
@click.option("--vars", "vars_text", default=None, help="YAML mapping of vars, overriding dbt_project.yml.")
@error_handler
def command(select: tuple[str, ...], exclude: tuple[str, ...], start: datetime | None,
            end: datetime | None, repair: bool, vars_text: str | None) -> None:
    """Check that each streaming model's live sink and quarantine equal its batch plan over the
    input the stream has processed (up to its last committed micro-batch), per date partition
    the stream has closed. Exit 0: equal (or repaired); 1: a difference; 2: a model could not
    be audited (the reason is printed)."""
    from sqlflow.workflows.audit import audit_project

    reports = audit_project(
        context(), select=select, exclude=exclude, start=start.date() if start else None,
        end=end.date() if end else None, repair=repair, vars=parse_vars(vars_text),
        progress=lambda line: err_console.print(f"  [dim]{escape(line)}[/dim]", soft_wrap=True))
    print_reports(reports)
    skipped = [r for r in reports if r.skipped]
    bad = [r for r in reports if not r.ok and not r.skipped]
    if bad:
        console.print(f"[red]audit: DIFFERS[/red] — {', '.join(r.model for r in bad)}: the live "
                      "tables differ from the batch plan over the same input (rerun with --repair "
                      "to rewrite the differing partitions)")
        sys.exit(1)
    if skipped:
        console.print(f"[yellow]audit: INCOMPLETE[/yellow] — not audited: "
                      f"{', '.join(r.model for r in skipped)}")
        sys.exit(2)
    repaired = sum(len(r.repaired) for r in reports)
    fixed = f", {repaired} partition(s) repaired" if repaired else ""
    console.print(f"[green]audit: OK[/green] — {len(reports)} model(s): every closed partition of "
                  f"the live tables equals the batch plan over the input the stream processed{fixed}")


def print_reports(reports) -> None:
    """Each model's input and what it could not audit, the table of every output, then the
    differing partitions, the problems and the partitions left open, model by model."""
    from sqlflow.report.audit import differences_table, inputs_line, outputs_table

    for report in reports:
        if report.skipped:
            console.print(f"[yellow]{escape(report.model)}: not audited: {escape(report.skipped)}[/yellow]",
                          soft_wrap=True)
        else:
            console.print(f"  {escape(inputs_line(report))}", soft_wrap=True, highlight=False)
    console.print(outputs_table(reports, title="the live tables against the batch plan over the "
                                               "input the stream processed"))
    for report in reports:
        diffs = differences_table(report)
        if diffs is not None:
            console.print(diffs)
        for problem in report.problems:
            console.print(f"  [red]{escape(report.model)}: {escape(problem)}[/red]", soft_wrap=True)
        if report.open_partitions:
            shown, more = report.open_partitions[:6], len(report.open_partitions) - 6
            rest = f" and {more:,} more" if more > 0 else ""
            console.print(f"  {escape(report.model)}: open (not compared yet): "
                          f"{escape(', '.join(shown))}{rest}", soft_wrap=True)
