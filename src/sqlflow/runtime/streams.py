"""`sqlflow run --mode stream`: run many models' plans together (docs/design.md, "Runtime").

`available-now`: one model after the other, each until its inputs are processed. An interval
(or None: each model's configured trigger): models without a stream plan run their batch plan
once, models configured `available-now` run bounded, then every other stream plan runs in the
stream service (`sqlflow.runtime.service`): each its own region, restarted alone when it
fails, until SIGTERM or Ctrl-C stops them all (the checkpoints resume). `full_refresh` first
removes every stream plan's tables and checkpoint (`sqlflow.runtime.refresh`).

Nothing here prints: progress goes to `on_event` as values (a `Refreshed`, a micro-batch
report, a `RunResult`) and each model's summary row is appended to `rows`, which the caller
renders even when the run fails (`sqlflow.report.summary`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlflow.engine.context import Context
from sqlflow.planning.plan import Plan, StreamPlan
from sqlflow.runtime import dispatch, ownership
from sqlflow.runtime.query import AVAILABLE_NOW
from sqlflow.runtime.refresh import full_refresh as refresh_plan
from sqlflow.runtime.results import StreamRow
from sqlflow.runtime.service import Service


@dataclass(frozen=True)
class Refreshed:
    """`--full-refresh` removed these tables and folders of a model before its run."""

    model: str
    removed: tuple[str, ...]


def run_streams(ctx: Context, plans: Sequence[Plan], *, trigger: str | None,
                on_event: Callable[[Any], None], rows: list[StreamRow],
                full_refresh: bool = False, stop_timeout_s: float = 30.0,
                metrics: Any = None, stop: threading.Event | None = None,
                companions: Sequence[Any] = ()) -> list[StreamRow]:
    """Run `plans` (compile order); see the module docstring. Returns `rows`. `companions`
    run beside the stream service's regions (the Kafka sources' live archive)."""
    # docs/semantics.md, "Table ownership": refuse the run before any table is touched
    ownership.check_plans(ctx.spark, plans, action="drop" if full_refresh else "write")
    if full_refresh:
        for plan in plans:
            if dispatch.is_stream(plan):
                on_event(Refreshed(plan.model, tuple(refresh_plan(ctx.spark, ctx.project_dir, plan))))

    def batch(plan: Plan) -> None:
        assert not isinstance(plan, StreamPlan)  # called for the plans that are not is_stream
        for r in dispatch.run_batch(ctx, plan):
            on_event(r)
            rows.append(StreamRow(r.model, "batch", 0, r.sink.rows,
                                  sum(q.rows for q in r.quarantined), r.seconds, 0))

    def add(model: str, reports: Sequence[Any], seconds: float) -> None:
        rows.append(StreamRow(model, "stream", sum(b.kind == "batch" for b in reports),
                              sum(b.rows_out for b in reports), sum(b.quarantined for b in reports),
                              seconds, len({p for b in reports for p, _ in getattr(b, "dirty", ())})))

    if trigger == AVAILABLE_NOW:
        for plan in plans:
            if dispatch.is_stream(plan):
                res = dispatch.run_stream(ctx, plan, trigger=AVAILABLE_NOW, on_batch=on_event)
                add(plan.model, res.batches, res.seconds)
            else:
                batch(plan)
        return rows
    streams: list[Any] = [p for p in plans if dispatch.is_stream(p)]
    for plan in plans:
        if not dispatch.is_stream(plan):
            batch(plan)
    for bounded in streams:
        if (trigger or bounded.trigger) == AVAILABLE_NOW:  # configured bounded: runs, flushes, ends
            res = dispatch.run_stream(ctx, bounded, trigger=AVAILABLE_NOW, on_batch=on_event)
            add(bounded.model, res.batches, res.seconds)
    service = Service(ctx, [p for p in streams if (trigger or p.trigger) != AVAILABLE_NOW],
                      trigger=trigger, on_event=on_event, stop_timeout_s=stop_timeout_s,
                      metrics=metrics, stop=stop, companions=companions)
    if service.regions:
        try:
            service.run()
        finally:
            rows.extend(service.rows())
    return rows
