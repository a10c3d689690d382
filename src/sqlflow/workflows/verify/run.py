"""`sqlflow verify`: a model's stream plan, fed its input in random orders and splits, must end
with exactly its batch plan's output (docs/design.md §2). The test oracle, run by analysts before a merge.

For one streaming model, or one routed group (its `RoutedPlan`: every target and the group
quarantine, whichever member was selected):
1. run the batch plan into scratch tables (its inputs read as they are, at one Delta version);
2. for each of N runs, copy every STREAM input (that version) into a fresh Delta table of a
   scratch schema, in chunks of random sizes, one commit and one file per chunk, the inputs'
   commits interleaved at random; run the stream plan, rebound to the copies, scratch output
   tables and a fresh checkpoint, available-now after each of a few random rounds of commits
   (so a run also restarts its query from the checkpoint), with `maxFilesPerTrigger=1`: one
   commit, one micro-batch per input. Only the last round is the end of input (a routed group
   commits its last open hours there, docs/design.md §2.6);
3. compare every output table (`verify_outputs.outputs`: the sink, or each routed target, and
   the quarantine) with the batch run's, row for row: both directions of EXCEPT ALL over every
   column (quarantine: all but `origin`, which says where a row was read), counted per output
   partition. A routed group's stream must also have committed exactly the hours its backfill
   committed, for every target.

Static inputs (dimensions, and the commit log's READY set they are read with) are read where
they are, by both plans; nothing verify writes is a dimension, so they stay fixed during a
verify, and the stream pins them per micro-batch. A routed plan runs quiet: its notification
is cleared, so downstream schedulers never hear of scratch tables.

Verify leaves nothing behind: `drop_scratch` drops the scratch schema and the checkpoints, and
DELETEs the commit-log rows of the scratch schema's tables (the runtime's writers append
`write`/`commit`/provisional rows for every table they write, scratch ones included; keeping
them out would mean giving every writer another log table, while the dimension readiness it
reads must stay the real log's). `sqlflow status` never lists a finished verify. With `keep`
the schema and its commit-log rows stay until `drop_scratch` (the command prints how).

Arrival order (`order`): `shuffled` puts each input's rows in a random order before cutting
chunks, the strongest test, valid wherever the result cannot depend on arrival order (an
`incremental` plan without outer-join padding, a routed group). `ingest` keeps each input in
ingest-time order (random chunk sizes, inputs still interleaved at random): what a Kafka topic
delivers, and what outer-join padding and Spark's watermarks assume, since a row arriving long
after rows ingested later than it is a divergence to detect (docs/design.md §2.7), not a contract the
plan can keep. `auto` picks `shuffled` where valid, else `ingest`. For the same reason a run
of such a plan is one bounded stream run (its end is the end of input); other plans are cut
into up to `max_rounds` bounded runs, so their query also restarts from its checkpoint.
"""

from __future__ import annotations

import dataclasses
import random
import shutil
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from sqlflow.engine.context import Context
from sqlflow.errors import Location, SqlflowError
from sqlflow.identifiers import quote as quote_ident
from sqlflow.planning.plan import COMMIT_LOG, BatchPlan, RoutedPlan, SourceBinding, StreamPlan
from sqlflow.project.runmode import STATE_DIR
from sqlflow.runtime.delta.sinks import quote
from sqlflow.runtime.dispatch import is_stream
from sqlflow.workflows.verify.compare import PartitionDiff, compare
from sqlflow.workflows.verify.outputs import (
    bind_copy,
    check_stream,
    commit_problems,
    into_scratch,
    outputs,
    routed_selection,
    run_batch_plan,
    run_stream_once,
    scratch_batch,
)

Order = Literal["auto", "shuffled", "ingest"]
CHUNK = "__sqlflow_chunk"
VERIFY_DIR = f"{STATE_DIR}/verify"


