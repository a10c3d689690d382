"""How many rows a backfill reads at most, from its input tables' Delta logs: no Spark job.

A backfill of a small project (the demo at a few hundred rows a day, a test's tables, an
analyst's first run) spent most of its time planning and compiling, not reading: each of its
queries planned under adaptive execution (a job per shuffle stage, each re-planned when the
one before it ends) and generated and compiled Java classes for every stage and expression
list, for a few thousand rows. A backfill whose inputs hold at most `small_plan.INTERPRETED_ROWS`
rows in all runs inside `small_plan` with neither (docs/design.md §3, "The runtime").

The count is the sum of each input table's rows at its latest version, by the `numRecords`
of its live data files (`delta.file_stats`); a backfill whose count is not known for every
input runs as configured. An input pinned to an older version (`sqlflow audit`) is counted at
its latest too: the choice is one of speed only (the rows are the same either way), so a
table that held more rows before is at worst run interpreted over more rows than the bound.
The log of a table above `LOG_BYTES` on disk (its `.crc` says) is not read at all: no small
run reads it. For the same reason counting never fails a run: a catalog or log that cannot be
read here (an error the run's own reads will report, if it is one) means "as configured".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from pyspark.sql import SparkSession

from sqlflow.runtime.delta import file_stats
from sqlflow.runtime.delta.deltalog import TableInfo, checksum, latest_version, local_log, locate
from sqlflow.runtime.small_plan import INTERPRETED_ROWS
from sqlflow.runtime.spark_errors import SPARK_ERRORS

# a table holding more bytes than this holds more than INTERPRETED_ROWS rows of any real schema
# (a demo event row is ~250 bytes in Parquet): its log is not read for its row count
LOG_BYTES = 256 << 20

# what counting can raise: a catalog call (Spark), a log file that cannot be read or parsed
_COUNT_ERRORS: tuple[type[Exception], ...] = (*SPARK_ERRORS, OSError, ValueError)


def small(spark: SparkSession, relations: Iterable[str],
          known: Mapping[str, TableInfo] | None = None) -> bool:
    """Whether a backfill reading `relations` is small: they hold at most INTERPRETED_ROWS
    rows in all, as far as `rows_read` knows (run it inside `small_plan(spark, True, True)`).
    Never raises for what counting meets (`_COUNT_ERRORS`): not small, as configured."""
    try:
        rows = rows_read(spark, relations, known)
    except _COUNT_ERRORS:
        return False
    return rows is not None and rows <= INTERPRETED_ROWS


def rows_read(spark: SparkSession, relations: Iterable[str],
              known: Mapping[str, TableInfo] | None = None) -> int | None:
    """The rows of every table in `relations` (each counted once) at its latest version;
    None when one is not a local Delta table whose files' statistics count their rows, or is
    larger than `LOG_BYTES`. `known`: tables the caller located already (lower-case keys)."""
    found = dict(known or {})
    names = sorted(dict.fromkeys(r.lower() for r in relations), key=lambda n: n not in found)
    total, located = 0, False
    for name in names:  # the located ones first: one that cannot be counted (Spark Connect, a
        if name not in found and not located:  # remote table) ends it before a catalog call
            found.update(locate(spark, [n for n in names if n not in found]))
            located = True
        rows = _table_rows(spark, name, found.get(name))
        if rows is None:
            return None
        total += rows
    return total


def _table_rows(spark: SparkSession, name: str, info: TableInfo | None) -> int | None:
    if info is None or info.format != "delta":
        return None
    log = local_log(spark, info.location)
    if log is None:
        return None
    version = latest_version(spark, name, info.location)
    if version is None:
        return None
    size = checksum(log, version).get("tableSizeBytes")
    if not isinstance(size, int) or size > LOG_BYTES:
        return None
    extent = file_stats.extent(Path(log).parent, version, [])
    return None if extent is None else extent.rows
