"""Failures of the machine, not of the model: a full disk, a path without permission, a
read-only file system, too many open files (docs/semantics.md, "When a run fails").

Spark reports them as a Java exception deep in a Py4J error whose first line says only
`An error occurred while calling o1320.append.`; the cause is in the Java trace below it
(`Caused by: java.io.IOException: No space left on device`). `environment_problem` reads the
whole chain of an exception (Python causes and the Java text with its `Caused by:` lines) and
returns one line that names the failure, the path it hit when the text has one (else the
path the caller wrote to), and the fix. Running again cannot succeed before the fix, so the
hint says to fix first.

    >>> text = ("An error occurred while calling o1320.append.\\n"
    ...         ": org.apache.spark.SparkException: Job aborted.\\n"
    ...         "Caused by: java.io.FileNotFoundException: /wh/dw.db/t/part-0.parquet (Permission denied)")
    >>> p = environment_problem(RuntimeError(text))
    >>> p.message, p.path
    ('permission denied on `/wh/dw.db/t/part-0.parquet`', '/wh/dw.db/t/part-0.parquet')
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

# (marker(s) in the Java/OS text, what it means, fix with `{path}`); the first kind found wins
_KINDS = (
    ("No space left on device", "no space left on the device holding `{path}`",
     "free space on that file system (or move the warehouse and checkpoints to a larger disk), "
     "then run again: a stream resumes from its checkpoint, a batch rewrites its partitions"),
    ("Disk quota exceeded", "disk quota exceeded on `{path}`",
     "free space or raise the quota of the user running sqlflow, then run again"),
    ("Read-only file system", "`{path}` is on a read-only file system",
     "remount it read-write, or point the warehouse and checkpoints to a writable disk "
     "(`spark.sql.warehouse.dir` in profiles.yml), then run again"),
    (("Permission denied", "AccessDeniedException"), "permission denied on `{path}`",
     "give the user running sqlflow read and write access to it (e.g. `chown -R <user> "
     "<dir>`), then run again"),
    ("Too many open files", "too many open files (at `{path}`)",
     "raise the open-file limit of the process that runs sqlflow (`ulimit -n 65536` in its "
     "shell, or LimitNOFILE for a service), then run again"),
)
_PATH = r"((?:file:|hdfs:|s3a?:|abfss?:|gs:)?/[^\s'\"()<>,;]*[^\s'\"()<>,;:.])"
# where Java and Hadoop put the path of a failed file operation
_PATH_PATTERNS = (
    re.compile(_PATH + r"\s+\((?:[A-Z][a-z]+[ a-z]*)\)"),  # FileNotFoundException: /p (Permission denied)
    re.compile(r"java\.nio\.file\.\w+Exception: " + _PATH),  # AccessDeniedException: /p
    re.compile(r"(?:Mkdirs failed to create|Failed to create|Cannot create|Unable to create|"
               r"Could not create|failed to rename|Failed to rename)\s+(?:file\s+|directory\s+)?"
               + _PATH, re.IGNORECASE),
    re.compile(_PATH + r": (?:No space left|Read-only file system|Permission denied|Too many open)"),
    # [TASK_WRITE_FAILED] Task failed while writing rows to file:/p
    re.compile(r"(?:writing rows to|write rows to|writing to)\s+" + _PATH, re.IGNORECASE),
)


@dataclass(frozen=True)
class EnvironmentProblem:
    """What failed (one line, with the path), the path, and the fix."""

    message: str
    path: str | None
    fix: str


def chain_text(exc: BaseException) -> str:
    """The text of `exc` and of every exception it was raised from or during (Python's
    `__cause__`/`__context__`; a Py4J error's text holds the Java trace with its causes)."""
    seen, parts = set(), []
    node: BaseException | None = exc
    while node is not None and id(node) not in seen:
        seen.add(id(node))
        parts.append(str(node))
        java = getattr(node, "java_exception", None)
        if java is not None:
            try:
                parts.append(str(java.toString()))
            except Exception:  # the JVM is gone: the Python text has the trace anyway
                pass
        node = node.__cause__ or node.__context__
    return "\n".join(parts)


def environment_problem(exc: BaseException | str,
                        written: Sequence[str] = ()) -> EnvironmentProblem | None:
    """The machine failure behind `exc`, or None when it is not one. `written`: paths the
    failed work wrote to (sink, checkpoint), named when the error text has no path."""
    text = exc if isinstance(exc, str) else chain_text(exc)
    for markers, what, fix in _KINDS:
        marker = next((m for m in _as_tuple(markers) if m.lower() in text.lower()), None)
        if marker is None:
            continue
        path = _path_near(text, marker) or _fullest(written, marker)
        shown = path or "the warehouse or checkpoint directory"
        return EnvironmentProblem(what.format(path=shown), path, fix)
    return None


def _as_tuple(markers: str | tuple[str, ...]) -> tuple[str, ...]:
    return (markers,) if isinstance(markers, str) else markers


def written_paths(ctx, plan, *, checkpoint: bool = True) -> tuple[str, ...]:
    """Where a run of `plan` writes: the location of its sink's schema, its checkpoint (a
    stream query's), and the warehouse."""
    from sqlflow.runtime.query import checkpoint_dir

    out = []
    sink = getattr(getattr(plan, "sink", None), "table", None)
    try:
        if sink and "." in sink:
            out.append(ctx.spark.catalog.getDatabase(sink.rsplit(".", 1)[0]).locationUri)
    except Exception:  # not created yet, or no catalog: the other paths
        pass
    if checkpoint:
        out.append(str(checkpoint_dir(ctx.project_dir, plan)))
    try:
        out.append(ctx.spark.conf.get("spark.sql.warehouse.dir"))
    except Exception:  # Spark Connect without the key, or no session
        pass
    return tuple(p for p in out if p)


def _fullest(paths: Sequence[str], marker: str) -> str | None:
    """Of the paths written, the one on the file system with the least free space (for a
    full disk; the first for the other failures), or None."""
    local = [p for p in paths if p]
    if marker != "No space left on device" or len(local) < 2:
        return local[0] if local else None

    def device(path: str) -> tuple[Path, int | None]:  # the nearest existing folder, its file system
        p = Path(re.sub(r"^file:(//)?", "", path))
        while not p.exists() and p != p.parent:
            p = p.parent
        try:
            return p, p.stat().st_dev
        except OSError:
            return p, None

    # free space asked once per file system: paths on one share its figure, and the first
    # of them wins a tie (asked twice, a disk other writers fill could order them either way)
    found = {path: device(path) for path in local}
    free: dict[int | None, float] = {}
    for folder, dev in found.values():
        if dev not in free:
            try:
                free[dev] = shutil.disk_usage(folder).free if dev is not None else float("inf")
            except OSError:
                free[dev] = float("inf")
    return min(local, key=lambda path: free[found[path][1]])


def _path_near(text: str, marker: str) -> str | None:
    """The path of the failed operation: on the line that names `marker` first, then anywhere."""
    lines = [line for line in text.splitlines() if marker.lower() in line.lower()]
    for scope in (*lines, text):
        for pattern in _PATH_PATTERNS:
            found = pattern.search(scope)
            if found:
                return found.group(1)
    return None
