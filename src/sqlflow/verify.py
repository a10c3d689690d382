"""`sqlflow verify`: a model's stream plan, fed its input in random orders and splits, must end
with exactly its batch plan's output (DESIGN 2). The test oracle, run by analysts before a merge.

For one streaming model:
1. run the batch plan into a scratch table (its inputs read as they are, at one Delta version);
2. for each of N runs, copy every STREAM input (that version) into a fresh Delta table of a
   scratch schema, in chunks of random sizes, one commit and one file per chunk, the inputs'
   commits interleaved at random; run the stream plan, rebound to the copies, a scratch sink
   and a fresh checkpoint, available-now after each of a few random rounds of commits (so a
   run also restarts its query from the checkpoint), with `maxFilesPerTrigger=1`: one commit,
   one micro-batch per input;
3. compare sink and quarantine with the batch run's, row for row: both directions of EXCEPT
   ALL over every column (quarantine: all but `origin`, which says where a row was read),
   counted per output partition.

Static inputs (dimensions) are read where they are, by both plans. The scratch schema and the
checkpoints are dropped at the end unless `keep`.

Arrival order (`order`): `shuffled` puts each input's rows in a random order before cutting
chunks, the strongest test, valid wherever the result cannot depend on arrival order (an
`incremental` plan without outer-join padding). `ingest` keeps each input in ingest-time order
(random chunk sizes, inputs still interleaved at random): what a Kafka topic delivers, and what
outer-join padding and Spark's watermarks assume, since a row arriving long after rows ingested
later than it is a divergence to detect (DESIGN 2.7), not a contract the plan can keep.
`auto` picks `shuffled` where valid, else `ingest`. For the same reason a run of such a plan
is one bounded stream run (its end is the end of input); other plans are cut into up to
`max_rounds` bounded runs, so their query also restarts from its checkpoint.
"""

from __future__ import annotations

import dataclasses
import random
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Literal, Sequence

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from sqlflow.errors import Location, SqlflowError
from sqlflow.plan import BatchPlan, SourceBinding, StreamPlan
from sqlflow.runtime.sinks import quote

Order = Literal["auto", "shuffled", "ingest"]
CHUNK = "__sqlflow_chunk"
VERIFY_DIR = ".sqlflow/verify"


@dataclass(frozen=True)
class PartitionDiff:
    """One output partition of one table (`sink` or `quarantine`) in one run."""

    table: str
    partition: str
    batch_rows: int
    stream_rows: int
    missing: int  # batch rows the stream did not write (EXCEPT ALL: multiset)
    extra: int  # stream rows the batch did not write

    @property
    def ok(self) -> bool:
        return self.missing == 0 and self.extra == 0


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
    sink_table: str
    quarantine_table: str
    copies: tuple[tuple[str, str], ...]  # (copy table, the input relation it copies)
    seconds: float

    @property
    def ok(self) -> bool:
        return not self.problems and all(p.ok for p in self.partitions)


@dataclass(frozen=True)
class ModelReport:
    model: str
    path: str
    batch_rows: int
    batch_quarantined: int
    batch_table: str
    batch_quarantine: str
    runs: tuple[RunReport, ...]
    scratch: str  # the scratch schema (dropped unless kept)

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.runs)


Progress = Callable[[str], None]


# --- a project: compile, select, verify each streaming model --------------------------------------

def verify_project(ctx, *, select: Sequence[str] | None = None, runs: int = 3, seed: int = 0,
                   order: Order = "auto", keep: bool = False, vars: dict[str, Any] | None = None,
                   progress: Progress | None = None,
                   on_model: Callable[[ModelReport], None] | None = None) -> list[ModelReport]:
    """Compile the selected models in both modes and verify every streaming one.

    Raises SqlflowError when the selection holds no model with a stream plan (naming what it
    did select), or for compile errors and missing inputs, before any table is written.
    """
    from sqlflow.compiler import compile_project

    streams = compile_project(ctx.project_dir, mode="stream", select=list(select or []) or None,
                              target=ctx.target, vars=vars)
    streams.raise_if_errors()
    candidates = [p for p in streams.plans.values() if isinstance(p, StreamPlan)]
    if not candidates:
        chosen = ", ".join(f"`{m}`" for m in streams.plans) or "no model"
        raise SqlflowError(
            f"nothing to verify: {'--select ' + ' '.join(select) if select else 'the project'} "
            f"selects {chosen}, and none is a `streaming_table` with a stream plan",
            hint="verify compares a streaming_table model's stream plan with its batch plan; "
                 "select one, e.g. --select dwd_ad_clicks_attributed")
    batches = compile_project(ctx.project_dir, mode="batch", select=[p.model for p in candidates],
                              target=ctx.target, vars=vars)
    batches.raise_if_errors()
    pairs = [(batches.plans[p.model], p) for p in candidates]
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


