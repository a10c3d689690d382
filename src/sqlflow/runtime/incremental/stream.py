"""The `incremental` stream runtime (docs/design.md, "Runtime"): one Structured Streaming query
per model. `sqlflow.runtime.dispatch` picks it for a stream plan of strategy `incremental`.

Every stream input is read with `spark.readStream.format("delta").table(...)` and projected
into one envelope (`__side` = the input's index, `__s<k>` = the row of input k as a struct,
NULL for the others); the inputs are `unionByName`-ed into ONE query with ONE checkpoint
(`plan.sink.checkpoint`, under the project folder). `foreachBatch` runs
`sqlflow.runtime.incremental.microbatch.MicroBatch`, which splits the envelope back into per-input rows.

Idempotent writes name the query by `<model>@<query id>`: Spark keeps the query id in the
checkpoint, so a restart continues the same id (its replayed batch ids are skipped where
already written), while a new checkpoint is a new query whose batch ids start again at 0
(and whose state tables start empty).

Triggers: `available-now` processes everything there is, then flushes (an outer join's
pending rows are emitted padded: `MicroBatch.flush`, recorded so a restart pads nothing
twice) and stops; an interval (`10 seconds`) runs until stopped, and the run loop wakes up
every `query.IDLE_POLL_S` seconds (at most) to emit the padded rows an idle input's `idle_timeout`
closes (`MicroBatch.idle_check`): Spark calls `foreachBatch` only when new rows arrive.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from functools import reduce
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sqlflow.engine.context import Context
from sqlflow.errors import Location, SqlflowError
from sqlflow.identifiers import quote as quote_ident
from sqlflow.planning.plan import COMMIT_LOG, StreamPlan
from sqlflow.runtime import ownership
from sqlflow.runtime.batchfn import query_failed
from sqlflow.runtime.delta import deltalog, once, sink_truth, source_files
from sqlflow.runtime.env_errors import written_paths
from sqlflow.runtime.incremental import older, padding, remote, state
from sqlflow.runtime.incremental.microbatch import SIDE, BatchReport, MicroBatch, side_column
from sqlflow.runtime.query import (
    AVAILABLE_NOW,
    app_id,
    checkpoint_dir,
    is_new,
    query_id,
    rebuild_command,
    refuse_new_checkpoint,
    start_query,
    wait,
)
from sqlflow.runtime.results import StreamResult


def check_plan(spark: SparkSession, plan: StreamPlan) -> dict[str, deltalog.TableInfo]:
    """Refuse what this runtime cannot run yet, before a query starts. Returns the inputs
    found by one catalog look-up per database (`deltalog.locate`: lower-case names), whose
    folders the query's input logs then need not ask for again (one `DESCRIBE` an input)."""
    where = Location(plan.path)
    if plan.strategy != "incremental":
        raise SqlflowError(f"model `{plan.model}`: stream_strategy `{plan.strategy}` has no runtime yet",
                           location=where, hint="use the default stream_strategy `incremental`")
    located = deltalog.locate(spark, [b.relation for b in plan.sources])
    for b in plan.sources:  # (what `locate` does not list, a temporary view, is asked for)
        if b.relation.lower() not in located and not spark.catalog.tableExists(b.relation):
            raise SqlflowError(f"model `{plan.model}`: input table `{b.relation}` does not exist",
                               location=where, hint="create or load the input first")
    if not any(b.read == "stream" for b in plan.sources):
        raise SqlflowError(f"model `{plan.model}` has no stream input", location=where)
    return located


