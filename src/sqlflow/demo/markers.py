"""Partition ready markers: a `_SUCCESS` file in a Delta table's partition directory.

This is how the demo's daily dimension tables say "this day is complete", the convention
upstream Hive/Spark jobs use. (The commit log of DESIGN 2.5 will become the primary record of
readiness; the markers stay for schedulers that look for files.) Delta ignores files whose
names start with `_`, and VACUUM keeps them, so a marker never shows up as data.

Paths go through Hadoop's FileSystem API, so the same code marks tables on a local disk,
HDFS or an object store.
"""

from __future__ import annotations

from sqlflow.demo.scenario import READY_MARKER
from sqlflow.errors import SqlflowError


def table_location(spark, table: str) -> str:
    """The storage location of a Delta table, as `DESCRIBE DETAIL` reports it."""
    return spark.sql(f"DESCRIBE DETAIL {table}").collect()[0]["location"]


def _fs(spark, path: str):
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:
        raise SqlflowError(
            "ready markers need a classic Spark session (not Spark Connect)",
            hint="generate the demo data with the `local` or `cluster` target",
        )
    hpath = jvm.org.apache.hadoop.fs.Path(path)
    return hpath.getFileSystem(spark._jsc.hadoopConfiguration()), hpath


def partition_dir(location: str, column: str, value: str) -> str:
    """The directory of one partition: `<location>/<column>=<value>` (Hive layout)."""
    return f"{location.rstrip('/')}/{column}={value}"


def mark_ready(spark, table: str, column: str, value: str) -> str:
    """Write the ready marker of partition `column=value`; returns the marker's path."""
    path = f"{partition_dir(table_location(spark, table), column, value)}/{READY_MARKER}"
    fs, hpath = _fs(spark, path)
    fs.create(hpath, True).close()
    return path


def clear_ready(spark, table: str, column: str) -> int:
    """Delete every ready marker of `table` (stale ones survive an overwrite); returns how many."""
    pattern = f"{partition_dir(table_location(spark, table), column, '*')}/{READY_MARKER}"
    fs, hpath = _fs(spark, pattern)
    found = fs.globStatus(hpath) or []
    for status in found:
        fs.delete(status.getPath(), False)
    return len(found)


def ready_partitions(spark, table: str, column: str) -> list[str]:
    """The values of `column` whose partition directory holds a ready marker, sorted."""
    pattern = f"{partition_dir(table_location(spark, table), column, '*')}/{READY_MARKER}"
    fs, hpath = _fs(spark, pattern)
    prefix = f"{column}="
    return sorted(s.getPath().getParent().getName()[len(prefix):] for s in fs.globStatus(hpath) or [])
