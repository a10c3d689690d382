"""Quarantine (docs/design.md §2.1): split an input into clean rows and quarantine rows, by the row alone.

One rule for both modes. A row's reason depends only on its own event time, its own ingest time
and the input's declared `allowed_lateness` / `future_tolerance`, so a backfill and any
micro-batch split of a stream put exactly the same rows in quarantine:

| reason            | when (first match wins)                                               |
|-------------------|-----------------------------------------------------------------------|
| `null_event_time` | the event-time column is NULL                                         |
| `malformed`       | the event-time value is not NULL but is not a timestamp (a string that does not parse) |
| `late`            | `event_time < ingest_time - allowed_lateness` (microseconds, exact)   |
| `future`          | `event_time > ingest_time + future_tolerance` (microseconds, exact)   |
| `dim_missing`     | an inner dimension join found no ready partition in range (docs/design.md §2.3; written by `sqlflow.runtime.snapshot`, `input` = the dimension) |
| `null_partition`  | a routed target's row has NULL where a partition level needs a value (its commit date or hour; `sqlflow.runtime.routed.partition_quarantine`, `model` = the target) |
| `bad_partition`   | a routed target's row, or a model's output row (`sqlflow.runtime.sink_partitions`, `input` = the model's table), has a partition value no directory can hold: a NUL character, a `column=value` name over 255 bytes once escaped, or the literal `__HIVE_DEFAULT_PARTITION__` (read back as NULL) |
| `oversized`, `bad_json`, `wrong_type` | a Kafka source's record whose payload did not parse (its archive's `_kafka_error`, `sqlflow.runtime.kafka.payload`); first of all |

A row with a NULL ingest time is neither late nor future: nothing says when it arrived.

Quarantine rows carry: `model`, `input` (the relation read), `reason`, `event_time`,
`ingest_time`, `raw` (the whole input row as JSON, timestamps to the microsecond), `origin`
(where it was read: `ods.t@v12` for a Delta version, `batch 17` for a micro-batch) and `dt`
(the date of the event time, else of the ingest time, in the session time zone; the
quarantine table's partition column). A Kafka source's row (its archive has `_kafka_value`)
keeps the record instead: `raw` is the payload (text where valid UTF-8, else `base64:` and
its base64) and `origin` is `topic/partition/offset`, equal in both modes. No wall-clock column: everything but `origin` is equal
across modes.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DateType, TimestampNTZType, TimestampType

from sqlflow.errors import SqlflowError
from sqlflow.identifiers import quote
from sqlflow.planning.plan import SourceBinding

REASONS = ("late", "future", "null_event_time", "malformed", "dim_missing", "null_partition",
           "bad_partition", "oversized", "bad_json", "wrong_type")
KAFKA_ERROR, KAFKA_VALUE = "_kafka_error", "_kafka_value"  # sqlflow.project.kafka.ARCHIVE_COLUMNS
COLUMNS = ("model", "input", "reason", "event_time", "ingest_time", "raw", "origin", "dt")
PARTITION_BY = ("dt",)
# Spark's JSON default keeps milliseconds; the raw payload must keep every microsecond.
_JSON_OPTIONS = {"timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX",
                 "timestampNTZFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSS"}


@dataclass(frozen=True)
class Split:
    """An input's rows: `clean` (its own columns, unchanged) and `quarantine` (COLUMNS)."""

    clean: DataFrame
    quarantine: DataFrame


def split(df: DataFrame, binding: SourceBinding, *, model: str, origin: str) -> Split:
    """Split `df`, read for `binding`, into clean rows and quarantine rows of `model`.

    `origin` says where the rows were read (`ods.t@v3`, `batch 17`); it is the only
    quarantine column that differs between a backfill and a stream.
    """
    return Split(clean(df, binding, model=model), bad_rows(df, binding, model=model, origin=origin))


def bad_rows(df: DataFrame, binding: SourceBinding, *, model: str, origin: str) -> DataFrame:
    """`split(df, ...).quarantine` alone (a backfill builds it only when it writes it)."""
    times = event_times(df, binding, model=model)
    return rows_of(df, times, model=model, input=F.lit(binding.relation),
                   reason=reason_of(times, binding), origin=origin).where(F.col("reason").isNotNull())


def clean(df: DataFrame, binding: SourceBinding, *, model: str, reason: Column | None = None) -> DataFrame:
    """`split(df, ...).clean` without building the quarantine rows (a micro-batch builds those
    only when its stats counted some: each column expression is a round trip to the JVM).
    `reason`: `reason_of` over `df`'s own columns, when the caller has it already."""
    if reason is None:
        reason = reason_of(event_times(df, binding, model=model), binding)
    return df.where(reason.isNull())


