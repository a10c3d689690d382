"""Outer joins of two streams in the `incremental` strategy: when a preserved row is padded.

The delta rule (`sqlflow.planning.delta.rule`) emits the matched rows of an outer join; this module
decides which unmatched rows of a preserved side P are emitted padded, and when. A row of P
with event time t can only match rows of the other side O with event time up to
`t + upper` (the join's bound, `PruneRange.upper_us` of O against P). A later row of O is
quarantined as late (docs/design.md §2.1) when its event time is before `its ingest time -
allowed_lateness(O)`; with O's ingest frontier F (max ingest time of O's clean rows so far)
and rows arriving in ingest order, the row of P is CLOSED once

    t + upper < F - allowed_lateness(O)      i.e.   t < cutoff = F - allowed_lateness(O) - upper

(µs, strict: a row at exactly `F - allowed_lateness(O)` is not late and may still match).
A closed row that matches nothing in O's rows so far is emitted padded, exactly once.

Steps. Every micro-batch is a step (`batch` = its id, `seq` 0); so are the two steps the
run loop takes between micro-batches (`seq` 1, 2, ... after batch `batch`):
- `flush`: the end of a bounded run closes every row of every batch so far;
- `idle`: O received no rows for the model's `idle_timeout`: P's cutoff moves to what P's
  own ingest frontier would give (the busy side stands in for the idle one).
Each step records, per input, the frontier and cutoff it reached in the model's progress
table (`<sink schema>.__sqlflow_state__<model>__progress`, owned by the model, role `state`). The rows of P closed at a step are
those of arrival batch `a` and time `t` with

    closed(step) = (a <= batch AND t < cutoff) OR a <= flushed

minus those already closed at the previous step: all three numbers only grow, so each row
closes at exactly one step, and a replay of a step (same records before it) pads the same rows.

Crash safety: a micro-batch writes its padded rows with its own sink write (one Delta commit,
idempotent per batch id) and records its step after the sink and state writes; a replay of
the batch reads only the records of earlier steps. A flush or idle step records first and
then writes (exactly once as app `<app>__close`, batch id `batch * 1e6 + seq`:
`sqlflow.runtime.delta.once`); the run redoes the last recorded one when it starts unless a `done`
row says its write committed (the redo writes nothing if the commit is there after all).

Divergence (docs/design.md §2.7): a new row of O that matches a row of P closed at an earlier step,
which had no match among O's older rows, shows that P's row was emitted padded although a
match arrived: the padded row's output partition is reported dirty (for `sqlflow repair`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, LongType, StringType, StructField, StructType, TimestampType

from sqlflow.identifiers import quote as quote_ident
from sqlflow.planning.plan import SourceBinding, StreamPlan
from sqlflow.runtime import literal_rows, ownership
from sqlflow.runtime.delta import interrupted_create, once, retried_create
from sqlflow.runtime.incremental import state, views

CLOSE_STEP = once.CLOSE_STEP  # write batch id of a flush/idle step: batch * CLOSE_STEP + seq

PROGRESS_SCHEMA = StructType([
    StructField("batch", LongType(), False),
    StructField("seq", LongType(), False),
    StructField("kind", StringType(), False),  # batch | idle | flush
    StructField("relation", StringType(), False),
    StructField("frontier_us", LongType(), True),
    StructField("cutoff_us", LongType(), True),
    StructField("flushed", LongType(), True),
    StructField("written_at", TimestampType(), False),
    StructField("done", BooleanType(), True),  # a flush/idle step's write is committed
])


def progress_table(sink_table: str, model: str) -> str:
    return state.state_table(sink_table, model, "progress")


@dataclass(frozen=True)
class Side:
    """A preserved input P of the outer join and what closes its rows."""

    binding: SourceBinding  # P
    other: SourceBinding  # O
    padding_sql: str
    upper_us: int  # O's rows that match a row of P at t have event time <= t + upper_us
    lower_us: int  # ... and >= t + lower_us


def sides(plan: StreamPlan) -> list[Side]:
    """The preserved sides of `plan`'s outer join of two streams (none for other plans)."""
    preserved = sorted(b.relation for b in plan.sources if b.pending_view)
    by_rel = {b.relation: b for b in plan.sources}
    out = []
    for rel, sql in zip(preserved, plan.padding_sql, strict=False):
        p = by_rel[rel]
        others = [b for b in plan.sources if b.read == "stream" and b.relation != rel and b.old_view]
        # a self join (two aliases of one input): O is P's own input, and its prune ranges
        # against itself are both directions of the bound; their hull is safe for either
        # preserved alias (rows close no earlier than the bound allows)
        o = others[0] if others else p
        ranges = [r for r in o.prune if r.other == rel]
        if not ranges:
            raise ValueError(f"no time range between `{o.relation}` and `{rel}` in the plan")
        out.append(Side(p, o, sql, max(r.upper_us for r in ranges), min(r.lower_us for r in ranges)))
    return out


