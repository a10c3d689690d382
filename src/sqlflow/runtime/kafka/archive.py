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

Broker trouble (docs/semantics.md, "Kafka sources: broker trouble"): a query that fails while
the broker cannot be reached, or on a broker timeout, is started again from its checkpoint
after a backoff (`Retry`; the journal keeps a replayed micro-batch from being written twice);
offsets gone from the broker fail with the operator's choice (`offset_reset`), never a skip.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import groupby
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sqlflow.engine.connect_limits import connect_error
from sqlflow.errors import Location, SqlflowError
from sqlflow.identifiers import quote_table as quote
from sqlflow.planning.plan import Sink
from sqlflow.project.runmode import AVAILABLE_NOW, STATE_DIR
from sqlflow.project.sources import SourceTable
from sqlflow.runtime import offsets
from sqlflow.runtime.delta import once, sinks
from sqlflow.runtime.delta.deltalog import latest_version
from sqlflow.runtime.incremental.remote import is_remote
from sqlflow.runtime.kafka import offset_reset
from sqlflow.runtime.kafka.pacing import Aligner, Pacer
from sqlflow.runtime.kafka.payload import archive_rows
from sqlflow.runtime.kafka.retry import Retry
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
    reset: tuple[str, ...] = ()  # `--reset-offsets`: what it did to each lost partition
    restarts: int = 0  # queries started again after broker trouble


def archive_table(table: SourceTable) -> str:
    return f"{table.schema}.{table.identifier}"


def archive_sink(table: SourceTable) -> Sink:
    """The archive table as a sink, owned by its Kafka source (owner `kafka:<source>`, role
    `archive`, docs/semantics.md "Table ownership"): a create a kill cut short between its
    first commit and its catalog entry is then recognised as this archive's and moved aside on
    restart (`interrupted_create`), where an unowned folder is refused for good. An archive
    created before owners were recorded (no owner) is claimed by its next append, as it was
    appended to before."""
    return Sink(archive_table(table), "append_once", origin=str(table.location),
                owner=f"kafka:{table.key}", role="archive", adopt_unowned=True)


def checkpoint_of(project_dir: Path, table: SourceTable) -> Path:
    return Path(project_dir) / STATE_DIR / "checkpoints" / f"kafka__{table.key}"