@dataclass(frozen=True)
class RunReport:
    """One stream run: how its input arrived and how its output compares, per partition."""

    model: str
    run: int
    order: str
    commits: int
    rounds: int
    batches: int
    partitions: tuple[PartitionDiff, ...]
    problems: tuple[str, ...]  # differences that are not rows: a column missing on one side
    tables: tuple[str, ...]  # the stream's output tables (sink, or one per routed target)
    quarantine_table: str
    copies: tuple[tuple[str, str], ...]  # (copy table, the input relation it copies)
    seconds: float

    @property
    def ok(self) -> bool:
        return not self.problems and all(p.ok for p in self.partitions)

    @property
    def sink_table(self) -> str:
        return self.tables[0]


@dataclass(frozen=True)
class ModelReport:
    model: str  # the model, or the routed group
    path: str
    batch_rows: int
    batch_quarantined: int
    batch_tables: tuple[str, ...]
    batch_quarantine: str
    runs: tuple[RunReport, ...]
    scratch: str  # the scratch schema (dropped unless kept)

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.runs)

    @property
    def batch_table(self) -> str:
        return self.batch_tables[0]


Progress = Callable[[str], None]
Plan = StreamPlan | RoutedPlan


# --- a project: compile, select, verify each streaming model --------------------------------------

def verify_project(ctx: Context, *, select: Sequence[str] | None = None,
                   exclude: Sequence[str] | None = None, runs: int = 3, seed: int = 0,
                   order: Order = "auto", keep: bool = False, vars: dict[str, Any] | None = None,
                   progress: Progress | None = None,
                   on_model: Callable[[ModelReport], None] | None = None) -> list[ModelReport]:
    """Compile the selected models in both modes and verify every streaming one and every
    routed group (selected by its name or any member: `verify_outputs.routed_selection`).

    Raises SqlflowError when the selection holds no model with a stream plan (naming what it
    did select), or for compile errors and missing inputs, before any table is written.
    """
    from sqlflow.compiler import compile_project

    chosen_models = routed_selection(ctx, select, vars, exclude)
    streams = compile_project(ctx.project_dir, mode="stream", select=chosen_models,
                              target=ctx.target, vars=vars)
    streams.raise_if_errors()
    candidates = [p for p in streams.plans.values() if is_stream(p)]
    if not candidates:
        chosen = ", ".join(f"`{m}`" for m in streams.plans) or "no model"
        raise SqlflowError(
            f"nothing to verify: {'--select ' + ' '.join(select) if select else 'the project'} "
            f"selects {chosen}, and none is a `streaming_table` with a stream plan",
            hint="verify compares a streaming_table model's stream plan with its batch plan; "
                 "select one, e.g. --select dwd_ad_clicks_attributed")
    members = [m for p in candidates for m in p.members]
    batches = compile_project(ctx.project_dir, mode="batch", select=members, target=ctx.target, vars=vars)
    batches.raise_if_errors()
    # batch mode plans no StreamPlan: a model's is a BatchPlan, a group's a RoutedPlan
    pairs = [(cast("BatchPlan | RoutedPlan", batches.plans[p.model]), p) for p in candidates]
    for batch_plan, stream_plan in pairs:  # every model's inputs, before the first one runs
        check_inputs(ctx.spark, batch_plan, stream_plan)
    reports = []
    for batch_plan, stream_plan in pairs:
        report = verify_model(ctx, batch_plan, stream_plan, runs=runs, seed=seed, order=order,
                              keep=keep, progress=progress)
        reports.append(report)
        if on_model:
            on_model(report)
    return reports


