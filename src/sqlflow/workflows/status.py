"""`sqlflow status`: each stream model's state read from files, never starting a JVM
(docs/semantics.md, "The stream service").

Per stream plan: its checkpoint (`offsets/` and `commits/`: the last batch id and when it
was committed, a batch in flight), its exactly-once journal (`sqlflow_once/`: appends
attempted) and the service's heartbeat (state, restarts, last error, rows of the last hour,
dirty partitions). A heartbeat older than `STALE_S` while it says running means the service
is gone: every model reads `stopped`.

The JSON (`--format json`) has a stable shape, version 1:
`{"version": 1, "service": {"running", "pid", "updated_at"}, "models": [{"name", "path",
"state", "restarts", "last_batch_id", "last_batch_at", "last_batch_seconds", "in_flight",
"lag_seconds", "rows_in_1h", "rows_out_1h", "quarantined_1h", "quarantined",
"dirty_partitions", "journal_entries", "last_error"}]}`; times are ISO-8601 UTC.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

from sqlflow.compiler import compile_project
from sqlflow.project.runmode import STATE_DIR
from sqlflow.runtime import heartbeat

VERSION = 1
STALE_S = 30.0
HOUR_S = 3600.0


def iso(seconds: float | None) -> str | None:
    """Unix seconds as ISO-8601 UTC, e.g. `2026-11-25T12:00:00Z`."""
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def stream_plans(project_dir: Path, select: Sequence[str] | None, target: Any,
                 vars: dict[str, Any] | None) -> list[Any]:
    """The stream plans of the project (compile only: no JVM)."""
    result = compile_project(project_dir, mode="stream", select=list(select or []) or None,
                             target=target, vars=vars)
    result.raise_if_errors()
    return [p for p in result.plans.values()
            if p.kind == "stream" or p.kind == "routed" and p.mode == "stream"]


def batch_ids(folder: Path) -> list[int]:
    return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit()) \
        if folder.is_dir() else []


def model_status(project_dir: Path, plan: Any, beat: dict[str, Any] | None, alive: bool,
                 now: float) -> dict[str, Any]:
    configured, default = plan.checkpoint_setting
    checkpoint = project_dir / (configured or f"{STATE_DIR}/checkpoints/{default}")
    offsets, commits = batch_ids(checkpoint / "offsets"), batch_ids(checkpoint / "commits")
    last = commits[-1] if commits else None
    committed_at = (checkpoint / "commits" / str(last)).stat().st_mtime if last is not None else None
    journal = checkpoint / "sqlflow_once"
    h = (beat or {}).get("models", {}).get(plan.model) or {}
    state = h.get("state", "stopped") if alive else "stopped"
    if not alive and h.get("state") == "failed":
        state = "failed"
    recent = [b for b in h.get("batches", []) if now - b[0] < HOUR_S]
    return {
        "name": plan.model,
        "path": plan.path,
        "state": state,
        "restarts": h.get("restarts", 0),
        "last_batch_id": last,
        "last_batch_at": iso(committed_at),
        "last_batch_seconds": h.get("last_batch_seconds"),
        "in_flight": bool(offsets) and offsets[-1] != last,
        # ingest-time lag: seconds since the last micro-batch committed (none committed: null)
        "lag_seconds": round(now - committed_at, 3) if committed_at is not None else None,
        "rows_in_1h": sum(int(b[1]) for b in recent),
        "rows_out_1h": sum(int(b[2]) for b in recent),
        "quarantined_1h": sum(int(b[3]) for b in recent),
        "quarantined": h.get("quarantined", {}),
        "dirty_partitions": h.get("dirty", []),
        "journal_entries": len(list(journal.iterdir())) if journal.is_dir() else 0,
        "last_error": h.get("last_error"),
    }


def service_status(project_dir: Path, plans: Sequence[Any], now: float | None = None) -> dict[str, Any]:
    """The status document of the module docstring."""
    now = time.time() if now is None else now
    beat = heartbeat.read(project_dir)
    alive = bool(beat and beat.get("running") and now - beat.get("updated_at", 0) < STALE_S)
    return {
        "version": VERSION,
        "service": {"running": alive, "pid": (beat or {}).get("pid"),
                    "updated_at": iso((beat or {}).get("updated_at"))},
        "models": [model_status(project_dir, p, beat, alive, now) for p in plans],
    }
