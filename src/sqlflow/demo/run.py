"""`sqlflow demo` and `sqlflow demo generate`: the demo data, then the pipeline on it.

`run_demo` is README command 1. Over Kafka (without `--target`, the profile's `kafka` target;
or any target naming a Kafka cluster) it is `sqlflow.demo.kafka_demo`: a broker, the events
produced, every model streamed, and the streamed tables compared with the backfill. With an
explicit target that names no cluster (`--target local`, `cluster`) it is the Delta-only demo:
it generates the sources and backfills every model with `sqlflow run --mode batch` (what
tests and benchmarks run).
"""

from __future__ import annotations

import time

from rich.console import Console
from rich.table import Table

from sqlflow.demo import scenario as S
from sqlflow.demo.generate import DemoReport, generate, span, table_rows
from sqlflow.engine.connect_limits import refuse_over_connect
from sqlflow.engine.context import Context

_DIRTY_ROWS = (("late", "late"), ("future", "future"), ("null_event_time", "null event time"),
               ("null_key", "null key"), ("malformed_payload", "malformed payload"),
               ("malformed_spmid", "malformed spmid"), ("duplicate", "duplicate (extra copy)"))


def generate_demo(ctx: Context, console: Console, *, rows: int | None = None,
                  seed: int | None = None, days: int | None = None) -> DemoReport:
    """Generate the demo sources into the context's session and print what was written.

    None means the scenario's default (S.DEFAULT_ROWS impressions, seed S.DEFAULT_SEED,
    S.DEFAULT_DAYS days from S.DEFAULT_START).
    """
    refuse_over_connect(ctx.target, "generate")
    rows = S.DEFAULT_ROWS if rows is None else rows
    seed = S.DEFAULT_SEED if seed is None else seed
    days = S.DEFAULT_DAYS if days is None else days
    console.print(f"[bold]Generating demo data[/bold]: {rows:,} ad impressions over {days} day(s) "
                  f"from {S.DEFAULT_START}, seed {seed}")
    started = time.monotonic()
    report = generate(ctx.spark, rows=rows, seed=seed, days=days,
                      progress=lambda line: console.print(f"  {line}", highlight=False, soft_wrap=True))
    console.print(_sources_table(report))
    for table, written in report.dim_days.items():
        ready = report.ready_days[table]
        missing = [d for d in report.expected_days if d not in written]
        not_ready = [d for d in written if d not in ready]
        notes = [f"{', '.join(missing)} missing"] if missing else []
        notes += [f"{', '.join(not_ready)} written but not ready"] if not_ready else []
        console.print(f"  dim.{table}: ready {span(ready)}; {'; '.join(notes) or 'all ready'}",
                      highlight=False, soft_wrap=True)
    console.print(f"Generated in {time.monotonic() - started:.0f}s.")
    return report


def run_demo(ctx: Context, console: Console, *, rows: int | None = None,
             seed: int | None = None, days: int | None = None) -> bool:
    """README command 1 (see the module docstring); False when a streamed table differs from
    the backfill."""
    from sqlflow.demo.kafka_demo import kafka_context, run_kafka_demo

    kafka = kafka_context(ctx)
    if kafka is not None:
        return run_kafka_demo(kafka, console, rows=rows, seed=seed, days=days)
    run_delta_demo(ctx, console, rows=rows, seed=seed, days=days)
    return True


def run_delta_demo(ctx: Context, console: Console, *, rows: int | None = None,
                   seed: int | None = None, days: int | None = None) -> None:
    """Generate the demo data, backfill every model with sqlflow, and print every table built."""
    from sqlflow.workflows.run import run_batch_project

    started = time.monotonic()
    report = generate_demo(ctx, console, rows=rows, seed=seed, days=days)
    console.print("[bold]Running every model[/bold] (sqlflow run --mode batch)")
    runs = run_batch_project(ctx, console, console)
    built = [(t.table, "source", t.rows) for t in report.tables]
    seen: set[str] = set()  # a routed group's targets share one quarantine table
    for run in runs:
        for table, kind in ((run.sink.table, "model"),
                            (run.quarantine.table if run.quarantine else None, "quarantine")):
            if table and table not in seen:
                seen.add(table)
                built.append((table, kind, table_rows(ctx.spark, table)))
    console.print(_built_table(built, time.monotonic() - started))


def produce_demo(ctx: Context, console: Console, *, rows: int | None = None,
                 rate: float | None = None, seed: int | None = None, days: int | None = None) -> None:
    """`sqlflow demo produce`: the demo's events into Kafka (docs/semantics.md, "Kafka sources")."""
    from sqlflow.demo.produce import produce
    from sqlflow.engine.broker import reachable
    from sqlflow.errors import SqlflowError
    from sqlflow.project.kafka import BOOTSTRAP_KEY, bootstrap_servers

    servers = bootstrap_servers(ctx.target.server_side_parameters)
    if servers is None:
        raise SqlflowError(f"target `{ctx.target.name}` names no Kafka cluster ({BOOTSTRAP_KEY})",
                           hint="run with `--target kafka` (profiles/profiles.yml)")
    if not any(reachable(s.strip()) for s in servers.split(",")):
        raise SqlflowError("no Kafka broker answers at the target's bootstrap servers",
                           hint="start one with `sqlflow kafka up`, or check "
                                "SQLFLOW_KAFKA_BOOTSTRAP / the target in profiles/profiles.yml")
    rows = S.DEFAULT_ROWS if rows is None else rows
    seed = S.DEFAULT_SEED if seed is None else seed
    days = S.DEFAULT_DAYS if days is None else days
    console.print(f"[bold]Producing demo events[/bold]: {rows:,} ad impressions over {days} day(s), "
                  f"seed {seed}")
    started = time.monotonic()
    produce(ctx.spark, servers, rows=rows, seed=seed, days=days, rate=rate,
            progress=lambda line: console.print(f"  {line}", highlight=False, soft_wrap=True))
    console.print(f"Produced in {time.monotonic() - started:.0f}s.")


def _sources_table(report: DemoReport) -> Table:
    """ODS rows and injected dirty rows, one column per table (narrow enough for 80 columns)."""
    ods_tables = [t for t in report.tables if t.dirty]
    table = Table(title="Demo ODS tables: rows and dirty rows injected", title_justify="left")
    table.add_column("")
    for t in ods_tables:
        table.add_column(t.table.split(".")[-1].removeprefix("ods_"), justify="right")
    table.add_row("rows", *[f"{t.rows:,}" for t in ods_tables])
    for kind, label in _DIRTY_ROWS:
        table.add_row(label, *[f"{t.dirty[kind]:,}" if kind in t.dirty else "-" for t in ods_tables])
    return table


def _built_table(built: list[tuple[str, str, int]], seconds: float) -> Table:
    table = Table(title="Tables built", title_justify="left", caption=f"demo finished in {seconds:.0f}s",
                  caption_justify="left")
    table.add_column("table")
    table.add_column("kind")
    table.add_column("rows", justify="right")
    for name, kind, rows in built:
        table.add_row(name, kind, f"{rows:,}")
    return table
