"""The `sqlflow` command line. Commands are thin: parse options, call the library, print.

A user mistake (SqlflowError) prints one red line per problem with a hint and exits 1;
`--debug` re-raises it with the traceback instead.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from sqlflow.cli_support import console, context, err_console, error_handler, escape, parse_vars
from sqlflow.commands import COMMANDS
from sqlflow.errors import SqlflowError


@click.group()
@click.option("--project-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Project root (default: the nearest folder with dbt_project.yml).")
@click.option("--target", "-t", default=None, help="Target in profiles/profiles.yml (default: the profile's).")
@click.option("--debug", is_flag=True, help="Show full tracebacks.")
@click.version_option(package_name="sqlflow")
@click.pass_context
def main(ctx: click.Context, project_dir: Path | None, target: str | None, debug: bool) -> None:
    """sqlflow: dbt-style SQL models compiled to Spark streaming or backfill plans."""
    ctx.obj = {"project_dir": project_dir, "target": target}


@main.group(invoke_without_command=True)
@click.option("--rows", type=click.IntRange(min=100), default=None,
              help="Impressions to generate (events scale with it). Default: a few-minute demo.")
@click.option("--seed", type=int, default=None, help="Random seed; the same seed gives the same data.")
@click.option("--days", type=click.IntRange(min=1, max=31), default=None, help="Days of data.")
@click.pass_context
@error_handler
def demo(click_ctx: click.Context, rows: int | None, seed: int | None, days: int | None) -> None:
    """Generate demo data and run the pipeline end to end (the README's main job)."""
    if click_ctx.invoked_subcommand is not None:
        return
    from sqlflow.demo.run import run_demo

    run_demo(context(), console, rows=rows, seed=seed, days=days)


@demo.command("generate")
@click.option("--rows", type=click.IntRange(min=100), default=None, help="Impressions to generate.")
@click.option("--seed", type=int, default=None, help="Random seed; the same seed gives the same data.")
@click.option("--days", type=click.IntRange(min=1, max=31), default=None, help="Days of data.")
@error_handler
def demo_generate(rows: int | None, seed: int | None, days: int | None) -> None:
    """Write the demo's ODS and dimension Delta tables (deterministic for a seed)."""
    from sqlflow.demo.run import generate_demo

    generate_demo(context(), console, rows=rows, seed=seed, days=days)


@main.command("compile")
@click.option("--mode", type=click.Choice(["stream", "batch"]), required=True,
              help="stream: Structured Streaming plans; batch: backfill plans.")
@click.option("--select", "-s", "select", multiple=True,
              help="Models to compile: name, +name (with ancestors), name+ (with descendants), tag:x, path:dir.")
@click.option("--format", "fmt", type=click.Choice(["sql", "json"]), default="sql", help="What to print.")
@click.option("--vars", "vars_text", default=None, help="YAML mapping of vars, overriding dbt_project.yml.")
@error_handler
def compile_cmd(mode: str, select: tuple[str, ...], fmt: str, vars_text: str | None) -> None:
    """Compile models to Spark plans; print them and write target/sqlflow/<mode>/<model>.sql|json."""
    from sqlflow.compiler import compile_project, plan_json_text, plan_sql_text, write_artifacts
    from sqlflow.secrets import mask

    ctx = context()
    result = compile_project(ctx.project_dir, mode=mode, select=list(select) or None,
                             target=ctx.target, vars=parse_vars(vars_text))
    for diag in result.warnings:
        err_console.print(f"[yellow]{escape(diag.format())}[/yellow]", soft_wrap=True)
    result.raise_if_errors()
    written = write_artifacts(result, ctx.project_dir)
    for name, plan in result.plans.items():
        text = plan_sql_text(plan) if fmt == "sql" else plan_json_text(plan, result.irs.get(name))
        text = mask(text)  # docs/deploy.md, "Secrets"
        console.print(escape(text), end="" if text.endswith("\n") else "\n", soft_wrap=True)
    err_console.print(f"compiled {len(result.plans)} model(s) in {mode} mode; "
                      f"wrote {len(written)} files to target/sqlflow/{mode}/")


@main.command("run")
@click.option("--mode", type=click.Choice(["batch", "stream"]), required=True,
              help="batch: backfill with the batch plans; stream: one streaming query per "
                   "streaming_table model (other models run their batch plan once).")
@click.option("--trigger", default=None,
              help="Stream mode: `available-now` (process what is there, then stop) or an "
                   "interval like '10 seconds' (default: each model's configured trigger).")
@click.option("--start", type=click.DateTime(formats=["%Y-%m-%d"]), default=None,
              help="First date of the backfill range (inclusive), e.g. 2026-11-01.")
@click.option("--end", type=click.DateTime(formats=["%Y-%m-%d"]), default=None,
              help="Last date of the backfill range (inclusive).")
@click.option("--select", "-s", "select", multiple=True,
              help="Models to run: name, +name (with ancestors), name+ (with descendants), tag:x, path:dir.")
@click.option("--vars", "vars_text", default=None, help="YAML mapping of vars, overriding dbt_project.yml.")
@click.option("--full-refresh", is_flag=True,
              help="Stream mode: drop each selected stream model's tables (sink, quarantine; a "
                   "routed group: every target) and its checkpoint, and rebuild them from a new query.")
@error_handler
def run_cmd(mode: str, trigger: str | None, start, end, select: tuple[str, ...],
            vars_text: str | None, full_refresh: bool) -> None:
    """Run models in dependency order and print what each wrote and quarantined.

    Batch: without --start/--end every partition the model computes is replaced; with them,
    exactly the partitions of that date range. Stops at the first model that fails.
    Stream: each streaming_table model runs its stream plan (one query, one checkpoint);
    progress is printed per micro-batch. --full-refresh rebuilds the selected stream models
    from a new query (their tables and checkpoints are removed first).
    """
    from sqlflow.runtime.runner import plans_for_run, run_batch_plans

    ctx = context()
    first, last = (d.date() if d else None for d in (start, end))
    if mode == "stream" and (first or last):
        raise SqlflowError("--start/--end apply to --mode batch only",
                           hint="a stream run processes whatever its inputs hold")
    if mode == "batch" and trigger:
        raise SqlflowError("--trigger applies to --mode stream only")
    if mode == "batch" and full_refresh:
        raise SqlflowError("--full-refresh applies to --mode stream only",
                           hint="a batch run already replaces every partition it computes")
    plans = plans_for_run(ctx, mode, err_console, select=select, vars=parse_vars(vars_text))
    if mode == "stream":
        from sqlflow.runtime.stream import run_streams

        run_streams(ctx, plans, trigger=trigger, print_line=lambda line: console.print(
            escape(line), soft_wrap=True), print_table=console.print, full_refresh=full_refresh)
    else:
        run_batch_plans(ctx, plans, console, start=first, end=last)


@main.command("dbt", context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.argument("dbt_args", nargs=-1, type=click.UNPROCESSED)
@error_handler
def dbt_cmd(dbt_args: tuple[str, ...]) -> None:
    """Run dbt in this process, in sqlflow's SparkSession (so the project's Python UDFs exist).

    Example: `sqlflow dbt run --select staging`. `--profiles-dir profiles` is added for you.
    """
    from sqlflow.dbt_bridge import run_dbt

    ok = run_dbt(context(), list(dbt_args))
    sys.exit(0 if ok else 1)


for _command in COMMANDS:
    main.add_command(_command)


if __name__ == "__main__":  # pragma: no cover
    main()
