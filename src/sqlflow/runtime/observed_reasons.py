"""A backfill's quarantine counts, taken while its sink write reads the inputs: no job of
their own (docs/design.md §2.9).

A backfill must know how many rows of each input go to the quarantine, per reason, before it
decides whether to write the quarantine table (`batch._quarantine`). Asked as a question of
its own, that is one more Spark job over every input row's event and ingest times. But the
sink write reads every row of every event input anyway: Spark can count the reasons on the
way (`DataFrame.observe`), and the write's job answers the question.

The counts are used only when they are provably whole. An observation counts the rows that
went past it, and a plan may stop reading early (a `LIMIT`, an inner join whose other side
adaptive execution found empty) or report nothing (Delta's `CREATE TABLE AS SELECT` fills no
observation). So each input also counts its rows, and the counts are taken only when that
number equals the rows its Delta snapshot holds, read from the `numRecords` statistics of its
live files in the log (no job). Anything else (no statistics, a log the driver cannot read,
an observation not filled, a number that differs) answers None and the caller asks the
question as before; never a count that might be short.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from sqlflow.runtime.delta import deltalog, file_stats, logfiles
from sqlflow.runtime.results import QuarantineCount

REASON = "__sqlflow_reason"  # reserved: sqlflow's own names start with `__sqlflow_`
ROWS, BAD = "__rows", "__bad"
# How long to wait for Spark's listener to hand the write's observation over after the write
# returned (it arrives on the listener bus, milliseconds later); past it, the caller asks.
WAIT_S = 2.0


@dataclass(frozen=True)
class Watch:
    """One input observed by the sink write: its snapshot's rows and the reasons counted."""

    relation: str
    rows: int
    reasons: tuple[str, ...]
    observation: Observation


def watch(spark: SparkSession, rows: DataFrame, reason: Column, *, relation: str,
          location: str | None, version: int, reasons: tuple[str, ...]) -> tuple[DataFrame, Watch] | None:
    """`rows`' clean rows (REASON NULL), counting its rows and each of `reasons` as they are
    read, and the `Watch` that reads the counts; None when the snapshot's row count is not
    known, or the input has a column of the reason's reserved name (the caller splits the
    input without observing it)."""
    if REASON in rows.columns:
        return None
    held = snapshot_rows(spark, location, version)
    if held is None:
        return None
    seen = Observation()
    tagged = rows.withColumn(REASON, reason)
    marked = F.col(REASON)
    observed = tagged.observe(seen, F.count(F.lit(1)).alias(ROWS),
                              F.count_if(marked.isNotNull()).alias(BAD),
                              *[F.count_if(marked == r).alias(r) for r in reasons])
    clean = observed.where(marked.isNull()).drop(REASON)
    return clean, Watch(relation, held, reasons, seen)


def counts(watches: list[Watch], wait_s: float = WAIT_S) -> tuple[QuarantineCount, ...] | None:
    """Every watched input's rows per reason (none: no bad row), sorted by input and reason,
    after the write that read them; None unless every observation arrived and counted exactly
    its snapshot's rows, each bad row under one of its reasons."""
    found: list[QuarantineCount] = []
    deadline = time.monotonic() + wait_s
    for w in watches:
        metrics = _arrived(w.observation, deadline)
        if metrics is None or metrics.get(ROWS) != w.rows:
            return None
        by_reason = {r: int(metrics.get(r) or 0) for r in w.reasons}
        if sum(by_reason.values()) != metrics.get(BAD):  # a reason we did not count
            return None
        found += [QuarantineCount(w.relation, r, n) for r, n in by_reason.items() if n]
    return tuple(sorted(found, key=lambda q: (q.input, q.reason)))


def _arrived(observation: Observation, deadline: float) -> dict | None:
    """The observation's metrics once Spark filled them, waiting until `deadline`; None when
    they did not come, or came empty (the plan lost its observation). `Observation.get` would
    block for ever on an observation no query fills: its JVM side's future is polled instead."""
    jvm_side = getattr(observation, "_jo", None)  # set by `observe`; pyspark has no public poll
    if jvm_side is None:  # not observed (or a pyspark without the JVM object)
        return None
    future = jvm_side.future()
    while not future.isCompleted():
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.005)
    try:
        metrics = observation.get
    except Exception:  # an empty row: Spark reports it as an error of its own conversion
        return None
    return metrics or None


def snapshot_rows(spark: SparkSession, location: str | None, version: int) -> int | None:
    """The rows of the local Delta table at `location` as of `version`, summed from the
    `numRecords` statistics of its live files; None when the log cannot be read here or a file
    has no such statistic."""
    log = deltalog.local_log(spark, location)
    if log is None:
        return None
    try:
        adds = logfiles.live_adds(Path(log).parent, version)
    except (logfiles.Unsupported, FileNotFoundError, OSError, ValueError):
        return None
    total = 0
    for add in adds.values():
        records = (file_stats.stats(add) or {}).get("numRecords")
        if not isinstance(records, int):
            return None
        total += records
    return total
