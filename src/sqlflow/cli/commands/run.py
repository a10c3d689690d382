"""`sqlflow run`: run models in dependency order, as backfills or as stream queries."""

from __future__ import annotations

import sys

import click

from sqlflow.cli.support import (
    SELECT_HELP,
    console,
    context,
    err_console,
    error_handler,
    exclude_option,
    parse_vars,
)
from sqlflow.errors import SqlflowError
from sqlflow.project.config import parse_duration
from sqlflow.project.runmode import Mode


@click.command("run")
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
              help=f"Models to run. {SELECT_HELP}")
@exclude_option
@click.option("--vars", "vars_text", default=None, help="YAML mapping of vars, overriding dbt_project.yml.")
@click.option("--full-refresh", is_flag=True,
              help="Stream mode: drop each selected stream model's tables (sink, quarantine; a "
                   "routed group: every target) and its checkpoint, and rebuild them from a new query. "
                   "Batch mode: rebuild `incremental` models instead of running them "
                   "incrementally, as `dbt run --full-refresh`.")
@click.option("--stop-timeout", default="30 seconds", show_default=True,
              help="Stream service: on SIGTERM or Ctrl-C, how long a running micro-batch may "
                   "take to finish before it is abandoned (its replay writes nothing twice).")
@click.option("--metrics-port", type=click.IntRange(1, 65535), default=None,
              help="Stream service: serve Prometheus metrics on 127.0.0.1:PORT/metrics.")
@click.option("--reset-offsets", type=click.Choice(["earliest", "latest"]), default=None,
              help="Stream mode, Kafka sources whose archived offsets are gone from the broker "
                   "(topic recreated, records aged out): earliest archives each such partition "
                   "from the first record the broker holds, latest skips what it holds now. "
                   "Partitions still on the broker resume where they stood.")
@click.option("--adopt-dbt-tables", is_flag=True,
              help="Let a table, incremental or view model take over the table at its own name "
                   "that `dbt run` built without a sqlflow owner (recorded from then on).")
@error_handler
def run_cmd(mode: Mode, trigger: str | None, start, end, select: tuple[str, ...],
            exclude: tuple[str, ...],
            vars_text: str | None, full_refresh: bool, stop_timeout: str,
            metrics_port: int | None, reset_offsets: str | None, adopt_dbt_tables: bool) -> None:
    """Run models in dependency order and print what each wrote and quarantined.

    Batch: without --start/--end every partition the model computes is replaced; with them,
    exactly the partitions of that date range. Stops at the first model that fails.
    Stream: each streaming_table model runs its stream plan (one query, one checkpoint);
    progress is printed per micro-batch. --full-refresh rebuilds the selected stream models
    from a new query (their tables and checkpoints are removed first). With interval
    triggers the run is a service: a failing model is restarted alone, SIGTERM or Ctrl-C
    stops every query, and the exit code is 1 if any model ended failed.
    """
    from sqlflow.workflows.run import plans_for_run, run_batch_plans, run_stream_plans

    ctx = context()
    first, last = (d.date() if d else None for d in (start, end))
    if mode == "stream" and (first or last):
        raise SqlflowError("--start/--end apply to --mode batch only",
                           hint="a stream run processes whatever its inputs hold")
    if mode == "batch" and trigger:
        raise SqlflowError("--trigger applies to --mode stream only")
    if mode == "batch" and reset_offsets:
        raise SqlflowError("--reset-offsets applies to --mode stream only",
                           hint="a backfill reads the Kafka sources' archives, not the topics")
    plans = plans_for_run(ctx, mode, err_console, select=select, vars=parse_vars(vars_text),
                          exclude=exclude, adopt_dbt_tables=adopt_dbt_tables)
    if mode == "stream":
        try:
            timeout = parse_duration(stop_timeout).total_seconds()
        except ValueError as exc:
            raise SqlflowError(f"--stop-timeout: {exc}") from None
        rows = run_stream_plans(ctx, plans, console, trigger=trigger, full_refresh=full_refresh,
                                stop_timeout_s=timeout, metrics_port=metrics_port,
                                reset_offsets=reset_offsets)
        if any(r.state == "failed" for r in rows):
            sys.exit(1)
    else:
        run_batch_plans(ctx, plans, console, start=first, end=last, full_refresh=full_refresh)


command = run_cmd