def check_inputs(spark: SparkSession, batch_plan: BatchPlan | RoutedPlan, stream_plan: Plan) -> None:
    """Refuse a model that cannot be verified: no stream input, or an input table missing
    (saying what to run first)."""
    where = Location(stream_plan.path)
    if not any(b.read == "stream" for b in stream_plan.sources):
        raise SqlflowError(
            f"model `{stream_plan.model}` has no stream input: its stream and batch plans read the "
            "same static tables, there is no arrival order to verify", location=where,
            hint="verify models that read an event source or another streaming_table")
    for b in {b.relation: b for b in (*batch_plan.sources, *stream_plan.sources)}.values():
        if spark.catalog.tableExists(b.relation):
            continue
        if b.kind == "model":
            hint = f"build it first: `sqlflow run --mode batch --select +{b.input}`"
        else:
            hint = "load the source first (the demo's: `sqlflow demo generate`)"
        raise SqlflowError(f"model `{stream_plan.model}`: input table `{b.relation}` does not exist",
                           location=where, hint=hint)


# --- one model ------------------------------------------------------------------------------------

def verify_model(ctx: Context, batch_plan: BatchPlan | RoutedPlan, stream_plan: Plan, *, runs: int = 3,
                 seed: int = 0, order: Order = "auto", keep: bool = False, max_chunks: int = 6,
                 max_rounds: int = 3, progress: Progress | None = None) -> ModelReport:
    """Verify one model or routed group; see the module docstring. `max_chunks` bounds the
    commits per input and run, `max_rounds` the available-now runs (query restarts) per run.
    `keep` keeps the scratch schema of a verify that finished (the report names its tables;
    `drop_scratch`)."""
    say = progress or (lambda line: None)
    spark = ctx.spark
    check_inputs(spark, batch_plan, stream_plan)
    check_stream(spark, stream_plan)  # what the stream runtime cannot run fails before the batch
    chosen = resolve_order(stream_plan, order)
    scratch = scratch_schema(stream_plan.model)
    ckpt_root = f"{VERIFY_DIR}/{scratch}"
    model = stream_plan.model
    done = False
    try:
        spark.sql(f"CREATE DATABASE {quote(scratch)}")
        batch = scratch_batch(batch_plan, scratch)
        tables = tuple(o.table for o in outputs(batch) if not o.quarantine)
        say(f"{model}: batch plan into {', '.join(tables)}")
        versions, seconds = run_batch_plan(ctx, batch)
        batch_rows = sum(_rows(spark, t) for t in tables)
        batch_quarantined = _rows(spark, batch.quarantine)
        say(f"{model}: batch plan wrote {batch_rows:,} rows, quarantined {batch_quarantined:,} "
            f"({seconds:.1f}s)")
        reports = []
        for run in range(1, runs + 1):
            rnd = random.Random(f"{seed}/{model}/{run}")
            reports.append(_stream_run(ctx, batch, stream_plan, run, runs, rnd, chosen, scratch,
                                       f"{ckpt_root}/run{run}", versions, max_chunks, max_rounds, say))
        done = True
        return ModelReport(model, stream_plan.path, batch_rows, batch_quarantined, tables,
                           batch.quarantine, tuple(reports), scratch)
    finally:
        if not (keep and done):  # a failed verify leaves nothing behind, kept or not
            drop_scratch(ctx, scratch)


def resolve_order(plan: Plan, order: Order) -> str:
    if order != "auto":
        return order
    return "shuffled" if plan.strategy == "incremental" and not plan.padding_sql else "ingest"


def scratch_schema(model: str) -> str:
    """A schema no one else uses: `sqlflow_verify_<model>_<8 hex>`."""
    return f"sqlflow_verify_{model.lower()}_{uuid.uuid4().hex[:8]}"


def drop_scratch(ctx: Context, scratch: str) -> None:
    """Drop the scratch schema, its checkpoints and its tables' commit-log rows (see the
    module docstring)."""
    spark = ctx.spark
    if spark.catalog.tableExists(COMMIT_LOG):
        spark.sql(f"DELETE FROM {COMMIT_LOG} WHERE startswith(`table`, '{scratch.lower()}.')")
    spark.sql(f"DROP DATABASE IF EXISTS {quote(scratch)} CASCADE")
    shutil.rmtree(Path(ctx.project_dir) / VERIFY_DIR / scratch, ignore_errors=True)