class Append:
    """The archive query's `foreachBatch`: one journaled append per micro-batch.

    Picklable for a Spark Connect server, whose Python worker runs the micro-batches
    (docs/deploy.md, "Spark Connect"): it writes on the batch's session, and pickles its
    source control (the pacer) but not this process's session. An alignment group's
    `Aligner` holds the group's queries against each other in one process: such groups are
    refused over Connect (`connect_limits`). The counts of a worker's batches stay there:
    over Connect `_archive_together` reads them from the archive (`remote_counts`).

    >>> import pickle
    >>> a = Append.__new__(Append)
    >>> a.__dict__.update(spark=object(), aligner=None, rows=3)
    >>> pickle.loads(pickle.dumps(a)).__dict__
    {'spark': None, 'aligner': None, 'rows': 3}
    """

    def __init__(self, spark: SparkSession, table: SourceTable, checkpoint: Path,
                 aligner: Aligner | None = None) -> None:
        assert table.kafka is not None
        checkpoint = checkpoint.resolve()  # the same folder for a Connect server's worker
        self.spark, self.table, self.checkpoint = spark, table, checkpoint
        self.sink = archive_sink(table)
        self.journal = once.Journal.open(checkpoint, offsets.next_batch(checkpoint))
        self.pacer = Pacer.of(table.kafka)
        self.aligner = aligner
        self.batches = self.rows = self.malformed = 0

    def __getstate__(self) -> dict[str, Any]:
        assert self.aligner is None  # an alignment group's queries share one process's Aligner
        return {**self.__dict__, "spark": None}

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
            result = sinks.write(records.sparkSession, self.sink, rows,
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


def reader(spark: SparkSession, table: SourceTable, servers: str,
           starting: str | None = None) -> DataFrame:
    """The topic as a stream, from the binding's starting offsets (or `starting`, Spark's
    per-partition JSON, after `--reset-offsets`); a checkpointed query resumes from its own
    offsets and fails, never skips, when they are gone from the broker."""
    assert table.kafka is not None
    read = (spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", servers)
            .option("subscribe", table.kafka.topic)
            .option("startingOffsets", starting or table.kafka.starting_offsets)
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
            *, trigger: str = AVAILABLE_NOW, reset: str | None = None,
            retry: Retry | None = None) -> list[Archived]:
    """Archive every table's topic up to its end now (`available-now`): one after the other,
    but the tables of one `alignment_group` side by side, held within its `max_skew`.
    `reset` (`earliest`/`latest`): where partitions whose offsets are gone from the broker
    start again (`offset_reset`); `retry`: how often broker trouble is waited out."""
    if trigger != AVAILABLE_NOW:
        raise ValueError("archive runs bounded; a live archive is planned")
    done: list[Archived] = []
    ordered = sorted(tables, key=lambda t: (_group(t), t.key))
    for group, members in groupby(ordered, key=_group):
        batch = list(members)
        runs = [batch] if group else [[t] for t in batch]
        for run in runs:
            done.extend(_archive_together(spark, project_dir, run, servers, trigger, reset,
                                          retry or Retry()))
    return done


class _Failed(Exception):
    """One archive query of a run failed: which table, and Spark's error."""

    def __init__(self, table: SourceTable, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.table, self.cause = table, cause


def _archive_together(spark: SparkSession, project_dir: Path, tables: list[SourceTable],
                      servers: str, trigger: str, reset: str | None, retry: Retry) -> list[Archived]:
    aligner = None
    if len(tables) > 1:
        skew = tables[0].kafka.max_skew if tables[0].kafka else None
        assert skew is not None
        aligner = Aligner(max_skew_ms=int(skew.total_seconds() * 1000),
                          members=[t.key for t in tables])
        for t in tables:
            aligner.start(t.key, frontier_ms(spark, t))
    appends: dict[str, Append] = {}
    starting: dict[str, str] = {}
    notes: dict[str, tuple[str, ...]] = {}
    over_connect = is_remote(spark)  # the server's worker runs the batches: counted after
    if over_connect and aligner is not None:
        raise connect_error("connect", "kafka")
    before = {t.key: latest_version(spark, archive_table(t)) for t in tables} if over_connect else {}
    for table in tables:
        checkpoint = checkpoint_of(project_dir, table)
        if reset is not None:
            moved = offset_reset.reset(spark, table, checkpoint, archive_table(table), servers, reset)
            if moved is not None:
                starting[table.key], notes[table.key] = moved
        if table.key not in starting:
            refuse_new_checkpoint(spark, table, checkpoint)
            # asked up front: Spark finds records gone only when its read of them times out
            parts = offset_reset.partitions(spark, table, checkpoint, archive_table(table), servers)
            if parts and any(p.lost for p in parts):
                raise offset_reset.offsets_gone(table, checkpoint, parts)
        appends[table.key] = Append(spark, table, checkpoint, aligner)
    began = time.monotonic()
    restarts = 0
    while True:
        try:
            ended = _run_queries(spark, project_dir, tables, appends, starting, servers,
                                 trigger, aligner)
            break
        except _Failed as failed:
            if offset_reset.is_data_loss(failed.cause):
                gone = checkpoint_of(project_dir, failed.table)
                raise offset_reset.offsets_gone(
                    failed.table, gone, offset_reset.partitions(
                        spark, failed.table, gone, archive_table(failed.table), servers),
                    failed.cause) from None
            delay = retry.after(failed.cause, servers, restarts)
            if delay is None:
                raise failed.cause from None
            restarts += 1
            time.sleep(delay)
            if aligner is not None:  # every query of the group starts again
                for t in tables:
                    aligner.start(t.key, frontier_ms(spark, t))
    for t in tables if over_connect else ():
        a = appends[t.key]
        a.batches, a.rows, a.malformed = remote_counts(spark, archive_table(t), before[t.key])
    return [Archived(t.source_name, t.name, t.kafka.topic if t.kafka else "", a.batches, a.rows,
                     a.malformed, ended.get(t.key, time.monotonic() - began),
                     held_s=a.pacer.held_s + (aligner.held_s.get(t.key, 0.0) if aligner else 0.0),
                     lead_ms=aligner.lead_ms.get(t.key) if aligner else None,
                     reset=notes.get(t.key, ()), restarts=restarts)
            for t in tables for a in [appends[t.key]]]


def remote_counts(spark: SparkSession, name: str, before: int | None) -> tuple[int, int, int]:
    """Appends, records and malformed records the archive `name` got since its Delta version
    `before` (None: it did not exist): what a Spark Connect server's worker archived, whose
    counters this process never sees. Each micro-batch that wrote is one `WRITE` commit in the
    table's history (the archive has no other writer; its creation is a commit of its own);
    the records are counted at both versions (two queries, Delta answers a plain count from
    its statistics; the malformed ones read `_kafka_error`)."""
    after = latest_version(spark, name)
    if after is None:
        return 0, 0, 0
    appends = (spark.sql(f"DESCRIBE HISTORY {quote(name)}")
               .where((F.col("version") > (-1 if before is None else before))
                      & (F.col("operation") == "WRITE")).count())

    def counted(version: int | None) -> tuple[int, int]:
        if version is None:
            return 0, 0
        row = spark.sql(f"SELECT count(*), count_if(_kafka_error IS NOT NULL) FROM {quote(name)} "
                        f"VERSION AS OF {int(version)}").first()
        assert row is not None  # an aggregate has one row
        return int(row[0]), int(row[1])

    (rows0, bad0), (rows1, bad1) = counted(before), counted(after)
    return appends, rows1 - rows0, bad1 - bad0


def _run_queries(spark: SparkSession, project_dir: Path, tables: list[SourceTable],
                 appends: dict[str, Append], starting: dict[str, str], servers: str,
                 trigger: str, aligner: Aligner | None) -> dict[str, float]:
    """Run the tables' archive queries to their end; the seconds each took. A query that
    fails raises `_Failed` once the others are stopped."""
    started = []
    try:
        for table in tables:
            checkpoint = checkpoint_of(project_dir, table)
            began = time.monotonic()
            rows = reader(spark, table, servers, starting.get(table.key))
            query = start_query(rows, appends[table.key], name=f"kafka__{table.key}",
                                checkpoint=checkpoint, trigger=trigger)
            started.append((table, query, began))
        ended: dict[str, float] = {}
        while len(ended) < len(started):
            for table, query, began in started:
                if table.key not in ended and not query.isActive:
                    ended[table.key] = time.monotonic() - began
                    if aligner is not None:
                        aligner.finish(table.key)
                    try:
                        query.awaitTermination()  # raises the query's failure
                    except Exception as exc:
                        raise _Failed(table, exc) from None
            if len(ended) < len(started):
                time.sleep(0.2)
        return ended
    finally:
        for table, query, _ in started:
            if aligner is not None:
                aligner.finish(table.key)
            if query.isActive:
                query.stop()
