"""Delta writes for every `Sink.write` kind, each returning a small frozen `WriteResult`.

`write` is the one door every sqlflow write goes through (model sinks and quarantine tables,
batch and stream): the commit log (docs/design.md §2.5) appends its row there, from the WriteResult.

| write                  | what it does                                                          |
|------------------------|-----------------------------------------------------------------------|
| `overwrite_partitions` | replaces exactly the partitions present in the rows (Delta dynamic partition overwrite); with `replace_where`, replaces every row matching it instead (Delta `replaceWhere`: a backfill range, emptied partitions included) |
| `replace`              | replaces the whole table, schema included (`CREATE OR REPLACE ... AS SELECT`) |
| `view`                 | `CREATE OR REPLACE VIEW` over the SQL                                 |
| `append_once`          | appends, exactly once per `(app_id, batch_id)`: with a journal, a retry finds its earlier commit by the marker in the commit (`sqlflow.runtime.delta.once`); without, Delta's `txnAppId`/`txnVersion` skip a batch id at or below the last one committed |

A table that does not exist is created (its database too), partitioned as the sink says, on
the first write, even when the rows are empty; the files an interrupted create left in its
folder are moved aside first (`sqlflow.runtime.delta.interrupted_create`). sqlflow assumes it
is the only writer of its sink tables: the result is read from the Delta commit the write made (`sqlflow.runtime.delta.deltalog`
reads the log without a Spark job where it can).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sqlflow.errors import SqlflowError
from sqlflow.planning.plan import Sink
from sqlflow.runtime import ownership, plain_tables
from sqlflow.runtime.delta import (
    deltalog,
    interrupted_create,
    local_append,
    once,
    partition_path,
    rebalance,
    retried_create,
)
from sqlflow.runtime.delta.deltalog import TableInfo, quote
from sqlflow.runtime.env_errors import environment_problem


@dataclass(frozen=True)
class PartitionWrite:
    """One partition a write touched: its values, and the rows, files and bytes it added (0
    when emptied)."""

    values: tuple[tuple[str, str | None], ...]
    rows: int | None
    files: int
    bytes: int = 0

    @property
    def spec(self) -> str:
        """`dt=2026-11-01/hour=00`, the Hive-style path of the partition, escaped as Spark
        names its directory (NULL: `__HIVE_DEFAULT_PARTITION__`), as in
        `commitlog.partition_spec` and `filebudget.partition_key` (`partition_path`)."""
        return partition_path.spec(self.values)


@dataclass(frozen=True)
class WriteResult:
    """What one write committed. `version` is the Delta version it made (None: no commit,
    e.g. empty rows or a batch id already written, or a view); `skipped` for that batch id."""

    table: str
    write: str
    version: int | None = None
    rows: int = 0
    files: int = 0
    partitions: tuple[PartitionWrite, ...] = ()
    skipped: bool = False
    # the catalog's description of the table this write created empty and appended to (the
    # local append), for a caller that describes it next; not part of what was committed
    created: deltalog.TableInfo | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class BatchId:
    """Identity of an `append_once` write: the writing query and its micro-batch id, and the
    query's journal when it decides this batch (`once.Journal`; None: Delta's `txn` does)."""

    app_id: str
    batch_id: int
    journal: once.Journal | None = None


def write(spark: SparkSession, sink: Sink, rows: DataFrame | None = None, *, sql: str | None = None,
          replace_where: str | None = None, batch: BatchId | None = None,
          optimize_write: bool = True, known: TableInfo | None = None,
          located: Mapping[str, TableInfo] | None = None, local: bool = False) -> WriteResult:
    """Write `rows` (or, for a `view`, `sql`) to `sink` and say what was committed.

    A partitioned table is written rebalanced by its partition columns (`optimize_write`):
    one shuffle sends each partition's rows to one task (Spark's adaptive execution splits a
    partition too big for one task and merges small ones, to 64 MB parts whatever the session's
    size for joins: `rebalance`), so a write adds about one file per
    partition it touches instead of one per partition per task, and costs less for it (each
    file is a Parquet footer and a statistics pass). Delta's own optimized write gives the same
    files but runs one task per partition: 47 tasks for a 4M-row catch-up micro-batch, about
    1.2 s more on two cores. Routing shapes its own files and turns it off.

    `known`: the table as an earlier write of the same running query found it (`describe`);
    that write made the catalog look-ups, the ownership check and the database, so this one
    skips them (three metastore calls per micro-batch, docs/design.md §2.9).

    `located`: what `deltalog.locate` found of the tables the caller is about to write (a
    table missing from it does not exist): the catalog is not asked again whether the sink
    exists, and a local Delta sink's partition columns and owner are read from its log
    (`deltalog.from_log`); the ownership and partitioning checks run as without it.

    `local`: the rows are few (a small micro-batch's output, a backfill's quarantine rows). A
    journaled `append_once` to a table that exists then hands them to the driver and commits
    them with delta-rs when the table allows it (`local_append.append_frame`): one Spark job
    instead of a write job and a Spark commit, about 0.5 s less on two cores. The commit
    carries the same marker. A `replace` of an existing Delta table of the rows' columns is
    made the same way, as a whole-table overwrite (its schema, partitioning and properties
    kept, as Spark's replace by the same columns keeps them).
    """
    if sink.write != "view" and sink.file_format != "delta":
        if sink.write not in ("replace", "overwrite_partitions") or rows is None:
            raise SqlflowError(f"table `{sink.table}` is configured as `{sink.file_format}`; a "
                               f"`{sink.write}` write needs Delta",
                               hint="set file_format='delta' in the model config")
        written = plain_tables.write(spark, sink, rows, replace_where=replace_where)
        return WriteResult(sink.table, sink.write, rows=written)  # no Delta log: no version
    if sink.write == "view":
        if sql is None:
            raise ValueError("a view sink needs its SQL")
        if sink.owner:
            ownership.check(spark, sink.table, sink.owner, sink.role, action="replace",
                            origin=sink.origin, adopt=sink.adopt_unowned)
            plain_tables.drop_if_table(spark, sink.table)  # dbt drops a table in a view's place
        _ensure_database(spark, sink.table)
        props = f" {ownership.tblproperties(sink.owner, sink.role)}" if sink.owner else ""
        spark.sql(f"CREATE OR REPLACE VIEW {quote(sink.table)}{props} AS {sql}")
        return WriteResult(sink.table, "view")
    if rows is None:
        raise ValueError(f"a `{sink.write}` sink needs rows")
    info = known if known is not None else _existing(spark, sink, located)
    if known is None:
        # docs/semantics.md, "Table ownership"; state tables have reserved `__sqlflow_` names
        if sink.owner and info is not None and sink.role != "state":
            ownership.check(spark, sink.table, sink.owner, sink.role, info=info,
                            action=_ACTIONS[sink.write], origin=sink.origin,
                            adopt=sink.adopt_unowned)
            if info.owner is None and info.format == "delta" and sink.write != "replace":
                plain_tables.claim(spark, sink)  # adopted (dbt built it): record the owner
        if info is not None and info.format != "delta":  # `replace` only (_existing): dbt-spark
            plain_tables.drop(spark, sink.table, info)   # drops a non-Delta relation too
            info = None
        if info is None:  # a create: the folder may hold an interrupted create's files
            _ensure_database(spark, sink.table)
            interrupted_create.clear(spark, sink.table, sink.owner, sink.role)
    before = None if info is None else deltalog.latest_version(spark, sink.table, info.location)
    if sink.write == "append_once" and batch is not None and batch.journal is not None:
        earlier = once.done(spark, sink.table, batch, before, info.location if info else None)
        if earlier is not None:  # a retry: the batch is already in the table
            assert info is not None  # found in the table: it exists
            return dataclasses.replace(committed(spark, sink, earlier, info.location), skipped=True)
    created = None  # the new table's description, when created here
    if local and sink.write == "append_once" and batch is not None and batch.journal is not None:
        if info is None:  # created empty first, as `_dispatch` creates it, then appended to
            try:
                retried_create.create(spark, _create(rows.limit(0), sink), sink.table, sink.owner, sink.role)
            except AnalysisException as exc:
                raise _write_failed(sink, exc) from exc
            info = created = deltalog.describe(spark, sink.table)
        left = local_append.append_frame(spark, info.location, rows,
                                         user_metadata=once.marker(batch.app_id, batch.batch_id))
        if left is None:  # appended
            return dataclasses.replace(_result(spark, sink, before, info.location), created=created)
        rows = left  # Spark writes them, computed once
    if local and sink.write == "replace" and info is not None and info.format == "delta":
        left = local_append.append_frame(spark, info.location, rows, replace=True)
        if left is None:  # replaced
            return _result(spark, sink, before, info.location)
        rows = left
    try:
        if optimize_write and sink.partition_by:
            rows = rebalance.by_partition(rows, sink.partition_by)
        _dispatch(sink, rows, info is None, replace_where, batch)
    except AnalysisException as exc:
        raise _write_failed(sink, exc) from exc
    return _result(spark, sink, before, info.location if info is not None else None)


def _write_failed(sink: Sink, exc: AnalysisException) -> SqlflowError:
    """The error a create or write of `sink` that Spark refused raises: the machine's problem
    and its fix, or Spark's first line and how to rebuild the table."""
    problem = environment_problem(exc)
    if problem is not None:  # the machine, not the columns: dropping the table would not help
        return SqlflowError(f"cannot write `{sink.table}`: {problem.message}", hint=problem.fix)
    return SqlflowError(f"cannot write `{sink.table}`: {str(exc).splitlines()[0]}",
                        hint="if the model's columns changed, drop the table "
                             f"(`DROP TABLE {sink.table}`) and run again")


def _result(spark: SparkSession, sink: Sink, before: int | None, location: str | None) -> WriteResult:
    """What the write that found the table at version `before` committed."""
    if location is None:
        location = deltalog.describe(spark, sink.table).location
    after = deltalog.latest_version(spark, sink.table, location)
    if after is None or after == before:  # Delta made no commit: nothing to write, or a replay
        return WriteResult(sink.table, sink.write, skipped=sink.write == "append_once")
    return committed(spark, sink, after, location)


def _dispatch(sink: Sink, rows: DataFrame, new: bool, replace_where: str | None,
              batch: BatchId | None) -> None:
    table = sink.table
    if sink.write == "replace":
        _create(rows, sink).createOrReplace()
    elif sink.write == "overwrite_partitions":
        # a create that found its own table (`retried_create`: it ran twice) overwrites again
        if new and retried_create.create(rows.sparkSession, _create(rows, sink), table, sink.owner, sink.role):
            return
        if replace_where:
            rows.writeTo(table).overwrite(F.expr(replace_where))
        else:
            rows.writeTo(table).overwritePartitions()
    elif sink.write == "append_once":
        if batch is None:
            raise ValueError("an append_once write needs its BatchId")
        if new:
            retried_create.create(rows.sparkSession, _create(rows.limit(0), sink), table, sink.owner, sink.role)
        rows.writeTo(table).options(**once.options(batch)).append()
    else:
        raise ValueError(f"unknown sink write `{sink.write}`")


_ACTIONS = {"replace": "replace", "overwrite_partitions": "overwrite", "append_once": "append to"}


def _create(rows: DataFrame, sink: Sink):
    writer = rows.writeTo(sink.table).using("delta")
    for key, value in (ownership.properties(sink.owner, sink.role) if sink.owner else {}).items():
        writer = writer.tableProperty(key, value)
    if sink.partition_by:
        writer = writer.partitionedBy(*[F.col(c) for c in sink.partition_by])
    return writer


def committed(spark: SparkSession, sink: Sink, version: int, location: str | None = None) -> WriteResult:
    """The WriteResult of Delta commit `version` of the sink's table, read from its log: rows,
    files and bytes added, and every partition the commit added to or removed from."""
    rows: dict[tuple, int | None] = {}
    files: dict[tuple, int] = {}
    sizes: dict[tuple, int] = {}
    for kind, action in _commit_actions(spark, sink.table, version, location):
        values = action.get("partitionValues") or {}
        key = tuple((c, values.get(c)) for c in sink.partition_by)
        rows.setdefault(key, 0)
        files.setdefault(key, 0)
        sizes.setdefault(key, 0)
        if kind == "add":
            files[key] += 1
            sizes[key] += int(action.get("size") or 0)
            count, so_far = _records(action), rows[key]
            rows[key] = None if count is None or so_far is None else so_far + count
    partitions = tuple(PartitionWrite(k, rows[k], files[k], sizes[k]) for k in sorted(rows, key=str) if k)
    known = [r for r in rows.values() if r is not None]
    return WriteResult(sink.table, sink.write, version, rows=sum(known), files=sum(files.values()),
                       partitions=partitions)


def _commit_actions(spark: SparkSession, table: str, version: int,
                    location: str | None = None) -> list[tuple[str, dict]]:
    """The data-changing add and remove actions of one commit, from `_delta_log/<v>.json`
    (`location`: the table's folder, looked up when not given)."""
    if location is None:
        location = deltalog.describe(spark, table).location
    assert location is not None  # a Delta table has a location
    out = []
    for _, action in deltalog.commit_actions(spark, location, [version]):
        for kind in ("add", "remove"):
            if kind in action and action[kind].get("dataChange", True):
                out.append((kind, action[kind]))
    return out


def _records(add: dict) -> int | None:
    stats = add.get("stats")
    return json.loads(stats).get("numRecords") if stats else None


def _existing(spark: SparkSession, sink: Sink,
              located: Mapping[str, TableInfo] | None = None) -> TableInfo | None:
    """The table as the catalog describes it before a write (None: not there yet); refuses a
    table that is not Delta, or is partitioned differently from the sink (unless the write
    replaces it). `located`: `deltalog.locate`'s answer for it (`write`)."""
    detail = None
    if located is not None:
        found = located.get(sink.table.lower())
        if found is None:
            return None
        if found.format == "delta":  # partition columns and owner from the log, when local
            detail = deltalog.from_log(spark, found.location)
    if detail is None:
        if located is None and not spark.catalog.tableExists(sink.table):
            return None
        detail = deltalog.describe(spark, sink.table)
    if detail.format != "delta" and sink.write == "replace":
        return detail  # replaced by a Delta table once its owner is checked, as dbt-spark does
    if detail.format != "delta":
        raise SqlflowError(f"table `{sink.table}` exists but is `{detail.format or 'a view'}`, not Delta",
                           hint=f"drop it (`DROP TABLE {sink.table}`) and run again")
    existing = detail.partition_columns
    if sink.write != "replace" and existing != sink.partition_by:
        raise SqlflowError(
            f"table `{sink.table}` is partitioned by ({', '.join(existing)}) but its model says "
            f"({', '.join(sink.partition_by)})",
            hint=f"drop the table (`DROP TABLE {sink.table}`) and run the model again, "
                 "or restore its partition_by")
    return detail


def _ensure_database(spark: SparkSession, table: str) -> None:
    if "." in table:
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {quote(table.rsplit('.', 1)[0])}")
