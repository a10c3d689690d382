"""`sqlflow verify`: stream each selected streaming model (or routed group) in random orders and
splits and compare its output with the batch plan's, row for row (`sqlflow.workflows.verify.run`)."""

from __future__ import annotations

import random
import sys
from typing import Literal

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

SHOWN_EQUAL = 20  # equal partitions listed per table and run; differing ones are always listed


@click.command("verify")
@click.option("--select", "-s", "select", multiple=True,
              help="Models to verify: name, +name, name+, tag:x, path:dir (streaming_table models "
                   "of the selection; default: all of them). A routed group's name or any of its "
                   "members verifies the whole group.")
@exclude_option
@click.option("--runs", type=click.IntRange(min=1), default=3, show_default=True,
              help="Stream runs per model, each with its own random arrival order and splits.")
@click.option("--seed", type=int, default=None,
              help="Seed of the random orders and splits (default: a new one, printed).")
@click.option("--order", type=click.Choice(["auto", "shuffled", "ingest"]), default="auto",
              show_default=True,
              help="shuffled: each input's rows in random order; ingest: in ingest-time order "
                   "(random chunk sizes); auto: shuffled unless the plan pads outer joins or "
                   "uses Spark's watermarks.")
@click.option("--keep", is_flag=True, help="Keep the scratch schema and checkpoints to inspect them.")
@click.option("--vars", "vars_text", default=None, help="YAML mapping of vars, overriding dbt_project.yml.")
@error_handler
def command(select: tuple[str, ...], exclude: tuple[str, ...], runs: int, seed: int | None,
            order: Literal["auto", "shuffled", "ingest"], keep: bool, vars_text: str | None) -> None:
    """Check that each streaming model's (or routed group's) stream plan equals its batch plan
    on the current input.

    Runs the batch plan into scratch tables, then RUNS stream runs over fresh copies of the
    stream inputs that arrive in random chunks and orders; compares every output table (the
    sink, or each routed target) and the quarantine row for row and prints a per-partition
    summary per run. Exits 1 on any difference.
    """
    from sqlflow.workflows.verify.run import verify_project

    seed = random.randrange(10**6) if seed is None else seed
    err_console.print(f"verify: seed {seed} (repeat this check with --seed {seed})")
    reports = verify_project(
        context(), select=select, exclude=exclude, runs=runs, seed=seed, order=order, keep=keep,
        vars=parse_vars(vars_text),
        progress=lambda line: err_console.print(f"  [dim]{escape(line)}[/dim]", soft_wrap=True),
        on_model=lambda report: print_model(report, keep))
    bad = [r for r in reports if not r.ok]
    runs_done = sum(len(r.runs) for r in reports)
    if bad:
        console.print(f"[red]verify: FAILED[/red] — {', '.join(r.model for r in bad)}: the stream "
                      f"output differs from the batch output (seed {seed})")
        sys.exit(1)
    console.print(f"[green]verify: OK[/green] — {runs_done} stream run(s) of {len(reports)} model(s) "
                  "equal the batch output, every output table and the quarantine")


def print_model(report, keep: bool) -> None:
    console.print(f"[bold]{escape(report.model)}[/bold] ({escape(report.path)}): batch plan "
                  f"{report.batch_rows:,} rows, {report.batch_quarantined:,} quarantined")
    for run in report.runs:
        console.print(run_table(run))
        for problem in run.problems:
            console.print(f"  [red]{escape(problem)}[/red]")
    if keep:
        from sqlflow.planning.plan import COMMIT_LOG

        stream = [t for r in report.runs for t in r.tables]
        console.print(f"  kept: batch output {', '.join(report.batch_tables)}, stream outputs "
                      f"{', '.join(stream)} (schema {report.scratch}; drop it and its commit-log "
                      f"rows with `DROP DATABASE {report.scratch} CASCADE` and `DELETE FROM "
                      f"{COMMIT_LOG} WHERE startswith(table, '{report.scratch}.')`)", soft_wrap=True)


def run_table(run):
    """Differing partitions first (all of them), then up to SHOWN_EQUAL equal ones per table
    (the sink, or each routed target, then the quarantine)."""
    from rich import box
    from rich.table import Table

    status = "[green]equal[/green]" if run.ok else "[red]DIFFERS[/red]"
    table = Table(title=f"{run.model} run {run.run}: {status} ({run.order} order, {run.commits} "
                        f"commits, {run.rounds} round(s), {run.batches} micro-batches, "
                        f"{run.seconds:.0f}s)",
                  title_justify="left", box=box.SIMPLE_HEAD)
    for name in ("table", "partition", "batch rows", "stream rows", "missing", "extra"):
        table.add_column(name, justify="left" if name in ("table", "partition") else "right")
    def row(p):
        table.add_row(escape(p.table), escape(p.partition), f"{p.batch_rows:,}", f"{p.stream_rows:,}",
                      f"{p.missing:,}", f"{p.extra:,}", style=None if p.ok else "red")

    for p in run.partitions:
        if not p.ok:
            row(p)
    for name in dict.fromkeys(p.table for p in run.partitions):  # sink or targets, quarantine
        equal = [p for p in run.partitions if p.table == name and p.ok]
        for p in equal[:SHOWN_EQUAL]:
            row(p)
        if len(equal) > SHOWN_EQUAL:
            table.add_row(escape(name), f"... {len(equal) - SHOWN_EQUAL} more equal partitions",
                          "", "", "", "")
    return table
