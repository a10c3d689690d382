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
"lag_seconds", "newest_ingest_at", "rows_in_1h", "rows_out_1h", "quarantined_1h", "quarantined",
"dirty_partitions", "provisional_partitions", "open_partitions", "journal_entries",
"versions_behind", "last_error"}], "commit_log"}`; times are
ISO-8601 UTC; `lag_seconds` is ingest-time lag, now minus `newest_ingest_at` (the newest
ingest time of the rows the model processed; null for an input without an ingest time, or
before its first micro-batch); `versions_behind` maps each stream input to the Delta versions it has not
delivered yet (null: unknown, e.g. a table outside the local warehouse). The commit log is read
from its Delta files with pyarrow (`runtime.delta.logfiles`): `open_partitions` lists the
model's tables' dirty or provisional partitions not settled since, each `{table, partition,
dirty, provisional, reasons, since}` (what `sqlflow repair` would rewrite);
`dirty_partitions` also holds those the running service saw; `commit_log` says `read`,
`absent`, or why the log could not be read without Spark (`status --commit-log` reads it).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sqlflow.compiler import compile_project
from sqlflow.engine.session import spark_conf
from sqlflow.planning.plan import COMMIT_LOG
from sqlflow.project.runmode import STATE_DIR
from sqlflow.runtime import heartbeat, offsets
from sqlflow.runtime.delta import commitlog_files, logfiles

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


def commit_log_rows(wh: Path | None) -> tuple[list[dict[str, Any]] | None, str]:
    """The commit log's rows read from its files (pyarrow, no JVM), and how it went: `read`,
    `absent` (no log yet), or why it could not be read (then `status --commit-log` can)."""
    if wh is None:
        return None, "unknown warehouse (not a local path)"
    db, _, name = COMMIT_LOG.partition(".")
    folder = wh / f"{db}.db" / name
    if not (folder / "_delta_log").is_dir():
        return [], "absent"
    try:
        return logfiles.read_rows(folder), "read"
    except (logfiles.Unsupported, OSError) as exc:
        return None, f"unreadable without Spark: {exc}"


def model_status(project_dir: Path, plan: Any, beat: dict[str, Any] | None, alive: bool,
                 now: float, wh: Path | None = None,
                 log: list[dict[str, Any]] | None = None) -> dict[str, Any]:
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
    found = commitlog_files.open_partitions(log, [t for t, _ in plan.outputs]) if log else []
    dirty = sorted({*h.get("dirty", []), *(p["partition"] for p in found if p["dirty"])})
    return {
        "name": plan.model,
        "path": plan.path,
        "state": state,
        "restarts": h.get("restarts", 0),
        "last_batch_id": last,
        "last_batch_at": iso(committed_at),
        "last_batch_seconds": h.get("last_batch_seconds"),
        "in_flight": bool(offsets) and offsets[-1] != last,
        # ingest-time lag: now minus the newest ingest time processed (null: unknown, e.g. an
        # input without an ingest time: `versions_behind` says how far behind it is)
        "lag_seconds": round(now - h["newest_ingest_at"], 3) if h.get("newest_ingest_at") else None,
        "newest_ingest_at": iso(h.get("newest_ingest_at")),
        "rows_in_1h": sum(int(b[1]) for b in recent),
        "rows_out_1h": sum(int(b[2]) for b in recent),
        "quarantined_1h": sum(int(b[3]) for b in recent),
        "quarantined": h.get("quarantined", {}),
        "dirty_partitions": dirty,
        "provisional_partitions": sorted({p["partition"] for p in found if p["provisional"]}),
        "open_partitions": [{**p, "since": _iso_dt(p["since"])} for p in found],
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
    log, how = commit_log_rows(wh)
    return {
        "version": VERSION,
        "service": {"running": alive, "pid": (beat or {}).get("pid"),
                    "updated_at": iso((beat or {}).get("updated_at"))},
        "commit_log": how,
        "models": [model_status(project_dir, p, beat, alive, now, wh, log) for p in plans],
    }


def _iso_dt(value: Any) -> str | None:
    """A commit-log timestamp (pyarrow: aware UTC, or naive UTC) as ISO-8601 UTC."""
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return str(value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
