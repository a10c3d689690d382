"""One run of a stream model at a time (docs/semantics.md, "Faults: what is guaranteed, what is
refused, what an operator does").

Two stream runs of one model share its checkpoint; Spark refuses the second only when both run
in one session, with a raw error, and a backfill of the model would replace partitions the
stream is appending to. So a stream run holds an exclusive `flock` on `<checkpoint>.lock` (next
to the checkpoint folder: `--full-refresh` removes the folder, not the lock) while its query
runs, and a batch run of a model that has a checkpoint takes it for the length of the run. The
second run is refused with one message naming the model, the checkpoint and the running
process. The operating system drops the lock of a killed process (`kill -9` included), so a
restart after a crash is never refused. The lock is of one machine: runs on two hosts over a
shared folder are not covered (docs/semantics.md).

In one process a lock is held at most once: `take` again before `release` is refused, except
after a query started by `start_stream` has stopped (the service's restart of a failed model).
"""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlflow.errors import Location, SqlflowError


@dataclass
class _Held:
    fd: int
    query: Any = None  # the StreamingQuery of a service start; None: held until `release`


_HELD: dict[str, _Held] = {}


def lock_file(checkpoint: Path) -> Path:
    """`<checkpoint>.lock`, beside the checkpoint folder."""
    return checkpoint.with_name(checkpoint.name + ".lock")


def take(checkpoint: Path, *, what: str, path: str, action: str = "stream run") -> None:
    """Hold the model's lock or refuse: another run of it is running (module doc)."""
    key = str(checkpoint.resolve())
    held = _HELD.get(key)
    if held is not None:
        if held.query is not None and not held.query.isActive:
            held.query = None  # its query stopped: this start takes the lock over
            return
        _refuse(checkpoint, what, path, action, os.getpid())
    file = lock_file(checkpoint)
    file.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(file, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 32).decode(errors="replace").strip()
        os.close(fd)
        _refuse(checkpoint, what, path, action, int(holder) if holder.isdigit() else None)
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())
    _HELD[key] = _Held(fd)


def attach(checkpoint: Path, query: Any) -> None:
    """The lock taken for `query` is free for the next `take` of this process once it stops."""
    held = _HELD.get(str(checkpoint.resolve()))
    if held is not None:
        held.query = query


def release(checkpoint: Path) -> None:
    held = _HELD.pop(str(checkpoint.resolve()), None)
    if held is not None:
        fcntl.flock(held.fd, fcntl.LOCK_UN)
        os.close(held.fd)


def _refuse(checkpoint: Path, what: str, path: str, action: str, pid: int | None) -> None:
    by = f"process {pid}" if pid is not None else "another process"
    if pid == os.getpid():
        by = "this process"
    raise SqlflowError(
        f"{what}: refused this {action}: a stream run of it is already running ({by} holds "
        f"`{lock_file(checkpoint)}`); two runs of one checkpoint would write micro-batches twice",
        location=Location(path),
        hint="wait for the running one to end, or stop it (Ctrl-C or SIGTERM) and run again")
