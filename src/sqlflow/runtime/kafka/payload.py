"""A Kafka record as an archive row: the payload parsed by the source's yml schema, the record
kept whole, and why a payload did not parse (docs/semantics.md, "Kafka sources").

| `_kafka_error` | when (first match wins)                                                |
|----------------|------------------------------------------------------------------------|
| `oversized`    | the value is longer than the binding's `max_value_bytes`               |
| `bad_json`     | the value is NULL, not UTF-8, or not a JSON object                     |
| `wrong_type`   | a field of the object does not parse as its yml column's type          |

A row with an error has every parsed column NULL except the ingest time (the Kafka record
timestamp); the model's quarantine takes it with that reason (`sqlflow.runtime.quarantine`).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from sqlflow.project.kafka import ARCHIVE_COLUMNS
from sqlflow.project.sources import SourceTable

_CORRUPT = "__sqlflow_corrupt"


def _ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def schema_ddl(table: SourceTable) -> str:
    """The payload schema of `table`: its yml columns but the ingest time, and the column
    Spark puts an unparseable record's text in."""
    cols = [f"{_ident(c.name)} {c.data_type}" for c in table.columns if c.name != table.ingest_time]
    return ", ".join([*cols, f"{_ident(_CORRUPT)} string"])


def error_of(value: Column, text: Column, parsed: Column, max_bytes: int) -> Column:
    """The reason a record's payload is not a row (NULL: it is one)."""
    as_map = F.from_json(text, "map<string,string>")
    return (F.when(F.length(value) > F.lit(max_bytes), F.lit("oversized"))
            .when(value.isNull() | ~F.is_valid_utf8(value), F.lit("bad_json"))
            .when(as_map.isNull() | parsed.isNull(), F.lit("bad_json"))
            .when(parsed[_CORRUPT].isNotNull(), F.lit("wrong_type")))


def archive_rows(records: DataFrame, table: SourceTable) -> DataFrame:
    """Kafka records (Spark's Kafka source columns) as rows of `table`'s archive: its yml
    columns, in yml order, then `ARCHIVE_COLUMNS`."""
    assert table.kafka is not None
    text = F.when(F.is_valid_utf8(F.col("value")), F.col("value").cast("string"))
    parsed = F.from_json(text, schema_ddl(table),
                         {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": _CORRUPT})
    staged = records.select(
        F.col("key").alias("_kafka_key"), F.col("value").alias("_kafka_value"),
        F.col("topic").alias("_kafka_topic"), F.col("partition").alias("_kafka_partition"),
        F.col("offset").alias("_kafka_offset"), F.col("timestamp").alias("_kafka_timestamp"),
        parsed.alias("__p"),
        error_of(F.col("value"), text, parsed, table.kafka.max_value_bytes).alias("_kafka_error"))
    out = []
    for col in table.columns:
        if col.name == table.ingest_time:
            out.append(F.col("_kafka_timestamp").cast(col.data_type or "timestamp").alias(col.name))
        else:
            field = F.col("__p")[col.name]
            out.append(F.when(F.col("_kafka_error").isNull(), field).alias(col.name))
    return staged.select(*out, *ARCHIVE_COLUMNS)
