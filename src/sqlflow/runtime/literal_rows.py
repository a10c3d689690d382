"""A few rows of sqlflow's own bookkeeping (commit-log entries, progress records) as a
DataFrame, built in the JVM from one SQL statement of typed literals.

`spark.createDataFrame(rows, schema)` ships the rows as a pickled RDD that a Python worker
task decodes when the write runs: about 0.1 s more wall time and CPU per append than a
statement of literals (a warm one-row Delta append: 0.42-0.49 s against 0.28-0.37 s; 20 rows
0.40-0.72 s against 0.28-0.29 s). Building the rows from `F.lit` columns instead costs a py4j
round trip per value, which is worse for more than a row or two. The statement costs about
3.5 ms per row to build (sqlglot) and more to parse, so past `SMALL` rows (a backfill's commit
log over hundreds of partitions) the rows go through `createDataFrame` after all, where the
worker task is a small part of the append.

The statement is a sqlglot tree, never text pasted together: names are quoted identifiers, and
a string value is written as the hex of its UTF-8 bytes (`CAST(UNHEX('..') AS STRING)`), so no
value can end a literal, carry a `\\` escape, or hold a `${...}` that Spark's variable
substitution would expand (it rewrites the whole statement text, string literals included).
A timestamp is written as its microseconds since the epoch (`TIMESTAMP_MICROS`): a naive
`datetime` is read as UTC, whatever the session's or the machine's time zone.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructType,
    TimestampType,
)
from sqlglot import exp

from sqlflow.project.config import micros as duration_micros

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
SMALL = 16  # rows (or as many values): more are cheaper through `createDataFrame`
_TYPES = {StringType: "STRING", LongType: "BIGINT", IntegerType: "INT", BooleanType: "BOOLEAN",
          TimestampType: "TIMESTAMP"}


def frame(spark: SparkSession, rows: Sequence[tuple], schema: StructType) -> DataFrame:
    """`rows` (tuples in `schema`'s field order) as a DataFrame with `schema`'s column names and
    types; at least one row; past `SMALL` rows through `createDataFrame`.
    """
    values = sum(len(v) if isinstance(v, (list, tuple)) else 1 for row in rows for v in row)
    if len(rows) > SMALL or values > SMALL * len(schema.fields):  # (an array's items count each)
        return spark.createDataFrame([utc_row(row, schema) for row in rows], schema)
    return spark.sql(statement(rows, schema))


def utc_row(row: tuple, schema: StructType) -> tuple:
    """`row` with each naive timestamp made UTC, for `createDataFrame` (which reads a naive one
    as the machine's local time)."""
    return tuple(utc(v) if isinstance(f.dataType, TimestampType) and isinstance(v, datetime) else v
                 for v, f in zip(row, schema.fields, strict=True))


def utc(value: datetime) -> datetime:
    """`value`, a naive one read as UTC."""
    return value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)


def statement(rows: Sequence[tuple], schema: StructType) -> str:
    """The SQL `frame` runs.

    >>> from pyspark.sql.types import StructField
    >>> print(statement([("it's", 3, None)], StructType([StructField("a", StringType()),
    ...       StructField("table", LongType()), StructField("t", TimestampType())])))
    SELECT * FROM VALUES (CAST(UNHEX('69742773') AS STRING), CAST(3 AS BIGINT), CAST(NULL AS TIMESTAMP)) AS t(`a`, `table`, `t`)
    """
    if not rows:
        raise ValueError("literal rows: at least one row")
    fields = schema.fields
    values = exp.values(
        [exp.Tuple(expressions=[literal(v, f.dataType) for v, f in zip(row, fields, strict=True)])
         for row in rows],
        alias="t", columns=[exp.to_identifier(f.name, quoted=True) for f in fields])  # type: ignore[misc]
    return exp.select("*").from_(values).sql(dialect="spark")


def literal(value: Any, data_type: DataType) -> exp.Expression:
    """`value` as a literal of `data_type` (a type of `_TYPES`, or an array of one)."""
    if value is None:
        return _cast(exp.null(), data_type)
    if isinstance(data_type, ArrayType):  # an empty array has no item to give it its type
        items = [literal(v, data_type.elementType) for v in value]
        return exp.Array(expressions=items) if items else _cast(exp.Array(expressions=[]), data_type)
    if isinstance(data_type, StringType):
        return _cast(exp.Unhex(this=exp.Literal.string(str(value).encode("utf-8").hex())), data_type)
    if isinstance(data_type, BooleanType):
        return exp.Boolean(this=bool(value))
    if isinstance(data_type, (LongType, IntegerType)):
        return _cast(exp.Literal.number(int(value)), data_type)
    if isinstance(data_type, TimestampType):
        return exp.Anonymous(this="TIMESTAMP_MICROS", expressions=[exp.Literal.number(micros(value))])
    raise TypeError(f"literal rows: no literal for {data_type.simpleString()}")


def micros(value: datetime) -> int:
    """Microseconds since the epoch; a naive `value` is UTC."""
    return duration_micros(utc(value) - _EPOCH)


def _cast(value: exp.Expression, data_type: DataType) -> exp.Expression:
    return exp.Cast(this=value, to=exp.DataType.build(_type_sql(data_type), dialect="spark"))


def _type_sql(data_type: DataType) -> str:
    if isinstance(data_type, ArrayType):
        return f"ARRAY<{_type_sql(data_type.elementType)}>"
    for kind, name in _TYPES.items():
        if isinstance(data_type, kind):
            return name
    raise TypeError(f"literal rows: no literal for {data_type.simpleString()}")