def start(ctx: Context, plan: StreamPlan, *, trigger: str = AVAILABLE_NOW,
          on_batch: Callable[[BatchReport], None] | None = None,
          after_sink: Callable[[int], None] | None = None,
          after_state: Callable[[int], None] | None = None):
    """Start the model's query; returns `(query, microbatch)`."""
    spark = ctx.spark
    located = check_plan(spark, plan)
    sides = [b for b in plan.sources if b.read == "stream"]
    schemas = {b.relation: spark.table(b.relation).schema for b in sides}
    tables = {b.relation: state.state_table(plan.sink.table, plan.model, b.relation)
              for b in sides if b.old_view}
    checkpoint = checkpoint_dir(ctx.project_dir, plan)
    fresh = is_new(checkpoint)
    if fresh:  # a new query: older rows of another query are stale
        refuse_new_checkpoint(spark, plan, checkpoint, plan.outputs)
        owned = (*tables.values(), padding.progress_table(plan.sink.table, plan.model))
        # the ones there, found with one catalog look-up (`deltalog.locate`; a new query's
        # state tables are mostly not there: three existence checks and drops, 0.06 s)
        there = deltalog.locate(spark, owned)
        stale = [t for t in owned if t.lower() in there]
        for table in stale:  # refuse before anything is dropped (docs/semantics.md, "Table ownership")
            ownership.check_state(spark, table, plan.model, action="drop", origin=plan.path)
        for table in stale:
            state.drop(spark, table)
        for folder in (older.FOLDER, once.FOLDER):
            shutil.rmtree(checkpoint / folder, ignore_errors=True)
    else:  # the tables, not the journal, say which batches are written (docs/semantics.md)
        sink_truth.reconcile(spark, checkpoint, [plan.sink.table, plan.quarantine, COMMIT_LOG,
                                                 *tables.values()],
                             (f"{plan.model}@{query_id(checkpoint)}", *tables.values()),
                             what=f"model `{plan.model}`", path=plan.path, rebuild=rebuild_command(plan))
    fn = MicroBatch(plan, sides, schemas, tables, app_id(plan.model, checkpoint),
                    on_batch=on_batch, after_sink=after_sink, after_state=after_state,
                    checkpoint=checkpoint, spark=spark)
    for b in sides:
        if b.relation.lower() in located:
            fn.logs.located(spark, b.relation, located[b.relation.lower()].location)
    frames = []
    for k, b in enumerate(sides):
        reader = spark.readStream.format("delta")
        if b.max_files_per_trigger:
            reader = reader.option("maxFilesPerTrigger", b.max_files_per_trigger)
        if fresh and _from_first_commit(spark, fn, b.relation):
            reader = reader.option("startingVersion", "0")
        rows = reader.table(b.relation)
        frames.append(rows.select(F.lit(k).alias(SIDE), *[
            F.struct(*[rows[quote_ident(c)] for c in rows.columns]).alias(side_column(j)) if j == k
            else F.lit(None).cast(schemas[o.relation]).alias(side_column(j))
            for j, o in enumerate(sides)]))
    envelope: DataFrame = reduce(DataFrame.unionByName, frames)
    if not fresh:
        fn.redo()  # a flush/idle step a crash interrupted
    # over Spark Connect the server runs the batches: it gets a picklable function, and `fn`
    # (here) keeps the steps between them (docs/deploy.md, "Spark Connect")
    batches = (remote.RemoteMicroBatch(plan, sides, schemas, tables, plan.model, str(checkpoint.resolve()))
               if remote.is_remote(spark) else fn)
    query = start_query(envelope, batches, name=f"sqlflow_{plan.model}", checkpoint=checkpoint,
                        trigger=trigger)
    return query, fn


def _from_first_commit(spark: SparkSession, fn: MicroBatch, relation: str) -> bool:
    """Whether a new query reads `relation` from its first commit on (`startingVersion` 0)
    instead of from its latest snapshot: the same rows when every commit only added files
    (`source_files.appends_only`), and the Delta source then finds each micro-batch's files in
    the commit files; from a snapshot it ran Spark jobs over the snapshot's file list at every
    trigger (0.3 s a micro-batch of two inputs on two cores, docs/design.md §2.9). Not over
    Spark Connect or for a log that is not a local folder (not read here)."""
    log = fn.logs.log(spark, relation)
    return log is not None and source_files.appends_only(Path(log).parent)


def run_stream(ctx: Context, plan: StreamPlan, *, trigger: str = AVAILABLE_NOW,
               on_batch: Callable[[BatchReport], None] | None = None,
               after_sink: Callable[[int], None] | None = None,
               after_state: Callable[[int], None] | None = None) -> StreamResult:
    """Run one model's query until it stops (available-now: when every input row is processed;
    an interval trigger: until interrupted). A failure inside a micro-batch is re-raised as
    it was raised (a SqlflowError stays one); the checkpoint lets the next run resume.
    A bounded run ends with the flush of an outer join's pending rows (`MicroBatch.flush`)."""
    began = time.monotonic()
    query, fn = start(ctx, plan, trigger=trigger, on_batch=on_batch, after_sink=after_sink,
                      after_state=after_state)
    try:
        over_connect = remote.is_remote(ctx.spark)
        # over Connect no idle step runs beside the server's batches: nothing here keeps them apart
        wait([(query, None if over_connect else fn)])
        if over_connect:  # the server's batches: read from the query and the commit log
            for report in remote.reports(ctx.spark, query, plan, fn.sides, fn.app_id()):
                fn.reports.append(report)
                if on_batch:
                    on_batch(report)
        if trigger == AVAILABLE_NOW and query.exception() is None:
            fn.flush()
    except KeyboardInterrupt:
        query.stop()
    except Exception as exc:
        raise query_failed(f"model `{plan.model}`", plan.path, fn.error, exc,
                           rebuild=rebuild_command(plan),
                           written=written_paths(ctx, plan)) from exc
    finally:
        fn.release()
    return StreamResult(plan.model, tuple(fn.reports), time.monotonic() - began)
