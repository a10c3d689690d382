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
    for report in reports:
        print_report(report)
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


def print_report(report) -> None:
    from rich import box
    from rich.table import Table

    if report.skipped:
        console.print(f"[yellow]{escape(report.model)}: not audited: {escape(report.skipped)}[/yellow]",
                      soft_wrap=True)
        return
    status = "[green]equal[/green]" if report.ok else "[red]DIFFERS[/red]"
    inputs = ", ".join(f"{r}@v{v}" for r, v in report.pinned.items())
    closed = f"closed before {report.closed_before}" if report.closed_before else "every partition"
    table = Table(title=f"{report.model}: {status} (input {inputs}; {closed})",
                  title_justify="left", box=box.SIMPLE_HEAD)
    for name in ("table", "partition", "batch rows", "stream rows", "missing", "extra"):
        table.add_column(name, justify="left" if name in ("table", "partition") else "right")
    for p in sorted(report.partitions, key=lambda p: (p.ok, p.table, p.partition)):
        fixed = f"{p.table}: {p.partition}" in report.repaired
        table.add_row(escape(p.table), escape(p.partition) + (" (repaired)" if fixed else ""),
                      f"{p.batch_rows:,}", f"{p.stream_rows:,}", f"{p.missing:,}", f"{p.extra:,}",
                      style=None if p.ok or fixed else "red")
    console.print(table)
    for problem in report.problems:
        console.print(f"  [red]{escape(problem)}[/red]", soft_wrap=True)
    if report.open_partitions:
        console.print(f"  open (not compared yet): {escape(', '.join(report.open_partitions))}",
                      soft_wrap=True)
