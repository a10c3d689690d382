"""Rows appended to a local Delta table from this process, without a Spark job.

A Spark append of a handful of rows is a job, a Parquet file and a Delta commit: about 0.5 s
on the two-core machine, and sqlflow's bookkeeping makes many of them (a commit-log append
per model write, per routed target and per partition commit of a backfill, one per stream
micro-batch). delta-rs (`deltalake.write_deltalake`, a maintained Delta writer; docs/stack.md)
makes the same append, one Parquet file per partition and one commit, in 20-30 ms. Two
callers: `append`, the bookkeeping's rows as tuples, and `append_frame`, a small
micro-batch's output rows and state copies (`sinks.write(..., local=True)`,
`incremental.state.append(..., local=True)`): Spark computes them and hands them over as
Arrow (one job), delta-rs commits them (docs/design.md §2.9). The `deltalake.DeltaTable` an
append goes through is kept for the thread's next append to the same table (`open_tables`).

Used only where it writes what Spark would: the table's log is a local folder the driver
lists (`deltalog.local_log`: not over Spark Connect, not a remote file system, no commits
staged by a catalog), its protocol is one every Delta writer supports (writer version 2 or
lower, no table features), its columns are of flat types, and every partition value is one
both writers spell the same way in the data file's folder (`_same_folder`); else nothing is
written and the caller writes with Spark. Both writers commit version N by creating
`_delta_log/N.json` only if it is not there, and a blind append that finds its version taken
tries the next one, so the two can append to the same log at once (a stream in Spark, a
backfill here). `user_metadata` lands in the commit's `commitInfo.userMetadata`, where
Spark's `userMetadata` write option puts it: the exactly-once journal (`once`) finds a
journaled append's commit by it either way. An append's checksum file, which delta-rs does
not write, is derived from the version before's (`version_checksum`), so a stream reading the
table does not rebuild its snapshot with a Spark job.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Literal

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    ByteType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructType,
    TimestampType,
)

from sqlflow.errors import SqlflowError
from sqlflow.runtime import literal_rows
from sqlflow.runtime.delta import deltalog, open_tables, version_checksum

_ARROW = {StringType: "string", LongType: "int64", BooleanType: "bool_"}
# the column types a frame's rows may have: each maps to one Arrow type both writers store alike
_FLAT = (StringType, BinaryType, BooleanType, ByteType, ShortType, IntegerType, LongType,
         FloatType, DoubleType, DecimalType, DateType, TimestampType)
# a partition value both writers put in the folder name as it is (Spark escapes some
# characters, delta-rs percent-encodes others; none of these), at most Spark's 255 bytes
_PLAIN_VALUE = r"^[A-Za-z0-9_.\-]{1,200}$"


def append(spark: SparkSession, location: str | None, rows: Sequence[tuple], schema: StructType,
           *, user_metadata: str | None = None) -> tuple[str, int] | None:
    """Append `rows` (tuples in `schema`'s column order) to the Delta table at `location` as
    one commit; the table's local folder and the commit's version, or None, having written
    nothing, when this process cannot write it as Spark would (see the module docstring)."""
    found = _table(spark, location) if _plain_types(schema) else None
    if found is None:
        return None
    folder, table = found
    _commit(folder, table, _arrow(rows, schema), user_metadata)
    return folder, table.version()


def append_frame(spark: SparkSession, location: str | None, rows: DataFrame,
                 *, user_metadata: str | None = None, replace: bool = False) -> DataFrame | None:
    """Append the rows of `rows` to the Delta table at `location` as one commit, computed by
    Spark and handed to the driver as Arrow (for a few rows: they are held in memory).
    `replace`: the commit replaces every row the table had instead (a whole-table overwrite,
    which keeps the table's schema, partitioning and properties: only for rows of exactly
    the table's columns, as the check below makes sure).

    None when they were appended. Otherwise the rows the caller writes with Spark instead,
    nothing written: `rows` itself when they were not computed (see the module docstring),
    or the computed rows as a local frame when a partition value or a column would not be
    stored as Spark stores it (not computed twice). A frame whose columns are not the
    table's is left to Spark too, which refuses it with its own message."""
    if not all(isinstance(f.dataType, _FLAT) for f in rows.schema.fields):
        return rows
    found = _table(spark, location)
    if found is None:
        return rows
    folder, table = found
    import pyarrow as pa

    target = pa.schema(table.schema().to_arrow())
    data = rows.toArrow()
    if sorted(data.column_names) != sorted(target.names):  # Spark reports the difference
        return spark.createDataFrame(data, schema=rows.schema)
    data = data.select(target.names)
    cast = _cast(data, target) if _same_folder(data, table.metadata().partition_columns) else None
    if cast is None:
        return spark.createDataFrame(data, schema=rows.schema)
    if cast.num_rows or replace:  # a replace by no rows empties the table
        _commit(folder, table, cast, user_metadata, mode="overwrite" if replace else "append")
    return None


def _table(spark: SparkSession, location: str | None) -> tuple[str, Any] | None:
    """The folder and `deltalake.DeltaTable` at `location` when this process may append to it
    as Spark would (a local log, a protocol of writer version 2 or lower without table
    features)."""
    log = deltalog.local_log(spark, location)
    if log is None:
        return None
    folder = os.path.dirname(log)
    table = open_tables.table(folder)  # kept from this thread's last append
    protocol = table.protocol()
    if protocol.min_writer_version > 2 or protocol.writer_features:
        return None
    return folder, table


def _commit(folder: str, table: Any, data: Any, user_metadata: str | None,
            mode: Literal["append", "overwrite"] = "append") -> None:
    from deltalake import CommitProperties, write_deltalake
    from deltalake.exceptions import DeltaError

    try:
        write_deltalake(table, data, mode=mode,
                        commit_properties=CommitProperties(
                            custom_metadata={"userMetadata": user_metadata} if user_metadata else None))
    except BaseException as exc:
        open_tables.forget(folder)  # its state is not trusted after a failed write
        if not isinstance(exc, (OSError, DeltaError)):
            raise
        # a full disk, a folder it may not write, a rule of the table's (an invariant) a row breaks
        raise SqlflowError(
            f"cannot {'write' if mode == 'overwrite' else 'append'} to the Delta table in "
            f"`{table.table_uri}`: {exc}",
            hint="if the error names a column or a constraint, the model's rows break a rule of "
                 "the table: fix the model or the table; else check that the folder is writable "
                 "and its disk has room. Then run again (a stream's append is exactly once per "
                 "micro-batch, a backfill rewrites its partitions)") from exc
    if mode == "append":  # the checksum Spark's writer would have put beside it
        version_checksum.write(folder, table.version())


def _same_folder(data: Any, partition_columns: Sequence[str]) -> bool:
    """Whether every row's partition values name the same folder under both writers: not
    NULL (or empty), and an integer, a date or a string of plain characters."""
    import pyarrow as pa
    import pyarrow.compute as pc

    for name in partition_columns:
        column = data.column(name)
        if column.null_count:
            return False
        kind = column.type
        if pa.types.is_string(kind) or pa.types.is_large_string(kind):
            if len(column) and not pc.all(pc.match_substring_regex(column, _PLAIN_VALUE)).as_py():
                return False
        elif not (pa.types.is_integer(kind) or pa.types.is_date32(kind)):
            return False
    return True


def _cast(data: Any, target: Any) -> Any:
    """`data` in the table's Arrow schema; None when a column's type is not the table's (a
    timestamp's zone aside: Spark's store assignment rules decide the rest), or a NOT NULL
    column holds a NULL (Spark refuses it with its constraint error)."""
    import pyarrow as pa

    for field in target:
        column = data.column(field.name)
        zoned = pa.types.is_timestamp(column.type) and pa.types.is_timestamp(field.type)
        if column.type != field.type and not (zoned and column.type.unit == field.type.unit):
            return None
        if not field.nullable and column.null_count:
            return None
    return data.cast(target)


def _plain_types(schema: StructType) -> bool:
    return all(type(f.dataType) in _ARROW or isinstance(f.dataType, TimestampType)
               for f in schema.fields)


def _arrow(rows: Sequence[tuple], schema: StructType) -> Any:
    """The rows as a pyarrow table of the Delta schema's types: a naive `datetime` is UTC, as
    the session's UTC time zone and `literal_rows` read it."""
    import pyarrow as pa

    rows = [literal_rows.utc_row(r, schema) for r in rows]
    fields, columns = [], []
    for i, f in enumerate(schema.fields):
        values = [r[i] for r in rows]
        if isinstance(f.dataType, TimestampType):
            kind = pa.timestamp("us", tz="UTC")
        else:
            kind = getattr(pa, _ARROW[type(f.dataType)])()
        fields.append(pa.field(f.name, kind, nullable=f.nullable))
        columns.append(pa.array(values, type=kind))
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))
