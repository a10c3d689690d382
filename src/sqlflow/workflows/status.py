"""`sqlflow status`: each stream model's state read from files, never starting a JVM
(docs/semantics.md, "The stream service").

Per stream plan: its checkpoint (`offsets/` and `commits/`: the last batch id and when it
was committed, a batch in flight; each Delta input's version delivered, against the input
table's latest version in its `_delta_log/`: the input lag in versions, for a managed
table of a local warehouse), its exactly-once journal (`sqlflow_once/`: appends
attempted) and the service's heartbeat (state, restarts, last error, rows of the last hour,
dirty partitions). A heartbeat older than `STALE_S` while it says running means the service
is gone: every model reads `stopped`.

The JSON (`--format json`) has a stable shape, version 1:
`{"version": 1, "service": {"running", "pid", "updated_at"}, "models": [{"name", "path",
"state", "restarts", "last_batch_id", "last_batch_at", "last_batch_seconds", "in_flight",
"lag_seconds", "rows_in_1h", "rows_out_1h", "quarantined_1h", "quarantined",
"dirty_partitions", "journal_entries", "versions_behind", "last_error"}]}`; times are
ISO-8601 UTC; `versions_behind` maps each stream input to the Delta versions it has not
delivered yet (null: unknown, e.g. a table outside the local warehouse).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sqlflow.compiler import compile_project
from sqlflow.engine.session import spark_conf
from sqlflow.project.runmode import STATE_DIR
from sqlflow.runtime import heartbeat, offsets

VERSION = 1
STALE_S = 30.0
HOUR_S = 3600.0


def iso(seconds: float | None) -> str | None:
    """Unix seconds as ISO-8601 UTC, e.g. `2026-11-25T12:00:00Z`."""
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def stream_plans(project_dir: Path, select: Sequence[str] | None, target: Any,
                 vars: dict[str, Any] | None, exclude: Sequence[str] | None = None) -> list[Any]:
    """The stream plans of the project (compile only: no JVM)."""
    result = compile_project(project_dir, mode="stream", select=list(select or []) or None,
                             target=target, vars=vars, exclude=list(exclude or []) or None)
    result.raise_if_errors()
    return [p for p in result.plans.values()
            if p.kind == "stream" or p.kind == "routed" and p.mode == "stream"]


def batch_ids(folder: Path) -> list[int]:
    return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit()) \
        if folder.is_dir() else []


def warehouse(project_dir: Path, target: Any) -> Path | None:
    """The target's local warehouse folder (None: not set, or not a local path)."""
    where = spark_conf(target, project_dir).get("spark.sql.warehouse.dir")
    if not where or "://" in where and not where.startswith("file:"):
        return None
    return Path(where.removeprefix("file:"))


def latest_version(table_dir: Path) -> int | None:
    """The newest version in a Delta table's `_delta_log/` (its `N.json` commit files)."""
    log = table_dir / "_delta_log"
    if not log.is_dir():
        return None
    versions = [int(p.name[:-5]) for p in log.iterdir()
                if p.name.endswith(".json") and p.name[:-5].isdigit()]
    return max(versions, default=None)


def versions_behind(checkpoint: Path, plan: Any, wh: Path | None) -> dict[str, int | None]:
    """Per stream input: Delta versions of the table not yet delivered to the query."""
    streams = [b.relation for b in plan.sources if getattr(b, "read", None) == "stream"]
    last = offsets.next_batch(checkpoint) - 1
    out: dict[str, int | None] = {}
    for k, rel in enumerate(streams):
        db, _, name = rel.lower().rpartition(".")
        latest = latest_version(wh / f"{db}.db" / name) if wh and db else None
        got = offsets.end_of(checkpoint, last, k) if last >= 0 else offsets.NOTHING
        if latest is None or got is None:
            out[rel] = None
        else:
            out[rel] = latest - (-1 if got.version is None else got.version)
    return out


def model_status(project_dir: Path, plan: Any, beat: dict[str, Any] | None, alive: bool,
                 now: float, wh: Path | None = None) -> dict[str, Any]:
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
        "versions_behind": versions_behind(checkpoint, plan, wh),
        "last_error": h.get("last_error"),
    }


def service_status(project_dir: Path, plans: Sequence[Any], now: float | None = None,
                   target: Any = None) -> dict[str, Any]:
    """The status document of the module docstring (`target`: where the warehouse is)."""
    wh = warehouse(project_dir, target) if target is not None else None
    now = time.time() if now is None else now
    beat = heartbeat.read(project_dir)
    alive = bool(beat and beat.get("running") and now - beat.get("updated_at", 0) < STALE_S)
    return {
        "version": VERSION,
        "service": {"running": alive, "pid": (beat or {}).get("pid"),
                    "updated_at": iso((beat or {}).get("updated_at"))},
        "models": [model_status(project_dir, p, beat, alive, now, wh) for p in plans],
    }