def check_inputs(spark: SparkSession, batch_plan: BatchPlan, stream_plan: StreamPlan) -> None:
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

def verify_model(ctx, batch_plan: BatchPlan, stream_plan: StreamPlan, *, runs: int = 3,
                 seed: int = 0, order: Order = "auto", keep: bool = False, max_chunks: int = 6,
                 max_rounds: int = 3, progress: Progress | None = None) -> ModelReport:
    """Verify one model; see the module docstring. `max_chunks` bounds the commits per input
    and run, `max_rounds` the available-now runs (query restarts) per run. `keep` keeps the
    scratch schema of a verify that finished (the report names its tables; `drop_scratch`)."""
    from sqlflow.runtime.batch import run_batch
    from sqlflow.runtime.stream import check_plan

    say = progress or (lambda line: None)
    spark = ctx.spark
    check_inputs(spark, batch_plan, stream_plan)
    check_plan(spark, stream_plan)  # what the stream runtime cannot run fails before the batch
    chosen = resolve_order(stream_plan, order)
    scratch = scratch_schema(stream_plan.model)
    ckpt_root = f"{VERIFY_DIR}/{scratch}"
    model = stream_plan.model
    done = False
    try:
        spark.sql(f"CREATE DATABASE {scratch}")
        batch = dataclasses.replace(
            batch_plan, sink=dataclasses.replace(batch_plan.sink, table=f"{scratch}.{model}__batch"),
            quarantine=f"{scratch}.{model}__batch__quarantine")
        say(f"{model}: batch plan into {batch.sink.table}")
        result = run_batch(ctx, batch)
        versions = {r.relation: r.version for r in result.inputs}
        batch_rows = _rows(spark, batch.sink.table)
        batch_quarantined = _rows(spark, batch.quarantine)
        say(f"{model}: batch plan wrote {batch_rows:,} rows, quarantined {batch_quarantined:,} "
            f"({result.seconds:.1f}s)")
        reports = []
        for run in range(1, runs + 1):
            rnd = random.Random(f"{seed}/{model}/{run}")
            reports.append(_stream_run(ctx, batch, stream_plan, run, runs, rnd, chosen, scratch,
                                       f"{ckpt_root}/run{run}", versions, max_chunks, max_rounds, say))
        done = True
        return ModelReport(model, stream_plan.path, batch_rows, batch_quarantined, batch.sink.table,
                           batch.quarantine, tuple(reports), scratch)
    finally:
        if not (keep and done):  # a failed verify leaves nothing behind, kept or not
            drop_scratch(ctx, scratch)


def resolve_order(plan: StreamPlan, order: Order) -> str:
    if order != "auto":
        return order
    return "shuffled" if plan.strategy == "incremental" and not plan.padding_sql else "ingest"


def scratch_schema(model: str) -> str:
    """A schema no one else uses: `sqlflow_verify_<model>_<8 hex>`."""
    return f"sqlflow_verify_{model.lower()}_{uuid.uuid4().hex[:8]}"


def drop_scratch(ctx, scratch: str) -> None:
    ctx.spark.sql(f"DROP DATABASE IF EXISTS {scratch} CASCADE")
    shutil.rmtree(Path(ctx.project_dir) / VERIFY_DIR / scratch, ignore_errors=True)


def _stream_run(ctx, batch: BatchPlan, plan: StreamPlan, run: int, runs: int, rnd: random.Random,
                order: str, scratch: str, checkpoint: str, versions: dict[str, int | None],
                max_chunks: int, max_rounds: int, say: Progress) -> RunReport:
    from sqlflow.runtime.stream import AVAILABLE_NOW, run_stream

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
        # rows already closed (a divergence, DESIGN 2.7). Those plans get one run per round.
        closes = bool(plan.padding_sql) or plan.strategy == "stateful"
        rounds = split_rounds(commits, rnd, 1 if closes else max_rounds)
        stream = rebind(plan, copies, sink=f"{scratch}.{model}__run{run}",
                        quarantine=f"{scratch}.{model}__run{run}__quarantine", checkpoint=checkpoint)
        batches = 0
        for r, group in enumerate(rounds, 1):
            for arrival, chunk in group:
                arrival.commit(chunk)
            res = run_stream(ctx, stream, trigger=AVAILABLE_NOW)
            batches += len(res.batches)
            say(f"{model} run {run}/{runs} ({order}) round {r}/{len(rounds)}: {len(group)} commit(s), "
                f"{len(res.batches)} micro-batch(es), {res.rows_out:,} rows out")
    finally:
        for a in arrivals:
            a.release()
    rename = {copies[r]: r for r in copies}
    sink_diffs, sink_problems = compare(spark, batch.sink.table, stream.sink.table,
                                        batch.sink.partition_by, table="sink")
    q_diffs, q_problems = compare(spark, batch.quarantine, stream.quarantine, ("dt",),
                                  table="quarantine", drop=("origin",), rename_input=rename)
    return RunReport(model, run, order, len(commits), len(rounds), batches, sink_diffs + q_diffs,
                     sink_problems + q_problems, stream.sink.table, stream.quarantine,
                     tuple(rename.items()), time.monotonic() - began)


