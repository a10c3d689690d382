"""A model's output rows whose partition values cannot be directories go to its quarantine, in
both modes (docs/semantics.md, "Partition values"), as a routed group's do
(`sqlflow.runtime.routed.partition_quarantine`).

Spark escapes every value it can (`partition_path`); a value no directory can hold (a NUL
character, a `column=value` name over 255 bytes, the literal `__HIVE_DEFAULT_PARTITION__`)
would fail the whole write, in a stream again on every retry. Only a STRING partition column
can hold one (a date or a number always makes a directory), so a sink without one is written
as before, unchecked; one with one is split by the row alone (`bad_partition`), so a backfill
and every micro-batch split quarantine the same rows. The quarantine row's `input` is the
model's own table, `raw` the output row, `event_time` the plan's event-time column if the
output has one. The callers cache `check`'s result, so the model's rows are computed once for
the bad rows' count, their quarantine write and the sink write (`runtime.batch`,
`runtime.incremental.microbatch`).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType

from sqlflow.planning.plan import BatchPlan, Sink, StreamPlan
from sqlflow.runtime import quarantine as Q
from sqlflow.runtime.delta import partition_path

REASON = "__sqlflow_partition_problem"


def check(sink: Sink, rows: DataFrame) -> DataFrame | None:
    """`rows` with a REASON column (NULL: the row's partition values can be written), or None
    when the sink has no STRING partition column that could hold a bad value (nothing to
    check: a `date_format` of a fixed pattern cannot, `Sink.safe_partitions`)."""
    kinds = {f.name.lower(): f.dataType for f in rows.schema.fields}
    safe = {c.lower() for c in sink.safe_partitions}  # directories by construction
    strings = [c for c in sink.partition_by
               if isinstance(kinds.get(c.lower()), StringType) and c.lower() not in safe]
    if not strings:
        return None
    return rows.withColumn(REASON, partition_path.problem(strings))


def clean(checked: DataFrame) -> DataFrame:
    """The rows of `checked` that can be written."""
    return checked.where(F.col(REASON).isNull()).drop(REASON)


def quarantine_rows(plan: BatchPlan | StreamPlan, checked: DataFrame, *, origin: str) -> DataFrame:
    """The rows of `checked` with a REASON, as the model's quarantine rows (`quarantine.COLUMNS`)."""
    bad = checked.where(F.col(REASON).isNotNull())
    columns = [c for c in bad.columns if c != REASON]
    event = next((c for c in columns if c.lower() == (plan.event_time or "").lower()), None)
    null = F.lit(None).cast("timestamp")
    stamp = bad[event].cast("timestamp") if event else null
    times = Q.Times(raw_event=bad[event] if event else null, event=stamp, ingest=null)
    return Q.rows_of(bad, times, model=plan.model, input=F.lit(plan.sink.table),
                     reason=F.col(REASON), origin=origin, columns=columns)
