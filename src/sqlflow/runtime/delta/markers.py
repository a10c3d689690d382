"""Partition ready markers: a `_SUCCESS` file in a Delta table's partition directory.

This is how upstream Hive/Spark jobs (and the demo's daily dimension tables) say "this day is
complete". The commit log (docs/semantics.md, "Partition commit") is sqlflow's own record of
readiness; `sqlflow.runtime.snapshot` syncs markers into it, and the markers stay for
schedulers that look for files. Delta ignores files whose
names start with `_`, and VACUUM keeps them, so a marker never shows up as data.

Paths go through Hadoop's FileSystem API, so the same code marks tables on a local disk,
HDFS or an object store.
"""

from __future__ import annotations

from sqlflow.errors import SqlflowError
from sqlflow.runtime.delta.deltalog import describe

READY_MARKER = "_SUCCESS"


def table_location(spark, table: str) -> str:
    """The storage location of a table, from the catalog.

    `DESCRIBE DETAIL` reports the same path but first computes the table's size from its
    Delta snapshot, a 50-task job that costs seconds on two cores.
    """
    location = describe(spark, table).location
    if location:
        return location
    raise SqlflowError(f"table `{table}` has no storage location in the catalog",
                       hint="ready markers need a table stored in a file system")


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
    """The directory of one partition: `<location>/<column>=<value>` (Hive layout, the value
    escaped as Spark names the directory; `*` stays a glob)."""
    from sqlflow.runtime.delta import partition_path

    if value == "*":
        return f"{location.rstrip('/')}/{partition_path.escape(column)}=*"
    return partition_path.directory(location, partition_path.spec({column: value}))


def mark_ready(spark, location: str, column: str, value: str) -> str:
    """Write the ready marker of partition `column=value` of the table at `location`; returns its path."""
    path = f"{partition_dir(location, column, value)}/{READY_MARKER}"
    fs, hpath = _fs(spark, path)
    fs.create(hpath, True).close()
    return path


def clear_ready(spark, location: str, column: str) -> int:
    """Delete every ready marker of the table at `location` (stale ones survive an overwrite)."""
    pattern = f"{partition_dir(location, column, '*')}/{READY_MARKER}"
    fs, hpath = _fs(spark, pattern)
    found = fs.globStatus(hpath) or []
    for status in found:
        fs.delete(status.getPath(), False)
    return len(found)


def ready_partitions(spark, location: str, column: str) -> list[str]:
    """The values of `column` whose partition directory (of the table at `location`) is marked ready."""
    pattern = f"{partition_dir(location, column, '*')}/{READY_MARKER}"
    fs, hpath = _fs(spark, pattern)
    from sqlflow.runtime.delta import partition_path

    return sorted(partition_path.parse(s.getPath().getParent().getName())[column] or ""
                  for s in fs.globStatus(hpath) or [])
