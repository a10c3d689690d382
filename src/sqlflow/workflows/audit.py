"""`sqlflow audit`: a live stream's tables against the batch plan over exactly the input the
stream has processed (docs/semantics.md, "Auditing a live stream: `sqlflow audit`").

For each selected streaming model and routed group (docs/design.md §2.4: every target and the
group quarantine, whichever member was selected), the input the stream processed is read from
its checkpoint:
the last committed micro-batch's end offset of each stream input is a Delta version
(`sqlflow.runtime.offsets.delivered`; a Kafka source is its archive, so these are the Kafka
offsets the stream had archived and processed). The batch plan runs over the inputs pinned at
those versions into a scratch schema, and each output (the sink, the quarantine) is compared
with the live table per partition, both ways (`sqlflow.workflows.verify.compare`). A
quarantine row's `origin` is compared where it is a Kafka record's `topic/partition/offset`
(the same in both modes); elsewhere it names the run that read the row (`batch 17`,
`ods.t@v3`) and is left out, as `verify` leaves it out.

Only partitions the stream has CLOSED are compared: a date partition `D` is closed when the
slowest stream input's newest ingest time is past the end of `D` plus the inputs' largest
allowed lateness and the plan's event-time margin (an interval join's bound): no row the stream
could still be owed falls in it. A sink without a date partition is compared whole. `--repair`
rewrites exactly the differing closed partitions of the live tables from the batch plan's
(refused while a stream run of the model holds its run lock).
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from sqlglot import exp

from sqlflow.engine.context import Context
from sqlflow.errors import SqlflowError
from sqlflow.identifiers import quote as quote_ident
from sqlflow.planning.plan import COMMIT_LOG, BatchPlan, RoutedPlan, StreamPlan
from sqlflow.runtime import batch, offsets, run_lock
from sqlflow.runtime.delta import partition_path
from sqlflow.runtime.delta.sinks import quote
from sqlflow.runtime.dispatch import is_stream
from sqlflow.runtime.quarantine import KAFKA_VALUE
from sqlflow.runtime.query import checkpoint_dir
from sqlflow.runtime.routed.routing import run_routed_batch
from sqlflow.workflows.verify.compare import WHOLE_TABLE, PartitionDiff, compare
from sqlflow.workflows.verify.outputs import Output, outputs, routed_selection, scratch_batch

_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


@dataclass(frozen=True)
class AuditReport:
    """One model's (or routed group's) audit: the input versions the batch plan read (what
    the stream had processed), the compared closed partitions, those left open, and what was
    repaired."""

    model: str
    path: str
    pinned: dict[str, int]
    closed_before: date | None  # None: every partition compared
    partitions: tuple[PartitionDiff, ...]
    open_partitions: tuple[str, ...]
    problems: tuple[str, ...] = ()
    skipped: str | None = None  # why the model was not audited
    repaired: tuple[str, ...] = ()  # "table: partition" rewritten by --repair

    @property
    def ok(self) -> bool:
        return self.skipped is None and not self.problems and all(p.ok for p in self.partitions)


Progress = Callable[[str], None]
Live = StreamPlan | RoutedPlan
Backfill = BatchPlan | RoutedPlan


def audit_project(ctx: Context, *, select: Sequence[str] | None = None,
                  exclude: Sequence[str] | None = None, start: date | None = None,
                  end: date | None = None, repair: bool = False,
                  vars: dict[str, Any] | None = None, every_partition: bool = False,
                  progress: Progress | None = None) -> list[AuditReport]:
    """Audit every selected streaming model and routed group (a group selected by its name or
    any member, as `verify` selects it); see the module docstring. `every_partition`: compare
    the open partitions too, for streams that ended at the end of their input (an
    `available-now` run flushes what it holds, so nothing more is owed: `sqlflow demo`)."""
    from sqlflow.compiler import compile_project

    if start is not None and end is not None and start > end:
        raise SqlflowError(f"--start {start} is after --end {end}: no partition is in that range",
                           hint="swap them; both dates are included")
    chosen = routed_selection(ctx, select, vars, exclude)
    streams = compile_project(ctx.project_dir, mode="stream", select=chosen, target=ctx.target,
                              vars=vars)
    streams.raise_if_errors()
    candidates = [p for p in streams.plans.values() if is_stream(p)]
    if not candidates:
        raise SqlflowError("nothing to audit: the selection holds no `streaming_table` model",
                           hint="select a streaming model, e.g. --select stg_ad_clicks")
    members = [m for p in candidates for m in p.members]
    batches = compile_project(ctx.project_dir, mode="batch", select=members, target=ctx.target,
                              vars=vars)
    batches.raise_if_errors()
    reports = []
    for plan in candidates:
        want = batches.plans.get(plan.model)
        # batch mode plans a model's BatchPlan, a routed group's RoutedPlan
        if isinstance(plan, StreamPlan) != isinstance(want, BatchPlan) or want is None:
            reports.append(AuditReport(plan.model, plan.path, {}, None, (), (),
                                       skipped="its batch plan is not of its stream plan's kind"))
            continue
        assert isinstance(plan, StreamPlan | RoutedPlan) and isinstance(want, BatchPlan | RoutedPlan)
        reports.append(audit_model(ctx, want, plan, start=start, end=end, repair=repair,
                                   every_partition=every_partition, progress=progress))
    return reports


def processed_versions(checkpoint: Path, plan: Live) -> dict[str, int] | str:
    """The Delta version of each stream input the stream's last committed micro-batch had
    processed, or why they cannot be told."""
    commits = checkpoint / "commits"
    ids = [int(n) for n in os.listdir(commits) if n.isdigit()] if commits.is_dir() else []
    if not ids:
        return "it has not committed a micro-batch yet (run it: `sqlflow run --mode stream`)"
    last = max(ids)
    sides = [b for b in plan.sources if b.read == "stream"]
    ends = offsets.read(checkpoint, last)
    if len(ends) != len(sides):
        return f"its checkpoint's offsets of micro-batch {last} do not name its {len(sides)} input(s)"
    pinned = {}
    for b, end in zip(sides, ends, strict=True):
        delivered = offsets.delivered(end)
        if delivered is None:
            return (f"its micro-batch {last} ended inside a version of `{b.relation}`: run the "
                    "stream again and audit once it has processed that version whole")
        if delivered.version is None:
            return f"it has processed nothing of `{b.relation}` yet"
        pinned[b.relation] = delivered.version
    return pinned


def closed_before(spark: SparkSession, plan: Live, batch_plan: Backfill,
                  pinned: dict[str, int]) -> date | None:
    """The first date partition the stream may not have closed: the day of the slowest stream
    input's newest ingest time (event time when it has none), less the largest allowed lateness
    and the plan's event-time margin (none for a routed group: its targets filter rows)."""
    margin = getattr(batch_plan, "backfill_margin_us", None) or 0
    frontiers, wait_us = [], margin
    for b in plan.sources:
        if b.read != "stream" or b.relation not in pinned:
            continue
        column = b.time.ingest_time or b.time.event_time
        if column is None:
            return None
        wait_us = max(wait_us, margin + b.time.allowed_lateness_us)
        row = spark.sql(f"SELECT max({quote_ident(column)}) FROM {quote(b.relation)} "
                        f"VERSION AS OF {pinned[b.relation]}").first()
        newest = row[0] if row is not None else None
        if newest is None:
            return date.min
        frontiers.append(newest if newest.tzinfo else newest.replace(tzinfo=timezone.utc))
    if not frontiers:
        return None
    edge = min(frontiers) - timedelta(microseconds=wait_us)
    return edge.date() if isinstance(edge, datetime) else None