def rows_of(df: DataFrame, times: Times, *, model: str, input: Column, reason: Column,
            origin: str, columns: list[str] | None = None) -> DataFrame:
    """`df` as quarantine rows (COLUMNS): `raw` is `columns` of the row (default: all) as JSON.
    Shared by the input split above and the `dim_missing` rows of a dimension join."""
    raw_json = F.to_json(F.struct(*[df[c] for c in (columns or df.columns)]), _JSON_OPTIONS)
    where: Column = F.lit(origin)
    if KAFKA_VALUE in df.columns:  # a Kafka record: its payload and its place in the topic
        value = df[KAFKA_VALUE]
        raw_json = F.when(F.is_valid_utf8(value), value.cast("string")).otherwise(
            F.concat(F.lit("base64:"), F.base64(value)))
        where = F.concat_ws("/", df["_kafka_topic"], df["_kafka_partition"].cast("string"),
                            df["_kafka_offset"].cast("string"))
    return df.select(
        F.lit(model).alias("model"),
        input.alias("input"),
        reason.alias("reason"),
        times.event.alias("event_time"),
        times.ingest.alias("ingest_time"),
        raw_json.alias("raw"),
        where.alias("origin"),
        F.date_format(F.coalesce(times.event, times.ingest), "yyyy-MM-dd").alias("dt"),
    )


@dataclass(frozen=True)
class Times:
    """An input row's event and ingest times as TIMESTAMP columns (`ingest` may be NULL)."""

    raw_event: Column
    event: Column
    ingest: Column
    kafka_error: Column | None = None  # a Kafka source's payload error (`_kafka_error`)


def event_times(df: DataFrame, binding: SourceBinding, *, model: str) -> Times:
    """The event and ingest time columns of `df`, cast to TIMESTAMP where they are not one.
    Columns by name: valid over any frame with `df`'s columns (a stream's next micro-batch).

    A declared event-time column that `df` lacks is a user error. A missing ingest column is
    one too for a source; a model input may not carry its inputs' ingest column, and its rows
    were checked upstream, so it is only checked for NULL or malformed event times.
    """
    names = {c.lower(): c for c in df.columns}
    event = names.get((binding.event_time or "").lower())
    if event is None:
        raise SqlflowError(
            f"model `{model}`: input `{binding.relation}` has no column `{binding.event_time}`, "
            "its declared event time",
            hint="fix `event_time` in the source's yml (meta: sqlflow:) or the upstream model's config")
    ingest = names.get((binding.ingest_time or "").lower())
    if ingest is None and binding.ingest_time and binding.kind == "source":
        raise SqlflowError(
            f"model `{model}`: input `{binding.relation}` has no column `{binding.ingest_time}`, "
            "its declared ingest time",
            hint="fix `ingest_time` in the source's yml (meta: sqlflow:)")
    return Times(raw_event=F.col(quote(event)), event=_timestamp(df, event),
                 ingest=_timestamp(df, ingest) if ingest else F.lit(None).cast("timestamp"),
                 kafka_error=F.col(KAFKA_ERROR) if KAFKA_ERROR in df.columns else None)


def reason_of(times: Times, binding: SourceBinding) -> Column:
    """The quarantine reason of a row as one column expression; NULL for a clean row."""
    event_us, ingest_us = F.unix_micros(times.event), F.unix_micros(times.ingest)
    null_event = (times.raw_event.isNull(), F.lit("null_event_time"))
    first = F.when(*null_event) if times.kafka_error is None else \
        F.when(times.kafka_error.isNotNull(), times.kafka_error).when(*null_event)
    return (
        first
        .when(times.event.isNull(), F.lit("malformed"))
        .when(event_us < ingest_us - F.lit(binding.allowed_lateness_us), F.lit("late"))
        .when(event_us > ingest_us + F.lit(binding.future_tolerance_us), F.lit("future"))
    )


def reasons_of(times: Times) -> tuple[str, ...]:
    """Every reason `reason_of` can give an input row with these `times` (a Kafka record's
    payload errors only where the input has them)."""
    basic = ("null_event_time", "malformed", "late", "future")
    return basic if times.kafka_error is None else ("oversized", "bad_json", "wrong_type", *basic)


def in_dates(times: Times, low: Column, high: Column) -> Column:
    """Rows whose quarantine date key (event time, else ingest time) lies in [low, high).

    Written as plain range tests on the columns, so Delta can skip files by their min/max.
    """
    def within(c: Column) -> Column:
        return (c >= low) & (c < high)

    return within(times.event) | (times.event.isNull() & within(times.ingest))


def _timestamp(df: DataFrame, name: str) -> Column:
    kind, column = df.schema[name].dataType, F.col(quote(name))
    if isinstance(kind, TimestampType):
        return column
    if isinstance(kind, (TimestampNTZType, DateType)):
        return column.cast("timestamp")
    return F.try_to_timestamp(column.cast("string"))
