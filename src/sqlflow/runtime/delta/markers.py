"""Partition ready markers: a `_SUCCESS` file in a Delta table's partition directory.

This is how upstream Hive/Spark jobs (and the demo's daily dimension tables) say "this day is
complete". The commit log (docs/semantics.md, "Partition commit") is sqlflow's own record of
readiness; `sqlflow.runtime.snapshot` syncs markers into it, and the markers stay for
schedulers that look for files. Delta ignores files whose
names start with `_`, and VACUUM keeps them, so a marker never shows up as data.

Paths go through Hadoop's FileSystem API, so the same code marks tables on a local disk,
HDFS or an object store. Over Spark Connect this process has no FileSystem: `touch` has the
server create a marker (`copyFromLocalToFs`, docs/deploy.md "Spark Connect"); listing and
deleting markers cannot be done there.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from urllib.parse import urlparse

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


def touch(spark, path: str) -> None:
    """Create the empty file `path`, replacing one that is there. Classic session: the
    driver's Hadoop FileSystem. Spark Connect (no JVM here, nor in the server's Python worker,
    a Connect client too): the server copies an empty file of this machine to `path`
    (`SparkSession.copyFromLocalToFs`, pyspark >= 3.5), which takes a path on the server's
    default file system only, and a local one only when the server allows it
    (`spark.sql.artifact.copyFromLocalToFs.allowDestLocal`)."""
    jvm = getattr(spark, "_jvm", None)
    local = _local_file(path) if jvm is not None else None
    if local is not None:  # 9 ms a marker through py4j; a routed backfill writes hundreds
        try:
            os.makedirs(os.path.dirname(local), exist_ok=True)
            with open(local, "wb"):
                pass
        except OSError as exc:
            raise SqlflowError(f"cannot write the ready marker {local}: {exc}",
                               hint="check that the table's folder is writable and its disk "
                                    "has room, then run again (markers are written again)") from exc
        return
    if jvm is not None:
        hpath = jvm.org.apache.hadoop.fs.Path(path)
        hpath.getFileSystem(spark._jsc.hadoopConfiguration()).create(hpath, True).close()
        return
    dest = server_path(path, spark.conf.get("spark.hadoop.fs.defaultFS", None) or "file:///")
    with tempfile.TemporaryDirectory(prefix="sqlflow-marker-") as folder:
        empty = Path(folder) / READY_MARKER
        empty.touch()
        try:
            spark.copyFromLocalToFs(str(empty), dest)
        except Exception as exc:  # the server's refusal of a local destination
            if "local file system destination path is not supported" not in str(exc):
                raise
            raise SqlflowError(
                f"the Spark Connect server does not let clients create files on its local file "
                f"system, so the marker {path} cannot be written",
                hint="start the server with `--conf spark.sql.artifact.copyFromLocalToFs."
                     "allowDestLocal=true` (docs/deploy.md, \"Spark Connect\"), or turn the "
                     "markers off") from None


def _local_file(path: str) -> str | None:
    """`path` as this machine's file name when it is on the local file system and Hadoop would
    name the file the same (no `%`: Hadoop's `Path` keeps `%xx` literally); else None.

    >>> _local_file("file:/w/dw.db/t/dt=d/_SUCCESS")
    '/w/dw.db/t/dt=d/_SUCCESS'
    >>> _local_file("/w/t/_SUCCESS"), _local_file("hdfs://nn/w/t/_SUCCESS")
    ('/w/t/_SUCCESS', None)
    >>> _local_file("file:/w/t/event=a%3Ab/_SUCCESS") is None
    True
    """
    url = urlparse(path)
    if url.scheme not in ("", "file") or url.netloc or "%" in path or not url.path.startswith("/"):
        return None
    return url.path


def server_path(path: str, default_fs: str) -> str:
    """`path` as `copyFromLocalToFs` takes it: without scheme, on the server's default file
    system `default_fs`; a path on another file system is refused.

    >>> server_path("file:/w/dw.db/t/dt=d/_SUCCESS", "file:///")
    '/w/dw.db/t/dt=d/_SUCCESS'
    >>> server_path("hdfs://nn:8020/w/t/_SUCCESS", "hdfs://nn:8020")
    '/w/t/_SUCCESS'
    >>> server_path("s3a://b/w/t/_SUCCESS", "hdfs://nn:8020")
    Traceback (most recent call last):
    ...
    sqlflow.errors.SqlflowError: error: the marker s3a://b/w/t/_SUCCESS is not on the Spark Connect server's default file system (hdfs://nn:8020): ...
    """
    url, default = urlparse(path), urlparse(default_fs)
    if (url.scheme or "file") == (default.scheme or "file") and url.netloc == default.netloc:
        return url.path
    raise SqlflowError(
        f"the marker {path} is not on the Spark Connect server's default file system "
        f"({default_fs}): over Connect a file is created only there (`copyFromLocalToFs`)",
        hint="set the server's `spark.hadoop.fs.defaultFS` to the tables' file system, run as "
             "the Spark driver (the `cluster` target, docs/deploy.md), or turn the markers off")


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
    touch(spark, path)
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