def _day(partition: str) -> date | None:
    """The date of a partition whose first level is a date (`dt=2026-11-01/...`), else None."""
    if partition == WHOLE_TABLE:
        return None
    try:
        first = next(iter(partition_path.parse(partition).values()), None)
    except ValueError:
        return None
    try:
        return date.fromisoformat(first) if first and _DAY.fullmatch(first) else None
    except ValueError:
        return None


def audit_model(ctx: Context, batch_plan: Backfill, plan: Live, *, start: date | None = None,
                end: date | None = None, repair: bool = False, keep: bool = False,
                every_partition: bool = False, progress: Progress | None = None) -> AuditReport:
    """Audit one streaming model or routed group (see the module docstring)."""
    say = progress or (lambda line: None)
    spark = ctx.spark
    checkpoint = checkpoint_dir(ctx.project_dir, plan)
    pinned = processed_versions(checkpoint, plan)
    if isinstance(pinned, str):
        return AuditReport(plan.model, plan.path, {}, None, (), (), skipped=f"the stream {pinned}")
    edge = None if every_partition else closed_before(spark, plan, batch_plan, pinned)
    scratch = f"sqlflow_audit_{uuid.uuid4().hex[:8]}"
    try:
        spark.sql(f"CREATE DATABASE {quote(scratch)}")
        scratch_plan = scratch_batch(batch_plan, scratch)
        say(f"{plan.model}: batch plan over " + ", ".join(f"{r}@v{v}" for r, v in pinned.items()))
        if isinstance(scratch_plan, RoutedPlan):
            list(run_routed_batch(ctx, scratch_plan, versions=pinned))
        else:
            batch.run_batch(ctx, scratch_plan, versions=pinned)
        pairs = list(zip(outputs(scratch_plan), outputs(plan), strict=True))
        kafka = kafka_inputs(spark, plan)
        compared, still_open, problems = _compare(spark, pairs, edge, start, end, kafka)
        repaired: list[str] = []
        if repair and any(not d.ok for d in compared):
            repaired = _repair(ctx, plan, pairs, [d for d in compared if not d.ok])
            compared, still_open, problems = _compare(spark, pairs, edge, start, end, kafka)
        return AuditReport(plan.model, plan.path, pinned, edge, tuple(compared),
                           tuple(sorted(set(still_open))), tuple(problems), None, tuple(repaired))
    finally:
        if not keep:
            if spark.catalog.tableExists(COMMIT_LOG):
                spark.sql(f"DELETE FROM {COMMIT_LOG} WHERE startswith(`table`, '{scratch}.')")
            spark.sql(f"DROP DATABASE IF EXISTS {quote(scratch)} CASCADE")


