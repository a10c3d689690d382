"""Archive a Kafka source to its Delta table, each offset range exactly once
(docs/semantics.md, "Kafka sources").

One Structured Streaming query per source table reads its topic with Spark's Kafka connector
(`spark-sql-kafka-0-10`) and appends each micro-batch's records (`payload.archive_rows`) to the
table `schema.identifier` the yml names: the very table the models, the backfill, `dbt run`
and `verify` read, so all of them see exactly the records the stream archived. The query's
checkpoint (`.sqlflow/checkpoints/kafka__<source>.<table>`) holds the offset range of every
micro-batch; its appends are journaled (`sqlflow.runtime.delta.once`), so a micro-batch a
crash interrupted, replayed over the same offsets, is written once.

Source control (`sqlflow.runtime.kafka.pacing`) holds a micro-batch before its write: the
source's rate and playback speed, and, for the sources of one `alignment_group`, whose queries
run side by side, their ingest-time skew.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import groupby
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sqlflow.errors import Location, SqlflowError
from sqlflow.planning.plan import Sink
from sqlflow.project.runmode import AVAILABLE_NOW, STATE_DIR
from sqlflow.project.sources import SourceTable
from sqlflow.runtime import offsets
from sqlflow.runtime.delta import once, sinks
from sqlflow.runtime.kafka.pacing import Aligner, Pacer
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
    held_s: float = 0.0  # waited for the rate, the playback speed or the alignment group
    lead_ms: int | None = None  # the largest lead over its group's slowest source at a write


def archive_table(table: SourceTable) -> str:
    return f"{table.schema}.{table.identifier}"


def checkpoint_of(project_dir: Path, table: SourceTable) -> Path:
    return Path(project_dir) / STATE_DIR / "checkpoints" / f"kafka__{table.key}"


class _Append:
    """The archive query's `foreachBatch`: one journaled append per micro-batch."""

    def __init__(self, spark: SparkSession, table: SourceTable, checkpoint: Path,
                 aligner: Aligner | None = None) -> None:
        assert table.kafka is not None
        self.spark, self.table, self.checkpoint = spark, table, checkpoint
        self.sink = Sink(archive_table(table), "append_once", origin=str(table.location))
        self.journal = once.Journal.open(checkpoint, offsets.next_batch(checkpoint))
        self.pacer = Pacer.of(table.kafka)
        self.aligner = aligner
        self.batches = self.rows = self.malformed = 0

    def _hold(self, rows: DataFrame) -> int | None:
        """Wait as the source's limits and its group say; returns the batch's newest record
        time (ms), None when it is empty."""
        if self.pacer.rows_per_second is None and self.pacer.speed is None and self.aligner is None:
            return None
        ms = F.unix_millis(F.col("_kafka_timestamp"))
        stats = rows.agg(F.count(F.lit(1)), F.min(ms), F.max(ms)).first()
        assert stats is not None  # an aggregate has one row
        n, first, last = stats
        self.pacer.hold(rows=n, first_ms=first, last_ms=last)
        if self.aligner is not None:
            self.aligner.hold(self.table.key, first_ms=first, last_ms=last)
        return last

    def __call__(self, records: DataFrame, batch_id: int) -> None:
        rows = archive_rows(records, self.table).persist()
        try:
            newest = self._hold(rows)
            app = f"kafka:{self.table.key}@{query_id(self.checkpoint)}"
            result = sinks.write(self.spark, self.sink, rows,
                                 batch=sinks.BatchId(app, batch_id, self.journal),
                                 optimize_write=False)
            if not result.skipped:
                self.batches += 1
                self.rows += result.rows
                self.malformed += rows.where("_kafka_error IS NOT NULL").count()
            if self.aligner is not None:
                self.aligner.wrote(self.table.key, newest)
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
    if per_trigger := table.kafka.offsets_per_trigger():
        read = read.option("maxOffsetsPerTrigger", str(per_trigger))
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


def frontier_ms(spark: SparkSession, table: SourceTable) -> int | None:
    """The newest record time (ms) `table`'s archive holds, None when it holds none."""
    name = archive_table(table)
    if not spark.catalog.tableExists(name):
        return None
    row = spark.table(name).agg(F.max(F.unix_millis(F.col("_kafka_timestamp")))).first()
    return None if row is None or row[0] is None else int(row[0])


def _group(table: SourceTable) -> str:
    assert table.kafka is not None
    return table.kafka.alignment_group or ""


def archive(spark: SparkSession, project_dir: Path, tables: Iterable[SourceTable], servers: str,
            *, trigger: str = AVAILABLE_NOW) -> list[Archived]:
    """Archive every table's topic up to its end now (`available-now`): one after the other,
    but the tables of one `alignment_group` side by side, held within its `max_skew`."""
    if trigger != AVAILABLE_NOW:
        raise ValueError("archive runs bounded; a live archive is planned")
    done: list[Archived] = []
    ordered = sorted(tables, key=lambda t: (_group(t), t.key))
    for group, members in groupby(ordered, key=_group):
        batch = list(members)
        runs = [batch] if group else [[t] for t in batch]
        for run in runs:
            done.extend(_archive_together(spark, project_dir, run, servers, trigger))
    return done


def _archive_together(spark: SparkSession, project_dir: Path, tables: list[SourceTable],
                      servers: str, trigger: str) -> list[Archived]:
    aligner = None
    if len(tables) > 1:
        skew = tables[0].kafka.max_skew if tables[0].kafka else None
        assert skew is not None
        aligner = Aligner(max_skew_ms=int(skew.total_seconds() * 1000),
                          members=[t.key for t in tables])
        for t in tables:
            aligner.start(t.key, frontier_ms(spark, t))
    started = []
    try:
        for table in tables:
            checkpoint = checkpoint_of(project_dir, table)
            refuse_new_checkpoint(spark, table, checkpoint)
            append = _Append(spark, table, checkpoint, aligner)
            began = time.monotonic()
            query = start_query(reader(spark, table, servers), append,
                                name=f"kafka__{table.key}", checkpoint=checkpoint, trigger=trigger)
            started.append((table, append, query, began))
        ended: dict[str, float] = {}
        while len(ended) < len(started):
            for table, _, query, began in started:
                if table.key not in ended and not query.isActive:
                    ended[table.key] = time.monotonic() - began
                    if aligner is not None:
                        aligner.finish(table.key)
                    query.awaitTermination()  # raises the query's failure
            if len(ended) < len(started):
                time.sleep(0.2)
    finally:
        for table, _, query, _ in started:
            if aligner is not None:
                aligner.finish(table.key)
            if query.isActive:
                query.stop()
    return [Archived(t.source_name, t.name, t.kafka.topic if t.kafka else "", a.batches, a.rows,
                     a.malformed, ended[t.key],
                     held_s=a.pacer.held_s + (aligner.held_s.get(t.key, 0.0) if aligner else 0.0),
                     lead_ms=aligner.lead_ms.get(t.key) if aligner else None)
            for t, a, _, _ in started]
