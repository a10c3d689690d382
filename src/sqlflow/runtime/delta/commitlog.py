"""The commit log (docs/design.md §2.5): one Delta table every sqlflow write appends to.

One row per event on one output partition of one table:

| kind     | meaning                                                                         |
|----------|---------------------------------------------------------------------------------|
| `write`  | rows were written to the partition (stream micro-batch, backfill, dbt run)      |
| `commit` | the partition is complete and ready for readers (partition commit, mark-ready)  |
| `dirty`  | the partition may differ from the backfill (docs/design.md §2.7): `repair` must rewrite it |
| `repair` | the batch plan rewrote the partition; earlier dirty/provisional rows are settled |
| `refresh`| `--full-refresh` dropped the table: its earlier rows stay as history, no longer count |

A partition is written as Hive-style `dt=2026-11-01/hour=3` (its columns in the table's
partition order, escaped as Spark names the directory: `sqlflow.runtime.delta.partition_path`; `""`
for an unpartitioned table). `inputs` and `dim_partitions` are JSON
objects (input relation -> Delta version or stream offsets; dimension relation -> the
partitions used with row counts). Readers: dimension readiness (`ready_partitions`),
`sqlflow status` and `sqlflow repair` (`open_partitions`), downstream schedulers.

Appends from a stream are exactly once per (query, batch id), like every other stream write:
through the query's journal (`sqlflow.runtime.delta.once`), else Delta's `txnAppId`/`txnVersion`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, LongType, StringType, StructField, StructType, TimestampType

from sqlflow.planning.plan import COMMIT_LOG
from sqlflow.runtime import literal_rows
from sqlflow.runtime.delta import (
    commitlog_ready,
    deltalog,
    interrupted_create,
    local_append,
    once,
    partition_path,
    small_files,
)
from sqlflow.runtime.delta.sinks import BatchId, WriteResult

Kind = Literal["write", "commit", "dirty", "repair", "refresh"]
WriteMode = Literal["stream", "batch", "dbt", "manual", "marker"]

SCHEMA = StructType([
    StructField("table", StringType(), False),
    StructField("partition", StringType(), False),
    StructField("kind", StringType(), False),
    StructField("mode", StringType(), False),
    StructField("model", StringType(), True),
    StructField("run_id", StringType(), True),
    StructField("batch_id", LongType(), True),
    StructField("inputs", StringType(), True),
    StructField("dim_partitions", StringType(), True),
    StructField("rows", LongType(), True),
    StructField("late", LongType(), True),
    StructField("quarantined", LongType(), True),
    StructField("dropped", LongType(), True),
    StructField("provisional", BooleanType(), False),
    StructField("reason", StringType(), True),
    StructField("committed_at", TimestampType(), False),
])


@dataclass(frozen=True)
class Entry:
    """One commit-log row; `committed_at` defaults to now (UTC)."""

    table: str
    partition: str
    kind: Kind
    mode: WriteMode
    model: str | None = None
    run_id: str | None = None
    batch_id: int | None = None
    inputs: Mapping[str, Any] = field(default_factory=dict)
    dim_partitions: Mapping[str, Any] = field(default_factory=dict)
    rows: int | None = None
    late: int | None = None
    quarantined: int | None = None
    dropped: int | None = None
    provisional: bool = False
    reason: str | None = None
    committed_at: datetime | None = None

    def as_row(self, now: datetime) -> tuple:
        return (self.table.lower(), self.partition, self.kind, self.mode, self.model, self.run_id,
                self.batch_id, _json(self.inputs), _json(self.dim_partitions), self.rows,
                self.late, self.quarantined, self.dropped, self.provisional, self.reason,
                self.committed_at or now)


@dataclass(frozen=True)
class PartitionState:
    """A partition `sqlflow repair` must rewrite: dirty, provisional or both, and why."""

    table: str
    partition: str
    dirty: bool
    provisional: bool
    reasons: tuple[str, ...]
    since: datetime


def partition_spec(values: Mapping[str, Any]) -> str:
    """`{"dt": date(2026, 11, 1), "hour": 3}` -> `dt=2026-11-01/hour=3` (the given order),
    each level escaped as Spark names its directory (`partition_path`)."""
    return partition_path.spec(values)


def parse_partition(spec: str) -> dict[str, str | None]:
    """`dt=2026-11-01/hour=3` -> `{"dt": "2026-11-01", "hour": "3"}`; `""` -> `{}`; values
    unescaped, the default (NULL) partition None (`partition_path.parse`)."""
    return partition_path.parse(spec)


def write_entries(result: WriteResult, *, mode: WriteMode, model: str | None = None,
                  **fields: Any) -> list[Entry]:
    """One `write` entry per partition a sink write touched (one for an unpartitioned table);
    `fields` (run_id, batch_id, inputs, provisional, ...) are the same on each."""
    parts = result.partitions or ()
    if not parts:
        return [Entry(result.table, "", "write", mode, model, rows=result.rows, **fields)]
    return [Entry(result.table, p.spec, "write", mode, model, rows=p.rows, **fields) for p in parts]


# Delta writes a checkpoint of a table's log every `checkpointInterval` commits, inside the
# commit that reaches it (a state rebuild, about a second here). Every stream micro-batch of
# every model appends one commit here; a checkpoint every 100 of them instead of Delta's 10
# keeps that second off 9 of 10 micro-batches, and a reader replays at most 99 small commits.
CHECKPOINT_INTERVAL = 100


def ensure(spark: SparkSession, table: str = COMMIT_LOG) -> None:
    """Create the commit log (and its schema) if it does not exist."""
    if spark.catalog.tableExists(table):
        return
    if "." in table:
        spark.sql(f"CREATE SCHEMA IF NOT EXISTS {table.rsplit('.', 1)[0]}")
    interrupted_create.clear(spark, table, "", "commitlog")  # a create a kill cut short
    columns = ", ".join(f"`{f.name}` {f.dataType.simpleString().upper()}"
                        f"{'' if f.nullable else ' NOT NULL'}" for f in SCHEMA.fields)
    spark.sql(f"CREATE TABLE IF NOT EXISTS {table} ({columns}) USING delta "
              f"TBLPROPERTIES ('delta.checkpointInterval' = '{CHECKPOINT_INTERVAL}', "
              "'sqlflow.model' = '', 'sqlflow.role' = 'commitlog')")


def append(spark: SparkSession, entries: Iterable[Entry], *, batch: BatchId | None = None,
           table: str = COMMIT_LOG, location: str | None = None) -> int:
    """Append `entries`; with `batch` a replay of the same batch id adds nothing (the app
    `<app>__commit_log`, exactly once as `sqlflow.runtime.delta.once` says). Returns the number of
    rows appended (0 for a replay). `location`: the log's folder (`folder`), when the caller
    holds it already."""
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    rows = [e.as_row(now) for e in entries]
    if not rows:
        return 0
    if location is None:
        location = folder(spark, table)
    if batch is not None:
        batch = dataclasses.replace(batch, app_id=f"{batch.app_id}__commit_log")
        if batch.journal is not None:
            before = deltalog.latest_version(spark, table, location)
            if once.done(spark, table, batch, before, location) is not None:
                return 0
    # written from this process when the log is a local folder (20-30 ms, not a 0.5 s Spark
    # job), unless Delta's `txn` must decide a replay (a batch older than the query's journal)
    if batch is None or batch.journal is not None:
        mark = once.marker(batch.app_id, batch.batch_id) if batch is not None else None
        done = local_append.append(spark, location, rows, SCHEMA, user_metadata=mark)
        if done is not None:
            small_files.appended(*done)  # each append is a small file: merged every so often
            return len(rows)
    # one file per append: a few rows spread over `spark.default.parallelism` tasks made as
    # many tiny files, which every reader of the log (readiness, status) then opens; the rows
    # are literals in the JVM, no Python worker task (`literal_rows`)
    writer = literal_rows.frame(spark, rows, SCHEMA).coalesce(1).writeTo(table)
    if batch is not None:
        writer = writer.options(**once.options(batch))
    writer.append()
    return len(rows)


# (warehouse, log) -> the local folder this process appended to: a backfill appends once per
# model and per routed target, a stream query once per start, and the existence check and the
# location are two catalog look-ups (0.2 s together); a folder whose `_delta_log` is gone (the
# log dropped) is asked again
_FOLDERS: dict[tuple[str, str], str] = {}


def folder(spark: SparkSession, table: str = COMMIT_LOG) -> str | None:
    """The log's folder (created first if missing; a local one found once a process), None
    over Spark Connect (after `ensure`): where `append` writes without a Spark job."""
    key = (spark.conf.get("spark.sql.warehouse.dir", "") or "", table.lower())
    known = _FOLDERS.get(key)
    if known is not None and deltalog.local_log(spark, known) is not None:
        return known
    ensure(spark, table)
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        return None  # Spark appends: no location needed
    found = deltalog.describe(spark, table).location
    if found is not None and deltalog.local_log(spark, found) is not None:
        _FOLDERS[key] = found
    return found


def read(spark: SparkSession, table: str = COMMIT_LOG) -> DataFrame:
    """The log's rows that count (an empty frame with the log's schema when it does not exist
    yet): a table's rows up to its latest `refresh` row are history, left out, so a table
    rebuilt by `--full-refresh` starts with fresh commit state (nothing committed, nothing
    dirty)."""
    if not spark.catalog.tableExists(table):
        return spark.createDataFrame([], SCHEMA)
    log = spark.table(table)
    refreshed = (log.where(F.col("kind") == "refresh").groupBy("table")
                 .agg(F.max("committed_at").alias("_refreshed_at")))
    return (log.join(F.broadcast(refreshed), "table", "left")
            .where(F.col("_refreshed_at").isNull() | (F.col("committed_at") > F.col("_refreshed_at")))
            .select(*log.columns))


def refreshed(spark: SparkSession, tables: Iterable[str], model: str, *,
              table: str = COMMIT_LOG) -> int:
    """Record that `tables` were dropped to be rebuilt (`--full-refresh`): from now on their
    earlier rows no longer count (`read`). Returns the rows appended."""
    return append(spark, [Entry(t, "", "refresh", "stream", model, reason="full refresh")
                          for t in tables], table=table)


def ready_partitions(spark: SparkSession, data_table: str, *, table: str = COMMIT_LOG) -> set[str]:
    """The partitions of `data_table` with a `commit` row: READY(dim) of docs/design.md §2.3."""
    return ready_partitions_of(spark, [data_table], table=table)[data_table.lower()]


def ready_partitions_of(spark: SparkSession, data_tables: Sequence[str], *,
                        table: str = COMMIT_LOG) -> dict[str, set[str]]:
    """`ready_partitions` of each of `data_tables` (keys lower-cased), in one read of the log:
    its own files when they are local (`commitlog_ready`, no Spark job), else Spark."""
    names = sorted({t.lower() for t in data_tables})
    if spark.catalog.tableExists(table):
        found = commitlog_ready.ready_partitions_of(spark, deltalog.describe(spark, table).location, names)
        if found is not None:
            return found
    return ready_partitions_read(spark, names, table=table)


def ready_partitions_read(spark: SparkSession, data_tables: Sequence[str], *,
                          table: str = COMMIT_LOG) -> dict[str, set[str]]:
    """`ready_partitions_of` read by Spark (`read`): a log the driver cannot read itself."""
    names = sorted({t.lower() for t in data_tables})
    rows = (read(spark, table).where(F.col("table").isin(names) & (F.col("kind") == "commit"))
            .select("table", "partition").distinct().collect())
    found: dict[str, set[str]] = {t: set() for t in names}
    for r in rows:
        found[r["table"]].add(r["partition"])
    return found


def open_partitions(spark: SparkSession, tables: Sequence[str] | None = None, *,
                    table: str = COMMIT_LOG) -> list[PartitionState]:
    """Partitions that are dirty or provisional and not settled since.

    A partition is settled at its latest `repair` row or non-provisional batch/dbt `write`
    (both rewrite it with the batch plan). After that, a `dirty` row makes it dirty, and a
    provisional `write` (a stream chose an earlier dimension partition) makes it provisional.
    """
    log = read(spark, table)
    if tables:
        log = log.where(F.col("table").isin([t.lower() for t in tables]))
    settles = (F.col("kind") == "repair") | (
        (F.col("kind") == "write") & F.col("mode").isin("batch", "dbt") & ~F.col("provisional"))
    settled = (log.where(settles).groupBy("table", "partition")
               .agg(F.max("committed_at").alias("settled_at")))
    flagged = log.where((F.col("kind") == "dirty")
                        | ((F.col("kind") == "write") & F.col("provisional")))
    rows = (flagged.join(settled, ["table", "partition"], "left")
            .where(F.col("settled_at").isNull() | (F.col("committed_at") > F.col("settled_at")))
            .groupBy("table", "partition")
            .agg(F.max(F.col("kind") == "dirty").alias("dirty"),
                 F.max((F.col("kind") == "write") & F.col("provisional")).alias("provisional"),
                 F.sort_array(F.collect_set(F.coalesce("reason", F.col("kind")))).alias("reasons"),
                 F.min("committed_at").alias("since"))
            .orderBy("table", "partition").collect())
    return [PartitionState(r["table"], r["partition"], bool(r["dirty"]), bool(r["provisional"]),
                           tuple(r["reasons"]), r["since"]) for r in rows]


def _json(value: Mapping[str, Any]) -> str | None:
    return json.dumps(value, sort_keys=True, default=str) if value else None
