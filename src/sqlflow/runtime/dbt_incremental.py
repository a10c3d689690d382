"""An `incremental` model's run, as dbt-spark's incremental materialization runs it.

`choose` decides per run, as dbt does (docs/semantics.md, "Incremental models"): without a
table at the model's relation, with a view there, or on a full refresh (`--full-refresh`,
unless the model says `full_refresh: false`), the model is built from its plain SQL and
replaces the relation (dbt's `create_table_as`); otherwise the run reads the SQL rendered with
`is_incremental()` true and `write` applies the model's strategy to the existing table with
the statement dbt-spark issues, after the model's `on_schema_change` compared the new rows'
columns with the table's (`sqlflow.runtime.schema_change`):

| strategy | statement |
|---|---|
| `append` | `INSERT INTO TABLE t SELECT <t's columns> FROM new` |
| `insert_overwrite` | `INSERT OVERWRITE TABLE t [PARTITION (p, ...)] SELECT <t's columns> FROM new`, with Spark's dynamic partition overwrite when partitioned |
| `merge` | `MERGE INTO t USING new ON <unique_key matches and incremental_predicates, else FALSE> WHEN MATCHED THEN UPDATE SET <columns> WHEN NOT MATCHED THEN INSERT *` |

The table must be the model's own, or one `dbt run` built for it when the operator passed
`--adopt-dbt-tables` (its owner is then recorded), as for every write (`ownership`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from sqlflow.errors import Location, SqlflowError
from sqlflow.planning.plan import BatchPlan
from sqlflow.runtime import ownership, plain_tables, schema_change
from sqlflow.runtime.delta import deltalog
from sqlflow.runtime.delta.deltalog import quote
from sqlflow.runtime.delta.sinks import WriteResult, committed

_VIEW = "__sqlflow_incremental_rows"
_OVERWRITE_MODE = "spark.sql.sources.partitionOverwriteMode"


def choose(spark: SparkSession, plan: BatchPlan, *, full_refresh: bool) -> BatchPlan:
    """The plan as this run executes it: `plan.incremental` is kept (with its SQL as the
    plan's) only when the run is incremental; otherwise the model's plain SQL replaces its
    relation. A plan of another materialization is returned as it is."""
    run = plan.incremental
    if run is None:
        return plan
    refresh = full_refresh if run.full_refresh is None else run.full_refresh
    table = plan.sink.table
    info = deltalog.describe(spark, table) if spark.catalog.tableExists(table) else None
    if info is None or not info.format or refresh:  # none, a view, or a full refresh
        return dataclasses.replace(plan, sink=dataclasses.replace(plan.sink, write="replace"),
                                   incremental=None)
    return dataclasses.replace(plan, sql=run.sql)


def refuse_range(plans: Sequence[Any]) -> None:
    """A `--start/--end` run of an `incremental` model is refused before anything runs.

    dbt has no date-range run for it (`--event-time-start/--event-time-end` apply to
    `microbatch` models only): `dbt run` runs it incrementally, `dbt run --full-refresh`
    rebuilds it whole. A range rebuild from its plain SQL would be neither: it replaces the
    range's rows of a table whose other rows the incremental runs wrote (appended duplicates,
    merged history), so the table would match neither dbt command.
    """
    found = [p for p in plans if getattr(p, "incremental", None) is not None]
    if found:
        names = " ".join(p.model for p in found)
        raise SqlflowError(
            f"model `{found[0].model}` is `incremental`: a --start/--end range does not apply to "
            "it (dbt runs an incremental model incrementally, or rebuilds it whole with "
            "--full-refresh; dbt's event-time range is for `microbatch` models only)",
            location=Location(found[0].path),
            hint=f"leave it out of the range run (`--exclude {names}`), then run it without "
                 "--start/--end (incremental, as `dbt run`) or with --full-refresh")


def write(spark: SparkSession, plan: BatchPlan, rows: DataFrame) -> WriteResult:
    """Apply the incremental run's strategy to the model's existing table (`choose` kept it)."""
    run = plan.incremental
    assert run is not None  # `choose` keeps it only for an incremental run
    sink = plan.sink
    info = deltalog.describe(spark, sink.table)
    if sink.owner:  # docs/semantics.md, "Table ownership" (checked again: the table is read)
        ownership.check(spark, sink.table, sink.owner, sink.role, info=info, action="write into",
                        origin=sink.origin, adopt=sink.adopt_unowned)
        if info.owner is None:  # adopted (dbt built it): record the owner
            plain_tables.claim(spark, sink)
    try:  # dbt-spark's process_schema_changes, before the strategy's statement
        schema_change.apply(spark, sink.table, rows, run.on_schema_change, info.format or "")
    except ValueError as exc:
        raise SqlflowError(f"model `{plan.model}`: {exc}", location=Location(plan.path),
                           hint='docs/semantics.md, "Incremental models"') from None
    delta = info.format == "delta"
    before = deltalog.latest_version(spark, sink.table, info.location) if delta else None
    columns = spark.table(sink.table).columns
    rows.createOrReplaceTempView(_VIEW)
    try:
        if run.strategy == "merge":
            spark.sql(merge_sql(sink.table, columns, run.unique_key, run.predicates,
                                update_columns(columns, run.update_columns, run.exclude_columns)))
        else:
            _insert(spark, sink.table, columns, info.partition_columns,
                    overwrite=run.strategy == "insert_overwrite")
        count = None if delta else spark.table(_VIEW).count()
    finally:
        spark.catalog.dropTempView(_VIEW)
    if not delta:  # no Delta log: the rows the statement read
        return WriteResult(sink.table, run.strategy, rows=count or 0)
    after = deltalog.latest_version(spark, sink.table, info.location)
    if after is None or after == before:
        return WriteResult(sink.table, run.strategy)
    return dataclasses.replace(committed(spark, sink, after, info.location), write=run.strategy)


def _insert(spark: SparkSession, table: str, columns: list[str], partition_by: tuple[str, ...],
            *, overwrite: bool) -> None:
    select = ", ".join(quote(c) for c in columns)
    if not overwrite:
        spark.sql(f"INSERT INTO TABLE {quote(table)} SELECT {select} FROM {_VIEW}")
        return
    parts = f" PARTITION ({', '.join(quote(c) for c in partition_by)})" if partition_by else ""
    before = spark.conf.get(_OVERWRITE_MODE)
    if partition_by:  # dbt-spark sets it for a partitioned insert_overwrite
        spark.conf.set(_OVERWRITE_MODE, "DYNAMIC")
    try:
        spark.sql(f"INSERT OVERWRITE TABLE {quote(table)}{parts} SELECT {select} FROM {_VIEW}")
    finally:
        if before is None:
            spark.conf.unset(_OVERWRITE_MODE)
        else:
            spark.conf.set(_OVERWRITE_MODE, before)


def update_columns(columns: list[str], update: tuple[str, ...], exclude: tuple[str, ...]) -> list[str]:
    """The columns a merge updates, as dbt's `get_merge_update_columns`: `merge_update_columns`,
    else the table's columns less `merge_exclude_columns` (case-insensitive), else all.

    >>> update_columns(["id", "v", "at"], (), ("AT",)), update_columns(["id", "v"], ("v",), ())
    (['id', 'v'], ['v'])
    """
    if update:
        return list(update)
    dropped = {c.lower() for c in exclude}
    return [c for c in columns if c.lower() not in dropped]


def merge_sql(table: str, columns: list[str], unique_key: tuple[str, ...],
              predicates: tuple[str, ...], updates: list[str]) -> str:
    """dbt-spark's `spark__get_merge_sql` over the new rows' view; identifiers quoted.

    >>> print(merge_sql("dw.t", ["id", "v"], ("id",), (), ["id", "v"]))
    MERGE INTO `dw`.`t` AS DBT_INTERNAL_DEST USING __sqlflow_incremental_rows AS DBT_INTERNAL_SOURCE ON DBT_INTERNAL_SOURCE.`id` = DBT_INTERNAL_DEST.`id` WHEN MATCHED THEN UPDATE SET `id` = DBT_INTERNAL_SOURCE.`id`, `v` = DBT_INTERNAL_SOURCE.`v` WHEN NOT MATCHED THEN INSERT *
    """
    keys = [f"DBT_INTERNAL_SOURCE.{quote(k)} = DBT_INTERNAL_DEST.{quote(k)}" for k in unique_key]
    match = [*predicates, *(keys or ["FALSE"])]  # no unique_key: every row is inserted
    sets = ", ".join(f"{quote(c)} = DBT_INTERNAL_SOURCE.{quote(c)}" for c in updates or columns)
    return (f"MERGE INTO {quote(table)} AS DBT_INTERNAL_DEST USING {_VIEW} AS DBT_INTERNAL_SOURCE "
            f"ON {' AND '.join(match)} WHEN MATCHED THEN UPDATE SET {sets} "
            "WHEN NOT MATCHED THEN INSERT *")
