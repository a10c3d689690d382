"""The stream service's heartbeat: one JSON file it rewrites every poll, read by `sqlflow
status` and the metrics without a JVM (docs/semantics.md, "The stream service").

`<project>/.sqlflow/service/heartbeat.json`:
`{"pid", "updated_at", "running", "models": {name: ModelHealth fields}}`; written to a
temporary file and renamed, so a reader never sees half a file.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sqlflow.project.runmode import STATE_DIR

FOLDER = f"{STATE_DIR}/service"
STATES = ("starting", "waiting", "running", "paused", "restarting", "failed", "stopped")


def service_dir(project_dir: Path | str) -> Path:
    return Path(project_dir) / FOLDER


def heartbeat_path(project_dir: Path | str) -> Path:
    return service_dir(project_dir) / "heartbeat.json"


@dataclass
class ModelHealth:
    """One model's (one routed group's) region as the service last saw it. Times are Unix
    seconds; `quarantined` maps reason to rows; `dirty` lists partitions found dirty."""

    name: str
    path: str
    checkpoint: str
    state: str = "starting"
    restarts: int = 0
    last_batch_id: int | None = None
    last_batch_at: float | None = None
    last_batch_seconds: float | None = None
    rows_in: int = 0
    rows_out: int = 0
    quarantined: dict[str, int] = field(default_factory=dict)
    dirty: list[str] = field(default_factory=list)
    last_error: str | None = None
    newest_ingest_at: float | None = None  # newest ingest time of the rows processed (lag)
    batches: list[list[float]] = field(default_factory=list)  # [end time, rows in, rows out, quarantined], last hour


def write_atomic(path: Path, value: Any) -> None:
    """Write `value` as JSON to `path` through a renamed temporary file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(value, indent=1, sort_keys=True))
    os.replace(tmp, path)


def write(project_dir: Path | str, models: list[ModelHealth], *, running: bool, now: float,
          connect: str | None = None) -> None:
    """`connect`: the Spark Connect target the service runs over (`sqlflow ctl rate` refuses
    it), None for a service that is the Spark driver."""
    value = {"pid": os.getpid(), "updated_at": now, "running": running,
             "models": {m.name: asdict(m) for m in models}}
    if connect is not None:
        value["connect"] = connect
    write_atomic(heartbeat_path(project_dir), value)


def read(project_dir: Path | str) -> dict[str, Any] | None:
    """The last heartbeat, or None when no service ever ran in this project."""
    path = heartbeat_path(project_dir)
    try:
        value: dict[str, Any] = json.loads(path.read_text())
        return value
    except FileNotFoundError:
        return None
