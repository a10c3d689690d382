"""`sqlflow demo` and `sqlflow demo generate`: the demo data, then the pipeline on it.

`run_demo` grows with the project: today it generates the sources and builds the staging
models with dbt (in-process, on the same SparkSession); later issues add their stages here.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from sqlflow.context import Context
from sqlflow.demo import scenario as S
from sqlflow.demo.generate import DemoReport, generate, span, table_rows
from sqlflow.errors import SqlflowError

_DIRTY_ROWS = (("late", "late"), ("future", "future"), ("null_event_time", "null event time"),
               ("null_key", "null key"), ("malformed_payload", "malformed payload"),
               ("malformed_spmid", "malformed spmid"), ("duplicate", "duplicate (extra copy)"))


def generate_demo(ctx: Context, console: Console, *, rows: int | None = None,
                  seed: int | None = None, days: int | None = None) -> DemoReport:
    """Generate the demo sources into the context's session and print what was written.

    None means the scenario's default (S.DEFAULT_ROWS impressions, seed S.DEFAULT_SEED,
    S.DEFAULT_DAYS days from S.DEFAULT_START).
    """
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
             seed: int | None = None, days: int | None = None) -> None:
    """Generate the demo data, run the pipeline as far as it exists, and print every table built."""
    from sqlflow.dbt_bridge import run_dbt

    started = time.monotonic()
    report = generate_demo(ctx, console, rows=rows, seed=seed, days=days)
    console.print("[bold]Building the staging models[/bold] with dbt, in this Spark session")
    target_path = ctx.project_dir / "target"
    ok = run_dbt(ctx, ["run", "--select", "staging", "--target-path", str(target_path)])
    if not ok:
        raise SqlflowError("dbt could not build the staging models",
                           hint="see dbt's output above; rerun with `sqlflow dbt run --select staging`")
    built = [(t.table, "source", t.rows) for t in report.tables]
    built += [(name, "model", table_rows(ctx.spark, name)) for name in built_models(target_path)]
    console.print(_built_table(built, time.monotonic() - started))


def built_models(target_path: Path) -> list[str]:
    """The tables the last dbt run built successfully, from its run_results.json and manifest."""
    try:
        results = json.loads((target_path / "run_results.json").read_text())["results"]
        nodes = json.loads((target_path / "manifest.json").read_text())["nodes"]
    except (OSError, ValueError, KeyError) as exc:
        raise SqlflowError(f"cannot read dbt's run results in {target_path}: {exc}",
                           hint="rerun `sqlflow demo`; dbt writes them after every run") from None
    names = []
    for result in results:
        node = nodes.get(result["unique_id"], {})
        if result.get("status") == "success" and node.get("resource_type") == "model":
            names.append(f"{node['schema']}.{node['alias']}")
    return sorted(names)


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
