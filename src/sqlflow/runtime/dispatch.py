"""The one place that picks a runtime for a plan's kind (docs/design.md, "Runtime").

| plan                               | batch                      | stream                        |
|------------------------------------|----------------------------|-------------------------------|
| `BatchPlan`                        | `batch.run_batch`          | (none: runs its batch plan)   |
| `StreamPlan`, strategy incremental | -                          | `incremental.stream`          |
| `StreamPlan`, strategy stateful    | -                          | `stateful.stream`             |
| `RoutedPlan`                       | `routed.routing` (batch)   | `routed.routing` (stream)     |

Run, verify, refresh and repair all come here; no other module asks which kind a plan is.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from datetime import date
from pathlib import Path
from typing import Any, TypeGuard

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from sqlflow.engine.context import Context
from sqlflow.planning.plan import BatchPlan, Plan, RoutedPlan, StreamPlan
from sqlflow.project.runmode import STATE_DIR
from sqlflow.runtime import batch, dbt_incremental, input_rewrites, ownership, run_lock
from sqlflow.runtime import repair as repairs
from sqlflow.runtime.incremental import padding, remote
from sqlflow.runtime.incremental import stream as incremental
from sqlflow.runtime.query import AVAILABLE_NOW, checkpoint_dir, is_new, rebuild_command
from sqlflow.runtime.results import DateRange, RunResult, StreamResult
from sqlflow.runtime.routed import routing
from sqlflow.runtime.stateful import stream as stateful

StreamingPlan = StreamPlan | RoutedPlan


def is_stream(plan: Plan) -> TypeGuard[StreamingPlan]:
    """The plan runs as a stream query (a `StreamPlan` or a routed group's stream plan)."""
    return plan.kind == "routed" and plan.mode == "stream" or plan.kind == "stream"


def run_batch(ctx: Context, plan: BatchPlan | RoutedPlan, *, start: date | None = None,
              end: date | None = None, full_refresh: bool = False) -> Iterator[RunResult]:
    """Backfill one plan: one `RunResult` for a model, one per target for a routed group.
    A model with a stream checkpoint is refused while a stream run of it runs (`run_lock`)."""
    checkpoint = _stream_checkpoint(ctx, plan)
    if checkpoint is not None:
        run_lock.take(checkpoint, what=_what(plan), path=plan.path, action="backfill")
    try:
        if isinstance(plan, RoutedPlan):
            yield from routing.run_routed_batch(ctx, plan, start=start, end=end)
        else:
            yield batch.run_batch(ctx, plan, start=start, end=end, full_refresh=full_refresh)
    finally:
        if checkpoint is not None:
            run_lock.release(checkpoint)


def _stream_checkpoint(ctx: Context, plan: BatchPlan | RoutedPlan) -> Path | None:
    """The checkpoint folder of the plan's model when it was ever run as a stream."""
    if isinstance(plan, RoutedPlan):
        folder = checkpoint_dir(ctx.project_dir, plan)
    else:
        folder = Path(ctx.project_dir) / (plan.sink.checkpoint or f"{STATE_DIR}/checkpoints/{plan.model}")
    return folder if folder.is_dir() else None


def _what(plan: Plan) -> str:
    return f"routed group `{plan.model}`" if isinstance(plan, RoutedPlan) else f"model `{plan.model}`"


def run_models(ctx: Context, plans: Sequence[BatchPlan | RoutedPlan], *, start: date | None = None,
               end: date | None = None, full_refresh: bool = False) -> Iterator[RunResult]:
    """Run `plans` in order (compile_project's order: inputs first), yielding each result.
    `full_refresh`: `incremental` models are rebuilt, as `dbt run --full-refresh` does.

    Stops at the first model that fails: later models read its table, so running them would
    build on stale or missing rows. The SqlflowError raised names the model and why.
    """
    if DateRange.of(start, end) is not None:  # refuse a bad range before any model runs
        dbt_incremental.refuse_range(plans)
    # docs/semantics.md, "Table ownership": refuse the run before any table is touched
    ownership.check_plans(ctx.spark, plans, action="replace")
    for plan in plans:
        yield from run_batch(ctx, plan, start=start, end=end, full_refresh=full_refresh)


def check_stream(spark: SparkSession, plan: StreamingPlan) -> None:
    """Refuse what the plan's stream runtime cannot run, before anything starts."""
    if isinstance(plan, RoutedPlan):
        routing.check_stream_plan(spark, plan)
    elif plan.strategy == "stateful":
        stateful.check(spark, plan)
    else:
        incremental.check_plan(spark, plan)


def needs_idle_padding(plan: Plan) -> bool:
    """The plan's `idle_timeout` pads, under an interval trigger, what an idle input holds
    open, in a step its runtime runs beside the query: an `incremental` outer join of two
    streams (`MicroBatch.idle_check`; over Spark Connect the stream service runs it with the
    query stopped, `incremental.remote_idle`) or a `stateful` model (`IdleWatch`)."""
    if not isinstance(plan, StreamPlan) or not plan.idle_timeout_us:
        return False
    return plan.strategy == "stateful" or bool(padding.sides(plan))


def remote_reports(ctx: Context, plan: StreamingPlan, query: StreamingQuery, fn: Any) -> list[Any]:
    """The reports of the batches a Spark Connect server ran for the query of `plan` (started
    by `start_stream`, `fn` the batch function it returned), read from the query's progress
    and the commit log (docs/deploy.md, "Spark Connect")."""
    if isinstance(plan, RoutedPlan):
        return routing.remote_reports(ctx.spark, query, plan, fn.app_id())
    if plan.strategy == "stateful":
        return stateful.remote_batches(ctx.spark, query, plan, fn)
    return remote.reports(ctx.spark, query, plan, fn.sides, fn.app_id())


def start_stream(ctx: Context, plan: StreamingPlan, *, trigger: str = AVAILABLE_NOW,
                 on_batch: Callable[[Any], None] | None = None,
                 after_sink: Callable[[int], None] | None = None,
                 after_state: Callable[[int], None] | None = None) -> tuple[StreamingQuery, Any]:
    """Start the plan's one query; returns `(query, batch function)`. The model's run lock
    (`run_lock`) is held while the query runs."""
    checkpoint = checkpoint_dir(ctx.project_dir, plan)
    run_lock.take(checkpoint, what=_what(plan), path=plan.path)
    try:
        _check_inputs(ctx, plan, checkpoint)
        if isinstance(plan, RoutedPlan):
            started = routing.start(ctx, plan, trigger=trigger, on_batch=on_batch)
        elif plan.strategy == "stateful":
            started = stateful.start(ctx, plan, trigger=trigger, on_batch=on_batch, after_sink=after_sink)
        else:
            started = incremental.start(ctx, plan, trigger=trigger, on_batch=on_batch,
                                        after_sink=after_sink, after_state=after_state)
    except BaseException:
        run_lock.release(checkpoint)
        raise
    run_lock.attach(checkpoint, started[0])
    return started


def run_stream(ctx: Context, plan: StreamingPlan, *, trigger: str = AVAILABLE_NOW,
               on_batch: Callable[[Any], None] | None = None,
               after_sink: Callable[[int], None] | None = None,
               after_state: Callable[[int], None] | None = None,
               end_of_input: bool = True) -> StreamResult:
    """Run the plan's query until it stops (available-now: when every input row is
    processed; an interval: until interrupted). `end_of_input` (routed groups): no more input
    follows this run, so it commits its last open hours. Refused while another run of the
    model runs (`run_lock`)."""
    checkpoint = checkpoint_dir(ctx.project_dir, plan)
    run_lock.take(checkpoint, what=_what(plan), path=plan.path)
    try:
        _check_inputs(ctx, plan, checkpoint)
        return _run_stream(ctx, plan, trigger=trigger, on_batch=on_batch, after_sink=after_sink,
                           after_state=after_state, end_of_input=end_of_input)
    finally:
        run_lock.release(checkpoint)


def _check_inputs(ctx: Context, plan: StreamingPlan, checkpoint: Path) -> None:
    """An existing checkpoint's inputs were not rewritten since (`input_rewrites`)."""
    if not is_new(checkpoint):
        input_rewrites.check(ctx.spark, checkpoint, [b.relation for b in plan.sources],
                             what=_what(plan), path=plan.path, rebuild=rebuild_command(plan))


def _run_stream(ctx: Context, plan: StreamingPlan, *, trigger: str,
                on_batch: Callable[[Any], None] | None, after_sink: Callable[[int], None] | None,
                after_state: Callable[[int], None] | None, end_of_input: bool) -> StreamResult:
    if isinstance(plan, RoutedPlan):
        began = time.monotonic()
        reports = routing.run_routed_stream(ctx, plan, trigger=trigger, on_batch=on_batch,
                                            end_of_input=end_of_input)
        return StreamResult(plan.model, tuple(reports), time.monotonic() - began)
    if plan.strategy == "stateful":
        return stateful.run_stateful(ctx, plan, trigger=trigger, on_batch=on_batch,
                                     after_sink=after_sink)
    return incremental.run_stream(ctx, plan, trigger=trigger, on_batch=on_batch,
                                  after_sink=after_sink, after_state=after_state)


def repair(ctx: Context, plans: Sequence[BatchPlan | RoutedPlan], *,
           on_run: Callable[[RunResult], None] | None = None) -> list[repairs.RepairResult]:
    """Repair `plans` in compile order (inputs first: a repaired input feeds its readers)."""
    return [repairs.repair_routed(ctx, p, on_run=on_run) if isinstance(p, RoutedPlan) else
            repairs.repair_model(ctx, p, on_run=on_run) for p in plans
            if isinstance(p, RoutedPlan) or p.sink.write != "view"]