def _stream_run(ctx: Context, batch: BatchPlan | RoutedPlan, plan: Plan, run: int, runs: int,
                rnd: random.Random,
                order: str, scratch: str, checkpoint: str, versions: dict[str, int | None],
                max_chunks: int, max_rounds: int, say: Progress) -> RunReport:
    began = time.monotonic()
    spark, model = ctx.spark, plan.model
    sides = [b for b in plan.sources if b.read == "stream"]
    copies = {b.relation: f"{scratch}.{model}__run{run}__in{k}" for k, b in enumerate(sides)}
    arrivals = [Arrival.prepare(spark, b, copies[b.relation], versions.get(b.relation), order,
                                rnd, max_chunks) for b in sides]
    try:
        commits = interleave([[(a, c) for c in a.chunks] for a in arrivals], rnd)
        # A bounded run is an end of input for plans that close intervals by time (outer-join
        # padding, `stateful` watermarks): a restart after it is a new run whose rows may match
        # rows already closed (a divergence, docs/design.md §2.7). Those plans get one run per round.
        closes = bool(plan.padding_sql) or plan.strategy == "stateful"
        rounds = split_rounds(commits, rnd, 1 if closes else max_rounds)
        stream: Plan
        if isinstance(plan, RoutedPlan):
            stream = into_scratch(plan, scratch, f"run{run}", copies=copies, checkpoint=checkpoint)
        else:
            stream = rebind(plan, copies, sink=f"{scratch}.{model}__run{run}",
                            quarantine=f"{scratch}.{model}__run{run}__quarantine", checkpoint=checkpoint)
        batches = 0
        for r, group in enumerate(rounds, 1):
            for arrival, chunk in group:
                arrival.commit(chunk)
            n, rows_out = run_stream_once(ctx, stream, end_of_input=r == len(rounds))
            batches += n
            say(f"{model} run {run}/{runs} ({order}) round {r}/{len(rounds)}: {len(group)} commit(s), "
                f"{n} micro-batch(es), {rows_out:,} rows out")
    finally:
        for a in arrivals:
            a.release()
    rename = {copies[r]: r for r in copies}
    diffs: tuple[PartitionDiff, ...]
    diffs, problems = (), commit_problems(spark, batch, stream)
    for want, got in zip(outputs(batch), outputs(stream), strict=False):
        d, p = compare(spark, want.table, got.table, want.partition_by, table=want.name,
                       drop=("origin",) if want.quarantine else (),
                       rename_input=rename if want.quarantine else None)
        diffs, problems = diffs + d, problems + p
    return RunReport(model, run, order, len(commits), len(rounds), batches, diffs, problems,
                     tuple(o.table for o in outputs(stream) if not o.quarantine), stream.quarantine,
                     tuple(rename.items()), time.monotonic() - began)


def rebind(plan: StreamPlan, copies: dict[str, str], *, sink: str, quarantine: str,
           checkpoint: str) -> StreamPlan:
    """The stream plan reading `copies` (relation -> copy table) one commit per micro-batch,
    writing a scratch sink and quarantine with its own checkpoint. Views keep their names, so
    the SQL is unchanged; static inputs stay as they are. A dimension join's `fact` names the
    fact's binding (its event time dates the `dim_missing` quarantine rows): it follows the copy."""
    dim = plan.dim and dataclasses.replace(plan.dim, fact=copies.get(plan.dim.fact, plan.dim.fact))
    return dataclasses.replace(
        plan, sources=tuple(bind_copy(b, copies) for b in plan.sources), quarantine=quarantine,
        sink=dataclasses.replace(plan.sink, table=sink, checkpoint=checkpoint), dim=dim)


# --- arrival: chunks, commits, rounds -------------------------------------------------------------