def rebind(plan: StreamPlan, copies: dict[str, str], *, sink: str, quarantine: str,
           checkpoint: str) -> StreamPlan:
    """The stream plan reading `copies` (relation -> copy table) one commit per micro-batch,
    writing a scratch sink and quarantine with its own checkpoint. Views keep their names, so
    the SQL is unchanged; static inputs stay as they are."""
    def bind(b: SourceBinding) -> SourceBinding:
        if b.relation not in copies:
            return b
        prune = tuple(dataclasses.replace(p, other=copies.get(p.other, p.other)) for p in b.prune)
        return dataclasses.replace(b, relation=copies[b.relation], prune=prune, max_files_per_trigger=1)

    return dataclasses.replace(
        plan, sources=tuple(bind(b) for b in plan.sources), quarantine=quarantine,
        sink=dataclasses.replace(plan.sink, table=sink, checkpoint=checkpoint))


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
                order: str, rnd: random.Random, max_chunks: int) -> "Arrival":
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
    micros = F.unix_micros(F.col(f"`{column}`").cast("timestamp"))
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
    return [commits[a:b] for a, b in zip([0, *cuts], [*cuts, len(commits)])]


# --- comparison -----------------------------------------------------------------------------------

def compare(spark: SparkSession, want_table: str, got_table: str, partition_by: Sequence[str], *,
            table: str, drop: Sequence[str] = (), rename_input: dict[str, str] | None = None
            ) -> tuple[tuple[PartitionDiff, ...], tuple[str, ...]]:
    """Per-partition multiset difference of two tables, both directions of EXCEPT ALL over every
    column (minus `drop`). A table that does not exist is empty. `rename_input` maps the
    quarantine's `input` column from copy tables back to the relations they copy."""
    want, got = _table(spark, want_table), _table(spark, got_table)
    if want is None and got is None:
        return (), ()
    want = want if want is not None else spark.createDataFrame([], got.schema)
    got = got if got is not None else spark.createDataFrame([], want.schema)
    want, got = want.drop(*drop), got.drop(*drop)
    if rename_input and "input" in got.columns:
        mapped = F.col("input")
        for copy, original in rename_input.items():
            mapped = F.when(F.col("input") == copy, F.lit(original)).otherwise(mapped)
        got = got.withColumn("input", mapped)
    problems = _schema_problems(want, got, table)
    if problems:
        return (), problems
    got = got.select(*[F.col(f"`{c}`") for c in want.columns])
    key = _partition_key(want.columns, partition_by)
    counts = [_count_by(df, key) for df in (want, got, want.exceptAll(got), got.exceptAll(want))]
    keys = sorted(set().union(*counts))
    return tuple(PartitionDiff(table, k, *(c.get(k, 0) for c in counts)) for k in keys), ()


def _table(spark: SparkSession, name: str) -> DataFrame | None:
    return spark.table(name) if spark.catalog.tableExists(name) else None


def _schema_problems(want: DataFrame, got: DataFrame, table: str) -> tuple[str, ...]:
    w = {f.name.lower(): f.dataType.simpleString() for f in want.schema.fields}
    g = {f.name.lower(): f.dataType.simpleString() for f in got.schema.fields}
    out = [f"{table}: column `{c}` only in the batch output" for c in w if c not in g]
    out += [f"{table}: column `{c}` only in the stream output" for c in g if c not in w]
    out += [f"{table}: column `{c}` is {w[c]} in the batch output, {g[c]} in the stream output"
            for c in w if c in g and w[c] != g[c]]
    return tuple(out)


def _partition_key(columns: Sequence[str], partition_by: Sequence[str]) -> Column:
    names = {c.lower(): c for c in columns}
    parts = [names[p.lower()] for p in partition_by if p.lower() in names]
    if not parts:
        return F.lit("(whole table)")
    return F.concat_ws("/", *[F.concat(F.lit(f"{p}="), F.coalesce(F.col(f"`{p}`").cast("string"),
                                                                    F.lit("NULL"))) for p in parts])


def _count_by(df: DataFrame, key: Column) -> dict[str, int]:
    return {r["k"]: r["n"] for r in df.groupBy(key.alias("k")).agg(F.count(F.lit(1)).alias("n")).collect()}


def _rows(spark: SparkSession, table: str) -> int:
    return spark.table(table).count() if spark.catalog.tableExists(table) else 0
