"""A few rows appended to a local Delta table from this process, without a Spark job.

A Spark append of a handful of rows is a job, a Parquet file and a Delta commit: about 0.5 s
on the two-core machine, and sqlflow's bookkeeping makes many of them (a commit-log append
per model write, per routed target and per partition commit of a backfill, one per stream
micro-batch). delta-rs (`deltalake.write_deltalake`, a maintained Delta writer; docs/stack.md)
makes the same append, one Parquet file and one commit, in 20-30 ms.

Used only where it writes what Spark would: the table's log is a local folder the driver
lists (`deltalog.local_log`: not over Spark Connect, not a remote file system, no commits
staged by a catalog) and its protocol is one every Delta writer supports (writer version 2
or lower, no table features), else `append` returns False and the caller writes with Spark.
Both writers commit version N by creating `_delta_log/N.json` only if it is not there, and a
blind append that finds its version taken tries the next one, so the two can append to the
same log at once (a stream in Spark, a backfill here). `user_metadata` lands in the commit's
`commitInfo.userMetadata`, where Spark's `userMetadata` write option puts it: the
exactly-once journal (`once`) finds a journaled append's commit by it either way.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.types import BooleanType, LongType, StringType, StructType, TimestampType

from sqlflow.errors import SqlflowError
from sqlflow.runtime import literal_rows
from sqlflow.runtime.delta import deltalog

_ARROW = {StringType: "string", LongType: "int64", BooleanType: "bool_"}


def append(spark: SparkSession, location: str | None, rows: Sequence[tuple], schema: StructType,
           *, user_metadata: str | None = None) -> bool:
    """Append `rows` (tuples in `schema`'s column order) to the Delta table at `location` as
    one commit; False, having written nothing, when this process cannot write it as Spark
    would (see the module docstring)."""
    log = deltalog.local_log(spark, location)
    if log is None or not _plain_types(schema):
        return False
    from deltalake import CommitProperties, DeltaTable, write_deltalake  # 0.2 s first import
    from deltalake.exceptions import DeltaError

    table = DeltaTable(os.path.dirname(log))
    protocol = table.protocol()
    if protocol.min_writer_version > 2 or protocol.writer_features:
        return False
    try:
        write_deltalake(table, _arrow(rows, schema), mode="append",
                        commit_properties=CommitProperties(
                            custom_metadata={"userMetadata": user_metadata} if user_metadata else None))
    except (OSError, DeltaError) as exc:  # a full disk, a folder it may not write
        raise SqlflowError(
            f"cannot append to the Delta table in `{os.path.dirname(log)}`: {exc}",
            hint="check that the folder is writable and its disk has room, then run again "
                 "(a stream's append is exactly once per micro-batch, a backfill rewrites its "
                 "partitions)") from exc
    return True


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