@dataclass
class Arrival:
    """One stream input's copy: its rows tagged with a chunk number (cached), the chunks to
    commit in order, and the copy table they are appended to."""

    source: str
    table: str
    rows: DataFrame
    chunks: list[int]

    @classmethod
    def prepare(cls, spark: SparkSession, b: SourceBinding, table: str, version: int | None,
                order: str, rnd: random.Random, max_chunks: int) -> Arrival:
        rows = (spark.sql(f"SELECT * FROM {quote(b.relation)} VERSION AS OF {version}") if version is not None
                else spark.table(b.relation))
        # unpartitioned, so a chunk coalesced to one partition is one file, one micro-batch
        rows.limit(0).write.format("delta").saveAsTable(table)
        n = rnd.randint(1, max_chunks)
        tagged = rows.withColumn(CHUNK, _chunk_of(rows, b, order, n, rnd)).persist()
        sizes = {r[CHUNK]: r["count"] for r in tagged.groupBy(CHUNK).count().collect()}
        chunks = [c for c in range(n) if sizes.get(c)]
        if order == "shuffled":
            rnd.shuffle(chunks)
        return cls(b.relation, table, tagged, chunks)

    def commit(self, chunk: int) -> None:
        (self.rows.where(F.col(CHUNK) == chunk).drop(CHUNK).coalesce(1)
         .write.format("delta").mode("append").saveAsTable(self.table))

    def release(self) -> None:
        self.rows.unpersist()


def _chunk_of(rows: DataFrame, b: SourceBinding, order: str, n: int, rnd: random.Random) -> Column:
    """Chunk number 0..n-1 of each row, chunk sizes random. `ingest`: cut at random quantiles
    of the ingest time (event time when the input has none), so chunk i holds rows ingested
    before those of chunk i+1; rows without that time come first (as `ORDER BY` sorts NULLs;
    such a row is never late, so arriving after closed intervals it could only diverge)."""
    fractions = sorted(rnd.random() for _ in range(n - 1))
    noise = F.rand(rnd.randrange(2**31))
    by_noise = sum((F.when(noise >= f, 1).otherwise(0) for f in fractions), F.lit(0))
    names = {c.lower(): c for c in rows.columns}
    column = names.get((b.ingest_time or "").lower()) or names.get((b.event_time or "").lower())
    if order == "shuffled" or column is None or n == 1:
        return by_noise
    micros = F.unix_micros(F.col(quote_ident(column)).cast("timestamp"))
    cuts = rows.select(micros.alias("t")).where("t IS NOT NULL").approxQuantile("t", fractions, 0.001)
    by_time = sum((F.when(micros >= F.lit(int(c)), 1).otherwise(0) for c in cuts), F.lit(0))
    return F.when(micros.isNull(), F.lit(0)).otherwise(by_time)  # like ORDER BY: NULLs first


def interleave(sequences: list[list[Any]], rnd: random.Random) -> list[Any]:
    """A random merge of `sequences`, each kept in its own order."""
    todo = [list(s) for s in sequences if s]
    out = []
    while todo:
        pick = rnd.choices(range(len(todo)), weights=[len(s) for s in todo])[0]
        out.append(todo[pick].pop(0))
        todo = [s for s in todo if s]
    return out


def split_rounds(commits: list[Any], rnd: random.Random, max_rounds: int) -> list[list[Any]]:
    """Cut the commits into 1..max_rounds non-empty consecutive groups (one available-now
    run each); no commits is one empty round (the stream still runs once)."""
    if not commits:
        return [[]]
    k = rnd.randint(1, max(1, min(max_rounds, len(commits))))
    cuts = sorted(rnd.sample(range(1, len(commits)), k - 1))
    return [commits[a:b] for a, b in zip([0, *cuts], [*cuts, len(commits)], strict=True)]


# --- helpers --------------------------------------------------------------------------------------

def _rows(spark: SparkSession, table: str) -> int:
    return spark.table(table).count() if spark.catalog.tableExists(table) else 0