@dataclass(frozen=True)
class Progress:
    """Where the steps before one step left off: the last batch, the flushed batch, and per
    input the ingest frontier and the cutoff (µs; None: not known yet)."""

    batch: int = -1
    seq: int = 0
    flushed: int = -1
    frontier: tuple[tuple[str, int | None], ...] = ()
    cutoff: tuple[tuple[str, int | None], ...] = ()

    def frontier_of(self, relation: str) -> int | None:
        return dict(self.frontier).get(relation)

    def cutoff_of(self, relation: str) -> int | None:
        return dict(self.cutoff).get(relation)

    def closed_for(self, relation: str, batch: Column, t_us: Column) -> Column:
        """Rows of `relation` (arrival batch, event time µs) closed at this step."""
        return _closed(batch, t_us, self.batch, self.flushed, self.cutoff_of(relation))


def _closed(batch: Column, t_us: Column, last: int, flushed: int, cutoff: int | None) -> Column:
    by_time = F.lit(False) if cutoff is None else (batch <= F.lit(last)) & (t_us < F.lit(cutoff))
    return by_time | (batch <= F.lit(flushed))


def read_progress(spark: SparkSession, table: str, *, before: tuple[int, int] | None = None) -> Progress:
    """The progress of every step recorded before `(batch, seq)` (None: all of them)."""
    if not spark.catalog.tableExists(table):
        return Progress()
    rows = spark.table(table).where(F.col("done").isNull() | ~F.col("done"))
    if before is not None:
        b, s = before
        rows = rows.where((F.col("batch") < b) | ((F.col("batch") == b) & (F.col("seq") < s)))
    got = rows.groupBy("relation").agg(
        F.max("frontier_us").alias("f"), F.max("cutoff_us").alias("c"),
        F.max("batch").alias("b"), F.max("flushed").alias("fl"),
        F.max(F.struct("batch", "seq")).alias("last")).collect()
    if not got:
        return Progress()
    last = max((r["last"]["batch"], r["last"]["seq"]) for r in got)
    flushed = max((r["fl"] for r in got if r["fl"] is not None), default=-1)
    return Progress(last[0], last[1], flushed, tuple((r["relation"], r["f"]) for r in got),
                    tuple((r["relation"], r["c"]) for r in got))


def unfinished_step(spark: SparkSession, table: str) -> tuple[int, int, str] | None:
    """The latest recorded step, (batch, seq, kind), when it is a flush or idle step whose
    write may not be committed (no `done` row)."""
    if not spark.catalog.tableExists(table):
        return None
    r = (spark.table(table).groupBy("batch", "seq")
         .agg(F.first("kind").alias("kind"), F.max(F.coalesce("done", F.lit(False))).alias("done"))
         .orderBy(F.desc("batch"), F.desc("seq")).limit(1).collect())
    if not r or r[0]["kind"] == "batch" or r[0]["done"]:
        return None
    return r[0]["batch"], r[0]["seq"], r[0]["kind"]


def mark_done(spark: SparkSession, table: str, batch: int, seq: int, kind: str, owner: str) -> None:
    """Note that the write of flush/idle step (batch, seq) is committed."""
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    _append(spark, table, [(batch, seq, kind, "", None, None, None, now, True)], owner)


