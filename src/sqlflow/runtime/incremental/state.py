"""Copied older rows of the `incremental` stream strategy (docs/design.md §2.9).

A join of two streams by the delta rule, `ΔL ⋈ (R_old ∪ ΔR) ∪ L_old ⋈ ΔR`, needs each joined
input's rows of EARLIER micro-batches. Most are read from the input table itself
(`sqlflow.runtime.incremental.older`); the rows of a micro-batch that ended inside a commit, and every
row of an outer join's inputs, are copied to one Delta table per model and input,
`<sink schema>.__sqlflow_state__<model>__<db>__<table>`: the input's clean rows (every
column, unchanged) plus `__sqlflow_batch`, the micro-batch id that brought them.

- `append` adds a micro-batch's clean rows, idempotent per batch id (app id: the state
  table's name), through the query's journal (`sqlflow.runtime.delta.once`) like every other
  append of the query: a replayed batch adds nothing twice.
- `older` reads the rows of batches strictly before `batch_id` (and after a given one),
  pruned to an event-time range. Filtering on the batch column makes a replay correct even
  when the crash came after the state append: a batch never sees its own rows as old.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from sqlflow.identifiers import quote as quote_ident
from sqlflow.runtime import ownership
from sqlflow.runtime.delta import deltalog, interrupted_create, local_append, once, retried_create
from sqlflow.runtime.delta.sinks import BatchId, quote

BATCH_COLUMN = "__sqlflow_batch"


def state_table(sink_table: str, model: str, relation: str) -> str:
    """`dw.__sqlflow_state__samples__ods__imps`: next to the sink, one per model and input."""
    schema = sink_table.rsplit(".", 1)[0] + "." if "." in sink_table else ""
    return f"{schema}__sqlflow_state__{model}__" + relation.replace(".", "__").replace("`", "")


def append(spark: SparkSession, table: str, rows: DataFrame, batch: BatchId,
           indexed: tuple[str, ...] = (), owner: str = "", location: str | None = None,
           local: bool = False) -> str:
    """Add one micro-batch's clean rows (`batch`: app id = `table`, the micro-batch id, the
    query's journal); a batch already appended is skipped (`once.done`; without a journal, an
    older checkpoint's batch, Delta's `txn`). Returns the table's folder: a running query
    passes it back as `location` for its next append, which then asks the catalog nothing
    (the table exists, and only this query writes it).

    A plain Delta append (not `sinks.write`): state tables are internal, so the commit is not
    read back for a WriteResult (saves a few Spark jobs a batch).
    A new table collects file statistics for the batch column and `indexed` (the input's
    event-time columns, what `older` and padding filter on) only: statistics on every column
    cost a third of the write, and nothing else is ever filtered on.

    `local`: the rows are few; a journaled append hands them to the driver and commits them
    with delta-rs where it can (`local_append.append_frame`, as `sinks.write(local=True)`).
    """
    tagged = rows.withColumn(BATCH_COLUMN, F.lit(batch.batch_id).cast("bigint"))
    if location is None and not spark.catalog.tableExists(table):
        _ensure_schema(spark, table)
        names = {c.lower(): c for c in tagged.columns}
        stats = ",".join(quote_ident(names[c.lower()]) for c in dict.fromkeys([BATCH_COLUMN, *indexed])
                         if c.lower() in names)
        writer = (tagged.limit(0).writeTo(table).using("delta")
                  .tableProperty("delta.dataSkippingStatsColumns", stats))
        for key, value in ownership.properties(owner, "state").items() if owner else ():
            writer = writer.tableProperty(key, value)
        interrupted_create.clear(spark, table, owner, "state")  # a create a kill cut short
        retried_create.create(spark, writer, table, owner, "state")  # empty: found is as good
    if location is None:
        location = deltalog.describe(spark, table).location
        assert location is not None  # a Delta table has a folder
    if batch.journal is not None:
        before = deltalog.latest_version(spark, table, location)
        if once.done(spark, table, batch, before, location) is not None:
            return location  # a replay: the batch's rows are in the table
        if local:
            left = local_append.append_frame(spark, location, tagged,
                                             user_metadata=once.marker(batch.app_id, batch.batch_id))
            if left is None:
                return location
            tagged = left  # Spark appends them, computed once
    tagged.writeTo(table).options(**once.options(batch)).append()
    return location


def _ensure_schema(spark: SparkSession, table: str) -> None:
    if "." in table:
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {quote(table.rsplit('.', 1)[0])}")


def empty(spark: SparkSession, schema: StructType) -> DataFrame:
    """No rows, as Spark's optimizer sees them: `LIMIT 0` becomes an empty local relation,
    which removes a join or union branch over it (a bare `createDataFrame([])` is an RDD scan
    Spark cannot see into, so the other side of such a join would still be read and shuffled)."""
    return spark.createDataFrame([], schema).limit(0)


def older(spark: SparkSession, table: str, schema: StructType, batch_id: int,
          keep: Column | None, after: int = -1, exists: bool | None = None) -> DataFrame:
    """Rows of batches after `after` and before `batch_id` with the input's own columns; `keep`
    prunes them (None: no pruning). An input with no state yet has no older rows. `exists`:
    whether the table exists, when the caller knows (None: ask the catalog)."""
    if not (spark.catalog.tableExists(table) if exists is None else exists):
        return empty(spark, schema)
    batch = F.col(BATCH_COLUMN)
    rows = spark.table(table).where((batch > F.lit(after)) & (batch < F.lit(batch_id)))
    if keep is not None:
        rows = rows.where(keep)
    return input_columns(rows, schema)


def input_columns(rows: DataFrame, schema: StructType) -> DataFrame:
    """`rows` with the input's own columns (`schema`), in its order: without `BATCH_COLUMN`
    or anything else a step added."""
    return rows.select(*[F.col(quote_ident(f.name)) for f in schema.fields])


def drop(spark: SparkSession, table: str) -> None:
    spark.sql(f"DROP TABLE IF EXISTS {quote(table)}")
