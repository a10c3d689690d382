"""Rows whose partition values cannot be directories go to quarantine, in both modes
(docs/semantics.md, "Partition values").

A routed target's partition levels come from data (tags, event dates). Every value Spark can
escape is written (`partition_path`); a row whose value cannot be a directory at all, a NULL
where a level needs a value (the group's commit date and hour) or a value no file system can
hold (a NUL character, a directory name over 255 bytes), would fail the whole write, in a
stream again on every retry. `check` tags each row with its reason by the row alone, so a
backfill and every micro-batch split quarantine the same rows; `quarantine_rows` shapes them as
the group's quarantine rows (`quarantine.COLUMNS`), `raw` being the target's row.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sqlflow.planning.plan import RoutedPlan, RouteTarget
from sqlflow.runtime import quarantine as Q
from sqlflow.runtime.delta import partition_path

REASON = "__sqlflow_partition_problem"


def check(plan: RoutedPlan, t: RouteTarget, rows: DataFrame) -> DataFrame:
    """`rows` with a REASON column: NULL when its partition values can be written."""
    required = (plan.commit.date_column, plan.commit.hour_column)
    return rows.withColumn(REASON, partition_path.problem(t.sink.partition_by, required))


def quarantine_rows(plan: RoutedPlan, t: RouteTarget, checked: DataFrame, *, origin: str) -> DataFrame:
    """The rows of `checked` with a REASON as the group's quarantine rows of target `t`."""
    b = plan.sources[0]
    bad = checked.where(F.col(REASON).isNotNull())
    names = {c.lower(): c for c in bad.columns if c != REASON}
    event = names.get((b.event_time or "").lower())
    ingest = names.get((b.ingest_time or "").lower())
    null = F.lit(None).cast("timestamp")
    times = Q.Times(raw_event=bad[event] if event else null,
                    event=Q._timestamp(bad, event) if event else null,
                    ingest=Q._timestamp(bad, ingest) if ingest else null)
    return Q.rows_of(bad, times, model=t.model, input=F.lit(b.relation), reason=F.col(REASON),
                     origin=origin, columns=[c for c in bad.columns if c != REASON])