def kafka_inputs(spark: SparkSession, plan: Live) -> frozenset[str]:
    """The stream inputs of `plan` that are Kafka archives (they hold each record's bytes,
    `_kafka_value`): their quarantine rows' `origin` is the record's topic/partition/offset."""
    out = set()
    for b in plan.sources:
        if b.read == "stream" and spark.catalog.tableExists(b.relation) and \
                KAFKA_VALUE in spark.table(b.relation).columns:
            out.add(b.relation)
    return frozenset(out)


def _compare(spark: SparkSession, pairs: list[tuple[Output, Output]], edge: date | None,
             start: date | None, end: date | None, kafka: frozenset[str] = frozenset()
             ) -> tuple[list[PartitionDiff], list[str], list[str]]:
    """Each output's partitions in [start, end]: the closed ones compared, the open ones named.
    A quarantine's `origin` counts only for the rows of Kafka inputs (see the module docstring)."""
    compared: list[PartitionDiff] = []
    still_open: list[str] = []
    problems: list[str] = []
    for want, got in pairs:
        diffs, schema = compare(spark, want.table, got.table, got.partition_by, table=got.name,
                                origin_of=kafka if got.quarantine else None)
        problems.extend(schema)
        for d in diffs:
            day = _day(d.partition)
            if (start and day and day < start) or (end and day and day > end):
                continue
            if edge is not None and got.partition_by and (day is None or day >= edge):
                still_open.append(f"{d.table}: {d.partition}")
            else:
                compared.append(d)
    return compared, still_open, problems


def partition_predicate(partition: str, columns: Sequence[str]) -> str:
    """The SQL predicate of one compared partition (its escaped spec `col=value/...`, read with
    `partition_path.parse`, or `(whole table)`) over `columns`, the table's partition columns
    in order, built as a sqlglot tree so a value holding a quote or a backslash stays a literal
    (Spark reads `'a''b'` as two literals concatenated, `ab`, never as `a'b`). The default
    partition holds NULL and the empty string, as Spark's directories do."""
    if partition == WHOLE_TABLE:
        return "true"
    values = list(partition_path.parse(partition).values())
    if len(values) != len(columns):
        raise ValueError(f"`{partition}` does not name the {len(columns)} partition column(s) "
                         f"{', '.join(columns)}")
    terms: list[exp.Expression] = []
    for value, column in zip(values, columns, strict=True):
        col = exp.Cast(this=exp.column(column, quoted=True), to=exp.DataType.build("string"))
        if value is None:
            terms.append(exp.paren(exp.or_(exp.Is(this=col, expression=exp.Null()),
                                           exp.EQ(this=col.copy(), expression=exp.Literal.string("")))))
        else:
            terms.append(exp.EQ(this=col, expression=exp.Literal.string(value)))
    return exp.and_(*terms).sql(dialect="spark")


def _repair(ctx: Context, plan: Live, pairs: list[tuple[Output, Output]],
            bad: list[PartitionDiff]) -> list[str]:
    """Rewrite the differing partitions of the live tables from the batch plan's, under the
    model's run lock (refused while its stream runs)."""
    checkpoint = checkpoint_dir(ctx.project_dir, plan)
    run_lock.take(checkpoint, what=f"model `{plan.model}`", path=plan.path, action="audit --repair")
    done = []
    try:
        for want, got in pairs:
            columns = list(got.partition_by)
            for d in (d for d in bad if d.table == got.name):
                where = partition_predicate(d.partition, columns)
                rows = ctx.spark.table(want.table).where(F.expr(where))
                (rows.write.format("delta").mode("overwrite").option("replaceWhere", where)
                 .saveAsTable(got.table))
                done.append(f"{d.table}: {d.partition}")
    finally:
        run_lock.release(checkpoint)
    return done
