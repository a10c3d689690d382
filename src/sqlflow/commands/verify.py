"""`sqlflow verify`: stream each selected streaming model in random orders and splits and
compare its output with the batch plan's, row for row (`sqlflow.verify`)."""

from __future__ import annotations

import random
import sys

import click

from sqlflow.cli_support import console, context, err_console, error_handler, escape, parse_vars

SHOWN_EQUAL = 20  # equal partitions listed per run; differing ones are always listed


@click.command("verify")
@click.option("--select", "-s", "select", multiple=True,
              help="Models to verify: name, +name, name+, tag:x, path:dir (streaming_table models "
                   "of the selection; default: all of them).")
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
def command(select: tuple[str, ...], runs: int, seed: int | None, order: str, keep: bool,
            vars_text: str | None) -> None:
    """Check that each streaming model's stream plan equals its batch plan on the current input.

    Runs the batch plan into a scratch table, then RUNS stream runs over fresh copies of the
    stream inputs that arrive in random chunks and orders; compares sink and quarantine row for
    row and prints a per-partition summary per run. Exits 1 on any difference.
    """
    from sqlflow.verify import verify_project

    seed = random.randrange(10**6) if seed is None else seed
    err_console.print(f"verify: seed {seed} (repeat this check with --seed {seed})")
    reports = verify_project(
        context(), select=select, runs=runs, seed=seed, order=order, keep=keep,
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
                  "equal the batch output, sink and quarantine")


def print_model(report, keep: bool) -> None:
    console.print(f"[bold]{escape(report.model)}[/bold] ({escape(report.path)}): batch plan "
                  f"{report.batch_rows:,} rows, {report.batch_quarantined:,} quarantined")
    for run in report.runs:
        console.print(run_table(run))
        for problem in run.problems:
            console.print(f"  [red]{escape(problem)}[/red]")
    if keep:
        console.print(f"  kept: batch output {report.batch_table}, stream outputs "
                      f"{', '.join(r.sink_table for r in report.runs)} (schema {report.scratch}; "
                      f"drop it with `DROP DATABASE {report.scratch} CASCADE`)")


def run_table(run):
    """Differing partitions first (all of them), then up to SHOWN_EQUAL equal ones."""
    from rich import box
    from rich.table import Table

    status = "[green]equal[/green]" if run.ok else "[red]DIFFERS[/red]"
    table = Table(title=f"{run.model} run {run.run}: {status} ({run.order} order, {run.commits} "
                        f"commits, {run.rounds} round(s), {run.batches} micro-batches, "
                        f"{run.seconds:.0f}s)",
                  title_justify="left", box=box.SIMPLE_HEAD)
    for name in ("table", "partition", "batch rows", "stream rows", "missing", "extra"):
        table.add_column(name, justify="left" if name in ("table", "partition") else "right")
    differing = [p for p in run.partitions if not p.ok]
    equal = [p for p in run.partitions if p.ok]
    for p in differing + equal[:SHOWN_EQUAL]:
        style = "red" if not p.ok else None
        table.add_row(p.table, escape(p.partition), f"{p.batch_rows:,}", f"{p.stream_rows:,}",
                      f"{p.missing:,}", f"{p.extra:,}", style=style)
    if len(equal) > SHOWN_EQUAL:
        table.add_row("", f"... {len(equal) - SHOWN_EQUAL} more equal partitions", "", "", "", "")
    return table