def record(spark: SparkSession, table: str, batch: int, seq: int, kind: str,
           progress: Progress, owner: str, exists: bool = False) -> None:
    """Record one step's progress. A replayed step records the same values again: readers
    take maxima per input, so a duplicate changes nothing (and costs no lookup first).
    `exists`: the caller knows the table exists (no catalog look-up)."""
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    cut = dict(progress.cutoff)
    rows = [(batch, seq, kind, rel, f, cut.get(rel), progress.flushed if kind == "flush" else None,
             now, None) for rel, f in progress.frontier]
    _append(spark, table, rows, owner, exists)


def _append(spark: SparkSession, table: str, rows: list[tuple], owner: str, exists: bool = False) -> None:
    """Append `rows` (tuples of PROGRESS_SCHEMA) to the progress table; a new one records its
    owner model, role `state` (docs/semantics.md, "Table ownership"), like the model's other
    state tables, and takes its columns from PROGRESS_SCHEMA (nullability included).

    An append builds its rows from literals in the JVM (`literal_rows`): `createDataFrame`
    ships them through a Python worker task, about 0.2 s more per micro-batch."""
    if exists or spark.catalog.tableExists(table):
        literal_rows.frame(spark, rows, PROGRESS_SCHEMA).writeTo(table).append()
        return
    writer = (spark.createDataFrame([literal_rows.utc_row(r, PROGRESS_SCHEMA) for r in rows], PROGRESS_SCHEMA)
              .writeTo(table).using("delta"))  # (naive times as UTC, as the appends write them)
    for key, value in ownership.properties(owner, "state").items():
        writer = writer.tableProperty(key, value)
    interrupted_create.clear(spark, table, owner, "state")  # a create a kill cut short
    if not retried_create.create(spark, writer, table, owner, "state"):
        # this create ran twice (a Connect retry): append; a step recorded twice changes nothing
        literal_rows.frame(spark, rows, PROGRESS_SCHEMA).writeTo(table).append()


def advance(prev: Progress, plan_sides: list[Side], streams: Iterable[SourceBinding],
            batch: int, seen: dict[str, int | None]) -> Progress:
    """The progress after micro-batch `batch`, whose clean rows have max ingest `seen`."""
    frontier = {}
    for b in streams:
        old, new = prev.frontier_of(b.relation), seen.get(b.relation)
        frontier[b.relation] = max((v for v in (old, new) if v is not None), default=None)
    cutoff = {r: c for r, c in prev.cutoff}
    for s in plan_sides:
        f = frontier.get(s.other.relation)
        if f is not None:
            cutoff[s.binding.relation] = _max(cutoff.get(s.binding.relation),
                                              f - s.other.allowed_lateness_us - s.upper_us)
    return Progress(batch, 0, prev.flushed, tuple(frontier.items()),
                    tuple((r, cutoff.get(r)) for r in frontier))


def idle(prev: Progress, plan_sides: list[Side], idle_sides: set[str]) -> Progress | None:
    """The progress after an idle step: for each preserved side whose other side is in
    `idle_sides`, the cutoff P's own frontier gives; None when no cutoff moves."""
    cutoff = dict(prev.cutoff)
    moved = False
    for s in plan_sides:
        f = prev.frontier_of(s.binding.relation)
        if s.other.relation not in idle_sides or f is None:
            continue
        new = f - s.other.allowed_lateness_us - s.upper_us
        old = cutoff.get(s.binding.relation)
        if old is None or new > old:
            cutoff[s.binding.relation], moved = new, True
    if not moved:
        return None
    return Progress(prev.batch, prev.seq + 1, prev.flushed, prev.frontier,
                    tuple((r, cutoff.get(r)) for r, _ in prev.frontier))


def flush(prev: Progress) -> Progress | None:
    """The progress after the end of a bounded run: every row of batches so far closed."""
    if prev.batch < 0 or prev.flushed >= prev.batch:
        return None
    return Progress(prev.batch, prev.seq + 1, prev.batch, prev.frontier, prev.cutoff)


def _max(a: int | None, b: int) -> int:
    return b if a is None else max(a, b)


# --- the rows of one step -------------------------------------------------------------------------

def micros_of(schema: StructType, column: str) -> Column:
    field = next(f for f in schema.fields if f.name.lower() == column.lower())
    c = F.col(quote_ident(field.name))
    return F.unix_micros(c if isinstance(field.dataType, TimestampType) else c.cast("timestamp"))


