"""`sqlflow repair` (docs/semantics.md, "Repair"): find and rewrite open partitions.
`sqlflow.runtime.dispatch.repair` picks `repair_model` or `repair_routed` for a plan.

A partition is open when the commit log says it is dirty (the stream runtime saw a row it
could not place exactly) or provisional (a dimension join fell back because a day was not
ready), and no batch write or repair has settled it since (`commitlog.open_partitions`).

Repair reruns the model's batch plan, partition-scoped: the open partitions' dates (the first
partition column) grouped into contiguous ranges, each a `replaceWhere` overwrite of exactly
that range (`runtime.batch.run_batch`), so other partitions are never touched and a rerun is
idempotent. Afterwards the partitions hold what a fresh backfill writes, row for row. A
partition whose dimension day is still not ready stays provisional (the batch write says so);
every other one gets a `repair` row in the commit log.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, timedelta

from sqlflow.engine.context import Context
from sqlflow.planning.plan import BatchPlan, RoutedPlan
from sqlflow.runtime.batch import run_batch
from sqlflow.runtime.delta import commitlog as C
from sqlflow.runtime.results import RunResult
from sqlflow.runtime.routed.routing import run_routed_batch


@dataclass(frozen=True)
class RepairResult:
    """One model's repair: the partitions found open, the runs made, what is still open."""

    model: str
    table: str
    found: tuple[C.PartitionState, ...]
    runs: tuple[RunResult, ...]
    repaired: tuple[str, ...]
    still_open: tuple[C.PartitionState, ...]


def date_ranges(days: Sequence[date]) -> list[tuple[date, date]]:
    """Contiguous inclusive ranges covering `days`.

        >>> date_ranges([date(2026, 11, 3), date(2026, 11, 1), date(2026, 11, 2), date(2026, 11, 5)])
        [(datetime.date(2026, 11, 1), datetime.date(2026, 11, 3)), (datetime.date(2026, 11, 5), datetime.date(2026, 11, 5))]
    """
    out: list[tuple[date, date]] = []
    for day in sorted(set(days)):
        if out and out[-1][1] + timedelta(days=1) == day:
            out[-1] = (out[-1][0], day)
        else:
            out.append((day, day))
    return out


def _day(spec: str) -> date | None:
    value = next(iter(C.parse_partition(spec).values()), None)
    try:
        return date.fromisoformat(str(value)[:10]) if value else None
    except ValueError:
        return None


def repair_model(ctx: Context, plan: BatchPlan, *,
                 on_run: Callable[[RunResult], None] | None = None) -> RepairResult:
    """Rewrite every open partition of `plan`'s table with its batch plan (see module doc)."""
    spark = ctx.spark
    found = tuple(C.open_partitions(spark, [plan.sink.table]))
    runs: list[RunResult] = []
    if found:
        days = [_day(s.partition) for s in found]
        partitioned = plan.sink.write == "overwrite_partitions" and plan.sink.partition_by
        if partitioned and all(d is not None for d in days):
            for start, end in date_ranges([d for d in days if d is not None]):
                runs.append(run_batch(ctx, plan, start=start, end=end))
                if on_run:
                    on_run(runs[-1])
        else:  # not partitioned by date: the table is rebuilt whole
            runs.append(run_batch(ctx, plan, full_refresh=True))
            if on_run:
                on_run(runs[-1])
    still = tuple(C.open_partitions(spark, [plan.sink.table]))
    left = {s.partition for s in still}
    repaired = tuple(s.partition for s in found if s.partition not in left)
    C.append(spark, [C.Entry(plan.sink.table, p, "repair", "batch", plan.model,
                             reason="rewritten by the batch plan") for p in repaired])
    return RepairResult(plan.model, plan.sink.table, found, tuple(runs), repaired, still)


def repair_routed(ctx: Context, plan: RoutedPlan, *,
                  on_run: Callable[[RunResult], None] | None = None) -> RepairResult:
    """Rewrite the open hours of a routed group's targets (dirty: a row reached an hour after
    its commit). One backfill of the GROUP per contiguous date range: one read, every target
    overwritten over the range, the hours committed (and notified) again. Its `write` rows name
    full partitions, not the hours the `dirty` rows name, so each repaired hour gets a `repair`
    row once the backfill succeeded."""

    spark = ctx.spark
    tables = [t.sink.table for t in plan.targets]
    found = tuple(C.open_partitions(spark, tables))
    runs: list[RunResult] = []
    if found:
        days = [_day(s.partition) for s in found]
        ranges: Sequence[tuple[date | None, date | None]] = ([(None, None)] if not all(days)
                                                              else date_ranges([d for d in days if d]))
        for start, end in ranges:
            for run in run_routed_batch(ctx, plan, start=start, end=end):
                runs.append(run)
                if on_run:
                    on_run(run)
        C.append(spark, [C.Entry(s.table, s.partition, "repair", "batch", plan.model,
                                 reason="rewritten by the batch plan") for s in found])
    still = tuple(C.open_partitions(spark, tables))
    left = {(s.table, s.partition) for s in still}
    repaired = tuple(s.partition for s in found if (s.table, s.partition) not in left)
    return RepairResult(plan.model, ", ".join(tables), found, tuple(runs), repaired, still)
