"""The Maven packages of a target (`spark.jars.packages`), resolved once and then passed as jars.

Spark resolves `spark.jars.packages` with Ivy on every start, and prints Ivy's resolution report
(about 60 lines on stderr) each time, even when every jar is already in the Ivy cache. So the
first start of a package set resolves as Spark always did, and records the jars it resolved
(`spark.jars` of the started session: SparkSubmit puts the resolved files there) in
`<ivy dir>/sqlflow-jars/<key>.txt`, the key a hash of everything that decides the resolution
(packages, repositories, Ivy settings, exclusions, the Spark version). Every later start with
the same settings passes those files as `spark.jars` instead: no Ivy run, no report.

A record whose jars are not all there any more (the Ivy cache was cleaned) is ignored and
resolved again. One Ivy run at a time uses an Ivy folder (`resolving`): two at once in an empty
cache corrupt it (each writes the other's half-downloaded module files), and the corruption
stays until the cache is deleted. docs/design.md §3 (the engine).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import unquote, urlparse

PACKAGES = "spark.jars.packages"
JARS = "spark.jars"
# settings that change what Ivy resolves: part of the record's key
_RESOLUTION = (PACKAGES, "spark.jars.repositories", "spark.jars.ivySettings", "spark.jars.excludes",
               "spark.jars.ivy")
FOLDER = "sqlflow-jars"
LOCK = "sqlflow-resolve.lock"


def ivy_dir(conf: dict[str, str]) -> Path:
    """Spark's Ivy user folder: `spark.jars.ivy`, else `~/.ivy2.5.2` (Spark 4's default)."""
    return Path(conf.get("spark.jars.ivy") or Path.home() / ".ivy2.5.2").expanduser()


def key(conf: dict[str, str], spark_version: str) -> str:
    """The record's name for these resolution settings and Spark version.

    >>> key({"spark.jars.packages": "io.delta:delta-spark_4.2_2.13:4.4.0"}, "4.2.0") == \\
    ...     key({"spark.jars.packages": "io.delta:delta-spark_4.2_2.13:4.4.0", "x": "y"}, "4.2.0")
    True
    """
    wanted = {k: conf.get(k, "") for k in _RESOLUTION}
    text = json.dumps({"spark": spark_version, **wanted}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def _record(conf: dict[str, str], spark_version: str) -> Path:
    return ivy_dir(conf) / FOLDER / f"{key(conf, spark_version)}.txt"


def resolved(conf: dict[str, str], spark_version: str) -> dict[str, str]:
    """`conf` with its packages replaced by the jars an earlier start resolved (its own
    `spark.jars` kept first); `conf` unchanged when it has no packages or no usable record."""
    if not conf.get(PACKAGES):
        return conf
    path = _record(conf, spark_version)
    try:
        jars = [line.strip() for line in path.read_text().splitlines() if line.strip()]
    except OSError:
        return conf
    if not jars or not all(os.path.isfile(_local(j)) for j in jars):
        return conf  # the cache was cleaned: resolve again
    out = {k: v for k, v in conf.items() if k != PACKAGES}
    own = [j for j in conf.get(JARS, "").split(",") if j.strip()]
    out[JARS] = ",".join(own + [j for j in jars if j not in own])
    return out


def remember(conf: dict[str, str], spark_version: str, started_jars: str) -> None:
    """After a start that resolved `conf`'s packages: record the jars it resolved (the
    session's `spark.jars` minus the ones the profile gave itself). Best effort: a folder
    that cannot be written only means the next start resolves again."""
    if not conf.get(PACKAGES):
        return
    own = {j.strip() for j in conf.get(JARS, "").split(",") if j.strip()}
    jars = [j for j in started_jars.split(",") if j.strip() and j not in own]
    if not jars or not all(os.path.isfile(_local(j)) for j in jars):
        return
    path = _record(conf, spark_version)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text("\n".join(jars) + "\n")
        os.replace(tmp, path)
    except OSError:
        pass


@contextmanager
def resolving(folder: Path) -> Iterator[None]:
    """Hold the Ivy folder `folder` for one resolution: every sqlflow process that runs Ivy
    there (a Spark start that resolves packages, the Kafka broker's jars) waits for the one
    before it. A lock that cannot be made or taken (a read-only home, a file system without
    locks) is not held: Spark then resolves as it always does."""
    try:
        import fcntl
    except ImportError:  # (no flock here: Windows)
        yield
        return
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle = open(folder / LOCK, "a")
    except OSError:
        yield
        return
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX)
        except OSError:  # a file system without locks (some NFS mounts): resolve unguarded
            yield
            return
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _local(jar: str) -> str:
    """`file:/x/y.jar` or `/x/y.jar` -> `/x/y.jar`; anything else unchanged (never a file)."""
    url = urlparse(jar)
    return unquote(url.path) if url.scheme in ("", "file") else jar
