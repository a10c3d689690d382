"""Archive a Kafka source to its Delta table, each offset range exactly once
(docs/semantics.md, "Kafka sources").

One Structured Streaming query per source table reads its topic with Spark's Kafka connector
(`spark-sql-kafka-0-10`) and appends each micro-batch's records (`payload.archive_rows`) to the
table `schema.identifier` the yml names: the very table the models, the backfill, `dbt run`
and `verify` read, so all of them see exactly the records the stream archived. The query's
checkpoint (`.sqlflow/checkpoints/kafka__<source>.<table>`) holds the offset range of every
micro-batch; its appends are journaled (`sqlflow.runtime.delta.once`), so a micro-batch a
crash interrupted, replayed over the same offsets, is written once.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from sqlflow.errors import Location, SqlflowError
from sqlflow.planning.plan import Sink
from sqlflow.project.runmode import AVAILABLE_NOW, STATE_DIR
from sqlflow.project.sources import SourceTable
from sqlflow.runtime import offsets
from sqlflow.runtime.delta import once, sinks
from sqlflow.runtime.kafka.payload import archive_rows
from sqlflow.runtime.query import query_id, start_query


@dataclass(frozen=True)
class Archived:
    """What one archive run appended: records, and those whose payload did not parse."""

    source: str
    table: str
    topic: str
    batches: int
    rows: int
    malformed: int
    seconds: float


def archive_table(table: SourceTable) -> str:
    return f"{table.schema}.{table.identifier}"


def checkpoint_of(project_dir: Path, table: SourceTable) -> Path:
    return Path(project_dir) / STATE_DIR / "checkpoints" / f"kafka__{table.key}"


class _Append:
    """The archive query's `foreachBatch`: one journaled append per micro-batch."""

    def __init__(self, spark: SparkSession, table: SourceTable, checkpoint: Path) -> None:
        self.spark, self.table, self.checkpoint = spark, table, checkpoint
        self.sink = Sink(archive_table(table), "append_once", origin=str(table.location))
        self.journal = once.Journal.open(checkpoint, offsets.next_batch(checkpoint))
        self.batches = self.rows = self.malformed = 0

    def __call__(self, records: DataFrame, batch_id: int) -> None:
        rows = archive_rows(records, self.table).persist()
        try:
            app = f"kafka:{self.table.key}@{query_id(self.checkpoint)}"
            result = sinks.write(self.spark, self.sink, rows,
                                 batch=sinks.BatchId(app, batch_id, self.journal),
                                 optimize_write=False)
            if not result.skipped:
                self.batches += 1
                self.rows += result.rows
                self.malformed += rows.where("_kafka_error IS NOT NULL").count()
        finally:
            rows.unpersist()


def reader(spark: SparkSession, table: SourceTable, servers: str) -> DataFrame:
    """The topic as a stream, from the binding's starting offsets; a checkpointed query
    resumes from its own offsets and fails, never skips, when they are gone from the broker."""
    assert table.kafka is not None
    read = (spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", servers)
            .option("subscribe", table.kafka.topic)
            .option("startingOffsets", table.kafka.starting_offsets)
            .option("failOnDataLoss", "true"))
    if table.kafka.max_offsets_per_trigger:
        read = read.option("maxOffsetsPerTrigger", str(table.kafka.max_offsets_per_trigger))
    return read.load()


def refuse_new_checkpoint(spark: SparkSession, table: SourceTable, checkpoint: Path) -> None:
    """A new checkpoint over an archive with rows would archive every record again."""
    name = archive_table(table)
    if offsets.next_batch(checkpoint) == 0 and spark.catalog.tableExists(name) \
            and spark.table(name).take(1):
        raise SqlflowError(
            f"Kafka source `{table.key}`: archive `{name}` already has rows but its checkpoint "
            f"`{checkpoint}` is new: archiving would append every record again",
            location=Location(table.path, table.line),
            hint=f"restore the checkpoint folder, or drop `{name}` to archive the topic anew")


def bound_sources(sources: Iterable[SourceTable], plans: Iterable[object]) -> list[SourceTable]:
    """The Kafka-bound source tables `plans` read (each once, in name order)."""
    read = {b.input for p in plans for b in getattr(p, "sources", ()) if b.kind == "source"}
    return sorted((t for t in sources if t.kafka is not None and t.key in read), key=lambda t: t.key)


def archive(spark: SparkSession, project_dir: Path, tables: Iterable[SourceTable], servers: str,
            *, trigger: str = AVAILABLE_NOW) -> list[Archived]:
    """Archive every table's topic up to its end now (`available-now`), one after the other."""
    if trigger != AVAILABLE_NOW:
        raise ValueError("archive runs bounded; a live archive is planned")
    done = []
    for table in tables:
        assert table.kafka is not None
        checkpoint = checkpoint_of(project_dir, table)
        refuse_new_checkpoint(spark, table, checkpoint)
        append = _Append(spark, table, checkpoint)
        began = time.monotonic()
        query = start_query(reader(spark, table, servers), append,
                            name=f"kafka__{table.key}", checkpoint=checkpoint, trigger=trigger)
        query.awaitTermination()
        done.append(Archived(table.source_name, table.name, table.kafka.topic, append.batches,
                             append.rows, append.malformed, time.monotonic() - began))
    return done