def tagged(rows: DataFrame, batch: int) -> DataFrame:
    return rows.withColumn(state.BATCH_COLUMN, F.lit(batch).cast("bigint"))


def newly_closed(rows: DataFrame, side: Side, schema: StructType, prev: Progress,
                 now: Progress) -> DataFrame:
    """`rows` (with the batch column) closed at the step `now` and not before it."""
    assert side.binding.event_time is not None  # an interval join's side has an event time
    a, t = F.col(state.BATCH_COLUMN), micros_of(schema, side.binding.event_time)
    rel = side.binding.relation
    return rows.where(now.closed_for(rel, a, t) & ~prev.closed_for(rel, a, t))


def time_range(rows: DataFrame, schema: StructType, column: str) -> tuple[int | None, int | None]:
    t = micros_of(schema, column)
    low, high = rows.agg(F.min(t), F.max(t)).collect()[0]
    return low, high


def between(schema: StructType, column: str, low: int | None, high: int | None) -> Column:
    """Rows whose `column` lies in [low, high] µs (FALSE when the range is empty)."""
    if low is None or high is None:
        return F.lit(False)
    t = micros_of(schema, column)
    return (t >= F.lit(low)) & (t <= F.lit(high))


def padded(spark: SparkSession, side: Side, pending: DataFrame, other_old: DataFrame,
           other_delta: DataFrame) -> DataFrame:
    """The padded output rows of `pending` (P's rows, input columns) against O's rows
    `other_old` UNION ALL `other_delta`: the plan's padding SQL over those views. The frame is
    analysed at once, so the views can be bound to other rows afterwards."""
    assert side.binding.pending_view is not None and side.other.old_view is not None  # set by the planner
    assert side.other.view is not None
    views.bind(pending, side.binding.pending_view)
    views.bind(other_old, side.other.old_view)
    views.bind(other_delta, side.other.view)
    return spark.sql(side.padding_sql)


def pending_of(spark: SparkSession, side: Side, tables: dict[str, str],
               schemas: dict[str, StructType], through: int, delta: DataFrame | None,
               prev: Progress, now: Progress, exists: bool | None = None) -> DataFrame:
    """P's rows (input columns and batch column) of batches `<= through` closed at step
    `now` and not before; `delta`: P's new rows of micro-batch `through` (its state rows, if
    a crash left any, are not read: the replay reads the delta instead). `exists`: whether
    P's state table exists, when the caller knows (None: ask the catalog)."""
    p = side.binding
    schema = schemas[p.relation]
    columns = [F.col(quote_ident(f.name)) for f in schema.fields] + [F.col(state.BATCH_COLUMN)]
    if spark.catalog.tableExists(tables[p.relation]) if exists is None else exists:
        limit = F.col(state.BATCH_COLUMN) < through if delta is not None \
            else F.col(state.BATCH_COLUMN) <= through
        rows = spark.table(tables[p.relation]).where(limit).select(*columns)
    else:
        rows = tagged(state.empty(spark, schema), through)
    if delta is not None:
        rows = rows.unionByName(tagged(delta, through))
    return newly_closed(rows, side, schema, prev, now)


def other_rows(spark: SparkSession, side: Side, tables: dict[str, str],
               schemas: dict[str, StructType], before: int, pending: DataFrame,
               exists: bool | None = None,
               span: tuple[int | None, int | None] | None = None) -> DataFrame:
    """O's rows of batches `< before` that P's `pending` rows can match (pruned by time);
    `exists`: whether O's state table exists, when the caller knows (None: ask the catalog);
    `span`: `pending`'s event-time range, when the caller has it (None: a job computes it)."""
    p, o = side.binding, side.other
    assert p.event_time is not None and o.event_time is not None  # an interval join's sides
    low, high = span if span is not None else time_range(pending, schemas[p.relation], p.event_time)
    keep = between(schemas[o.relation], o.event_time,
                   None if low is None else low + side.lower_us,
                   None if high is None else high + side.upper_us)
    return state.older(spark, tables[o.relation], schemas[o.relation], before, keep, exists=exists)

