"""The nodes of a dbt project that sqlflow leaves to dbt: snapshots, Python models, unit
tests (`unit_tests:`) and `microbatch` incremental models.

sqlflow never skips them silently: `load_project` (snapshots, Python models) and
`compile_project` (microbatch models) turn what they find here into one warning per kind,
which every command that compiles prints once, with the dbt command that builds them
(docs/authoring.md, "Bring your dbt project").
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from sqlflow.errors import Diagnostic, Location

_SNAPSHOT_BLOCK = re.compile(r"{%-?\s*snapshot\s+([A-Za-z_][A-Za-z0-9_]*)")


def dbt_only_notices(root: Path, model_paths: Iterable[str],
                     snapshot_paths: Iterable[str]) -> list[Diagnostic]:
    """One warning for the Python models, one for the snapshots and one for the unit tests
    the project has, if any.

    >>> dbt_only_notices(Path("/nonexistent"), ["models"], ["snapshots"])
    []
    """
    out = []
    python = [(f.stem, f.relative_to(root).as_posix())
              for mpath in model_paths for f in _files(root / mpath, "*.py")]
    if python:
        names = " ".join(name for name, _ in python)
        out.append(Diagnostic(
            f"sqlflow does not run Python models; it leaves {_listed(python)} to dbt",
            Location(python[0][1]),
            f"build them with `sqlflow dbt run --select {names}` (dbt's own runner)",
            severity="warning"))
    snapshots = [found for spath in snapshot_paths for found in _snapshots(root, root / spath)]
    if snapshots:
        out.append(Diagnostic(
            f"sqlflow does not run snapshots; it leaves {_listed(snapshots)} to dbt",
            Location(snapshots[0][1]),
            "build them with `sqlflow dbt snapshot` (dbt's timestamp and check strategies)",
            severity="warning"))
    units = [found for mpath in model_paths for found in _yml_entries(root, root / mpath, "unit_tests")]
    if units:
        out.append(Diagnostic(
            f"sqlflow does not run dbt unit tests; it leaves {_listed(units)} to dbt",
            Location(units[0][1]),
            "run them with `sqlflow dbt test --select test_type:unit` (dbt's own runner)",
            severity="warning"))
    return out


def is_microbatch(config: Any) -> bool:
    """An `incremental` model with dbt's `microbatch` strategy (dbt runs it batch by batch of
    its `event_time`, with `--event-time-start/--event-time-end`): sqlflow leaves it to dbt."""
    return config.materialized == "incremental" and str(
        config.incremental_strategy or "").strip().lower() == "microbatch"


def microbatch_notice(found: list[tuple[str, str]]) -> list[Diagnostic]:
    """One warning naming the microbatch models ((name, path) pairs) sqlflow does not build.

    >>> microbatch_notice([])
    []
    >>> print(microbatch_notice([("events", "models/events.sql")])[0].message)
    sqlflow does not run the `microbatch` incremental strategy; it leaves `events` (models/events.sql) to dbt
    """
    if not found:
        return []
    names = " ".join(name for name, _ in found)
    return [Diagnostic(
        f"sqlflow does not run the `microbatch` incremental strategy; it leaves {_listed(found)} "
        "to dbt", Location(found[0][1]),
        f"build them with `sqlflow dbt run --select {names}` (models reading them read the "
        "table dbt builds)", severity="warning")]


def _files(folder: Path, pattern: str) -> list[Path]:
    return sorted(folder.rglob(pattern)) if folder.is_dir() else []


def _snapshots(root: Path, folder: Path) -> list[tuple[str, str]]:
    """(name, path) of each snapshot: `{% snapshot %}` blocks in .sql files, and yml entries
    of `snapshots:` that name a `relation` (dbt 1.9's yml snapshots)."""
    found = []
    for file in _files(folder, "*.sql"):
        rel = file.relative_to(root).as_posix()
        found += [(name, rel) for name in _SNAPSHOT_BLOCK.findall(file.read_text(errors="replace"))]
    for file in [*_files(folder, "*.yml"), *_files(folder, "*.yaml")]:
        try:
            data = yaml.safe_load(file.read_text(errors="replace"))
        except yaml.YAMLError:
            continue  # dbt reports a broken yml; it is not a model file of ours
        entries = data.get("snapshots") if isinstance(data, dict) else None
        for entry in entries if isinstance(entries, list) else []:
            if isinstance(entry, dict) and isinstance(entry.get("name"), str) and "relation" in entry:
                found.append((entry["name"], file.relative_to(root).as_posix()))
    return found


def _yml_entries(root: Path, folder: Path, key: str) -> list[tuple[str, str]]:
    """(name, path) of each named entry of the top-level list `key` in the yml files under
    `folder`.

    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> _ = (root / "m.yml").write_text("unit_tests:\\n  - {name: t1, model: b}\\n")
    >>> _yml_entries(root, root, "unit_tests")
    [('t1', 'm.yml')]
    """
    found = []
    for file in [*_files(folder, "*.yml"), *_files(folder, "*.yaml")]:
        try:
            data = yaml.safe_load(file.read_text(errors="replace"))
        except yaml.YAMLError:
            continue  # a broken yml is reported where the project loads it
        entries = data.get(key) if isinstance(data, dict) else None
        found += [(e["name"], file.relative_to(root).as_posix()) for e in entries or []
                  if isinstance(entries, list) and isinstance(e, dict) and isinstance(e.get("name"), str)]
    return found


def _listed(found: list[tuple[str, str]]) -> str:
    return ", ".join(f"`{name}` ({path})" for name, path in found)
