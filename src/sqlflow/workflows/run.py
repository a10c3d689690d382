"""Compile a project for a run and run its models, printing progress: `run` and `demo` share it.

The one place a run's results are printed: the runtime returns values and reports progress
through callbacks; `sqlflow.report.summary` renders them.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import Counter
from collections.abc import Sequence
from datetime import date
from typing import Any, cast

from rich.console import Console
from rich.markup import escape

from sqlflow.compiler import compile_project, write_artifacts
from sqlflow.engine.connect_limits import refuse_over_connect
from sqlflow.engine.context import Context
from sqlflow.errors import SqlflowError
from sqlflow.planning.plan import BatchPlan, Mode, Plan, RoutedPlan
from sqlflow.project.config import parse_duration
from sqlflow.project.kafka import BOOTSTRAP_KEY, bootstrap_servers
from sqlflow.project.load import load_project
from sqlflow.project.runmode import AVAILABLE_NOW
from sqlflow.project.sources import SourceTable
from sqlflow.report.summary import (
    dims_table,
    event_line,
    files_table,
    progress_line,
    stream_table,
    summary_table,
)
from sqlflow.runtime.dispatch import is_stream, run_models
from sqlflow.runtime.kafka.archive import archive, bound_sources
from sqlflow.runtime.kafka.live import LiveArchive
from sqlflow.runtime.kafka.retry import Retry
from sqlflow.runtime.metrics import Metrics
from sqlflow.runtime.results import DateRange, RunResult, StreamRow
from sqlflow.runtime.streams import run_streams
from sqlflow.secrets import is_secret


def plans_for_run(ctx: Context, mode: Mode, err: Console, *, select: Sequence[str] | None = None,
                  vars: dict[str, Any] | None = None,
                  exclude: Sequence[str] | None = None,
                  adopt_dbt_tables: bool = False) -> list[Plan]:
    """Compile for `mode`, print warnings, raise on errors, write the artifacts (the SQL an
    error message points at) and return the plans to run, inputs first.

    `adopt_dbt_tables` (the operator's `--adopt-dbt-tables`, never a config): a `table`,
    `incremental` or `view` model may take over a table with no sqlflow owner at its own
    relation, as `dbt run` left it; without it such a table is refused like any table
    sqlflow did not create (docs/semantics.md, "Table ownership")."""
    result = compile_project(ctx.project_dir, mode=mode, select=list(select or []) or None,
                             target=ctx.target, vars=vars, exclude=list(exclude or []) or None)
    for diag in result.warnings:
        err.print(f"[yellow]{escape(diag.format())}[/yellow]", soft_wrap=True)
    result.raise_if_errors()
    write_artifacts(result, ctx.project_dir)
    plans = [p for p in result.plans.values() if p.materialized != "ephemeral"]
    return plans if adopt_dbt_tables else [_no_adoption(p) for p in plans]


def _no_adoption(plan: Plan) -> Plan:
    sink = getattr(plan, "sink", None)
    if sink is None or not sink.adopt_unowned:
        return plan
    return dataclasses.replace(plan, sink=dataclasses.replace(sink, adopt_unowned=False))


def run_batch_plans(ctx: Context, plans: Sequence[Plan], out: Console, *,
                    start: date | None = None, end: date | None = None,
                    full_refresh: bool = False) -> list[RunResult]:
    """Run batch plans in order with a progress line each and a summary table at the end,
    printed even when a model fails (its SqlflowError propagates). `full_refresh`: rebuild
    `incremental` models (`dbt run --full-refresh`)."""
    dates = DateRange.of(start, end)
    done: list[RunResult] = []
    try:
        batch_plans = cast(Sequence[BatchPlan | RoutedPlan], plans)  # batch mode plans no StreamPlan
        for run in run_models(ctx, batch_plans, start=start, end=end, full_refresh=full_refresh):
            done.append(run)
            out.print(escape(progress_line(run)), soft_wrap=True)
    finally:
        not_run = [p.model for p in plans[len(done) + 1:]] if len(done) < len(plans) else []
        out.print(summary_table(done, dates, not_run))
        dims = dims_table(done)
        if dims is not None:
            out.print(dims)
        routed = [r.route for r in done if r.route is not None]
        if routed:
            out.print(files_table(routed))
    return done


def run_stream_plans(ctx: Context, plans: Sequence[Plan], out: Console, *, trigger: str | None,
                     full_refresh: bool = False, stop_timeout_s: float = 30.0,
                     metrics_port: int | None = None,
                     reset_offsets: str | None = None,
                     stop: threading.Event | None = None) -> list[StreamRow]:
    """`sqlflow run --mode stream`: a progress line per micro-batch (and per batch plan run
    once, and per change of a model's region in the stream service), then the summary table
    and each failed model's error, printed even when a model fails. `metrics_port`: serve
    the service's Prometheus metrics on 127.0.0.1. `reset_offsets`: where a Kafka source whose
    archived offsets are gone from the broker starts again (`earliest`/`latest`). With an
    interval trigger the Kafka sources are archived on, beside the models (`LiveArchive`);
    `stop` ends the service (as SIGTERM does)."""
    def on_event(e: Any) -> None:
        out.print(escape(event_line(e)), soft_wrap=True)

    bound = archive_topics(ctx, plans, out, reset=reset_offsets)
    companions = []
    every = live_trigger(trigger, plans)
    if bound is not None and every is not None:
        tables, servers, retry = bound
        companions.append(LiveArchive(ctx.spark, ctx.project_dir, tables, servers, every, retry,
                                      on_event=on_event))
    rows: list[StreamRow] = []
    metrics = None
    if metrics_port is not None:
        metrics = Metrics()
        metrics.serve(metrics_port)
        out.print(f"metrics: http://127.0.0.1:{metrics_port}/metrics", soft_wrap=True)
    try:
        run_streams(ctx, plans, trigger=trigger, full_refresh=full_refresh, rows=rows,
                    stop_timeout_s=stop_timeout_s, metrics=metrics, on_event=on_event,
                    stop=stop, companions=companions)
    finally:
        if rows:  # a run refused before any model ran has nothing to sum up
            out.print(stream_table(rows, trigger))
            for r in rows:
                if r.error:
                    out.print(f"[red]{escape(r.model)} failed: {escape(r.error)}[/red]",
                              soft_wrap=True)
    return rows


def live_trigger(trigger: str | None, plans: Sequence[Plan]) -> str | None:
    """The trigger of the live archive queries: the run's interval, else the shortest interval
    a stream plan is configured with; None when every stream runs bounded (available-now)."""
    if trigger is not None:
        return None if trigger == AVAILABLE_NOW else trigger
    intervals = [t for p in plans if is_stream(p)
                 and (t := getattr(p, "trigger", AVAILABLE_NOW)) != AVAILABLE_NOW]
    return min(intervals, key=lambda t: parse_duration(t), default=None)


def archive_topics(ctx: Context, plans: Sequence[Plan], out: Console, *,
                   reset: str | None = None) -> tuple[list[SourceTable], str, Retry] | None:
    """Before a stream run, when the target names a Kafka cluster: archive the topics of the
    Kafka sources the plans read, up to their end now (docs/semantics.md, "Kafka sources").
    The models then read the archive, as the backfill does. A broker that does not answer is
    waited for as the target's `Retry` says. The servers are never printed (they may carry
    credentials). Returns what a live archive needs (the tables, the servers, the retry),
    None when no plan reads a Kafka source."""
    servers = bootstrap_servers(ctx.target.server_side_parameters)
    tables = bound_sources(load_project(ctx.project_dir).sources.values(), plans) if servers else []
    if reset is not None and not tables:
        raise SqlflowError("--reset-offsets: none of the selected models reads a Kafka source "
                           f"under target `{ctx.target.name}`",
                           hint="select a model that reads a Kafka-bound source, or use a target "
                                "that names a Kafka cluster (`--target kafka`)")
    if not servers or not tables:
        return None
    groups = Counter(t.kafka.alignment_group for t in tables if t.kafka and t.kafka.alignment_group)
    if any(n > 1 for n in groups.values()):  # held against each other in this process
        refuse_over_connect(ctx.target, "kafka")
    retry = Retry.of(ctx.target.server_side_parameters)
    for attempt in range(retry.retries + 1):
        if retry.reachable(servers):
            break
        if attempt < retry.retries:
            delay = retry.backoff_s * 2 ** attempt
            out.print(f"kafka: no broker answers yet, trying again in {delay:.0f}s "
                      f"({attempt + 1}/{retry.retries})", soft_wrap=True)
            time.sleep(delay)
    else:
        secret = any(is_secret(n) for n in ctx.target.env_sourced.get(BOOTSTRAP_KEY, ()))
        where = "the target's bootstrap servers" if secret else servers
        raise SqlflowError(
            f"no Kafka broker answers at {where} (target `{ctx.target.name}`), so the topics of "
            f"{', '.join(t.key for t in tables)} cannot be archived",
            hint="start it (`sqlflow kafka up` for the local one), or check the address, the "
                 f"network and `{BOOTSTRAP_KEY}` in profiles/profiles.yml; nothing was run")
    for a in archive(ctx.spark, ctx.project_dir, tables, servers, reset=reset, retry=retry):
        for line in a.reset:
            out.print(escape(f"kafka {a.topic}: --reset-offsets {reset}: {line}"), soft_wrap=True)
        bad = f", {a.malformed:,} malformed" if a.malformed else ""
        held = f", held {a.held_s:.1f}s by its source control" if a.held_s >= 0.05 else ""
        again = f", started again {a.restarts}x after broker trouble" if a.restarts else ""
        out.print(escape(f"kafka {a.topic} -> {a.source}.{a.table}: {a.rows:,} records archived"
                         f"{bad} ({a.seconds:.1f}s{held}{again})"), soft_wrap=True)
    return tables, servers, retry


def run_batch_project(ctx: Context, out: Console, err: Console, *,
                      select: Sequence[str] | None = None, start: date | None = None,
                      end: date | None = None, vars: dict[str, Any] | None = None) -> list[RunResult]:
    """`sqlflow run --mode batch`: compile, then run every selected model in order."""
    DateRange.of(start, end)  # refuse a bad range before compiling
    plans = plans_for_run(ctx, "batch", err, select=select, vars=vars)
    return run_batch_plans(ctx, plans, out, start=start, end=end)
