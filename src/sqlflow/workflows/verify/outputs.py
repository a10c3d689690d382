"""What `sqlflow verify` runs and compares for each kind of plan (`sqlflow.workflows.verify.run`).

A streaming model's `StreamPlan` writes one sink and one quarantine table; a routed group's
`RoutedPlan` (docs/design.md §2.4) writes one table per target and one group quarantine, from one read.
Verify treats both as a tuple of `Output`s, the tables it compares row for row, and only this
module knows how to point a plan of either kind at scratch tables and run it once.

A routed plan run by verify is QUIET: its notification (`notify_url`, `notify_command`) is
cleared, so only the real group's commits reach downstream schedulers; its commit-log rows,
`_SUCCESS` markers and progress table all belong to scratch tables (`drop_scratch` removes
them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from sqlflow.engine.context import Context
from sqlflow.planning.plan import BatchPlan, Plan, RoutedPlan, SourceBinding, StreamPlan
from sqlflow.runtime import dispatch
from sqlflow.runtime.delta import commitlog


@dataclass(frozen=True)
class Output:
    """One table verify compares: its name in the report (`sink`, a routed target's model,
    `quarantine`), the table, and the columns its differences are counted by."""

    name: str
    table: str
    partition_by: tuple[str, ...]
    quarantine: bool = False


def outputs(plan: Plan) -> tuple[Output, ...]:
    """The tables `plan` (batch or stream, either kind) writes, in report order, quarantine
    last. A batch plan and its stream plan list the same names in the same order."""
    quarantine = Output("quarantine", plan.quarantine, ("dt",), quarantine=True)
    if isinstance(plan, RoutedPlan):
        return (*(Output(t.model, t.sink.table, t.sink.partition_by) for t in plan.targets), quarantine)
    return Output("sink", plan.sink.table, plan.sink.partition_by), quarantine


def bind_copy(b: SourceBinding, copies: dict[str, str]) -> SourceBinding:
    """`b` reading its copy table one commit per micro-batch (static inputs: unchanged)."""
    if b.relation not in copies:
        return b
    prune = tuple(dataclasses.replace(p, other=copies.get(p.other, p.other)) for p in b.prune)
    return dataclasses.replace(b, relation=copies[b.relation], prune=prune, max_files_per_trigger=1)


def into_scratch(plan: RoutedPlan, scratch: str, suffix: str, *, copies: dict[str, str] | None = None,
                 checkpoint: str | None = None) -> RoutedPlan:
    """The routed plan writing `<scratch>.<target>__<suffix>` and `<scratch>.<group>__<suffix>
    __quarantine`, reading `copies`, quiet (no notification), with its own checkpoint."""
    targets = tuple(dataclasses.replace(
        t, sink=dataclasses.replace(t.sink, table=f"{scratch}.{t.model}__{suffix}", checkpoint=None))
        for t in plan.targets)
    return dataclasses.replace(
        plan, targets=targets, quarantine=f"{scratch}.{plan.model}__{suffix}__quarantine",
        sources=tuple(bind_copy(b, copies or {}) for b in plan.sources),
        commit=dataclasses.replace(plan.commit, notify_url=None, notify_command=None),
        checkpoint=checkpoint)


def scratch_batch(plan: BatchPlan | RoutedPlan, scratch: str) -> BatchPlan | RoutedPlan:
    """The batch plan writing scratch tables (`__batch`) instead of the model's own."""
    if isinstance(plan, RoutedPlan):
        return into_scratch(plan, scratch, "batch")
    return dataclasses.replace(
        plan, sink=dataclasses.replace(plan.sink, table=f"{scratch}.{plan.model}__batch"),
        quarantine=f"{scratch}.{plan.model}__batch__quarantine")


def check_stream(spark: SparkSession, plan: StreamPlan | RoutedPlan) -> None:
    """What the stream runtime cannot run fails before the batch plan runs."""
    dispatch.check_stream(spark, plan)


def run_batch_plan(ctx: Context, plan: BatchPlan | RoutedPlan) -> tuple[dict[str, int | None], float]:
    """Run the (scratch) batch plan; the Delta version of each input it read, and seconds."""
    results = list(dispatch.run_batch(ctx, plan))
    return {r.relation: r.version for res in results for r in res.inputs}, results[-1].seconds


def run_stream_once(ctx: Context, plan: StreamPlan | RoutedPlan, *, end_of_input: bool) -> tuple[int, int]:
    """One available-now run of the (rebound) stream plan: micro-batches and rows written.
    `end_of_input`: no round follows, so a routed group commits its last open hours."""
    res = dispatch.run_stream(ctx, plan, end_of_input=end_of_input)
    if plan.kind == "routed":
        return sum(r.kind == "batch" for r in res.batches), res.rows_out
    return len(res.batches), res.rows_out


def commit_problems(spark: SparkSession, batch: BatchPlan | RoutedPlan, stream: Plan) -> tuple[str, ...]:
    """A routed group's stream, at the end of its input, commits exactly the hours its
    backfill committed, for every target (docs/design.md §2.5, §2.6); any other hour is a problem."""
    if not isinstance(stream, RoutedPlan):
        return ()
    assert isinstance(batch, RoutedPlan)  # a routed group's backfill is routed too
    pairs = [(t.model, b.sink.table.lower(), t.sink.table.lower())
             for b, t in zip(batch.targets, stream.targets, strict=False)]
    tables = [name for _, b, s in pairs for name in (b, s)]
    got: dict[str, set[str]] = {}
    for r in (commitlog.read(spark).where((F.col("kind") == "commit") & F.col("table").isin(tables))
              .select("table", "partition").distinct().collect()):
        got.setdefault(r["table"], set()).add(r["partition"])
    out = []
    for model, b, s in pairs:
        want, have = got.get(b, set()), got.get(s, set())
        if want - have:
            out.append(f"{model}: hours the backfill committed, the stream did not: "
                       f"{', '.join(sorted(want - have))}")
        if have - want:
            out.append(f"{model}: hours the stream committed, the backfill did not: "
                       f"{', '.join(sorted(have - want))}")
    return tuple(out)


def routed_selection(ctx: Context, select: Sequence[str] | None,
                     vars: dict[str, Any] | None = None,
                     exclude: Sequence[str] | None = None) -> list[str] | None:
    """`select` with every routed group it touches made whole: a group's name, or any one
    member, selects all members, so the compiler fuses them into the group's RoutedPlan (a
    lone member would keep its ordinary plan, which is not what the group runs)."""
    if not select and not exclude:
        return None
    from sqlflow.planning.fusion import route_groups
    from sqlflow.project.load import load_project
    from sqlflow.rendering.render import render_project

    everything = render_project(load_project(ctx.project_dir), ctx.target, "stream", None, vars)
    groups = route_groups(everything.models)
    terms = [m for s in select or () for part in s.split() for m in groups.get(part, [part])]
    chosen = set(everything.dag.select(terms, exclude))
    for members in groups.values():
        if chosen & set(members):
            chosen |= set(members)
    return [name for name in everything.order if name in chosen]
