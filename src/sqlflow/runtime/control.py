"""Steering a running stream service: `sqlflow ctl` writes `<project>/.sqlflow/service/
control.json`, the service reads it every poll (docs/semantics.md, "The stream service").
No JVM and no socket: a file the operator can also read.

`{"paused": [model, ...], "rates": {model: {source: rows per second}}}`

>>> import tempfile
>>> d = tempfile.mkdtemp()
>>> pause(d, "a"); set_rate(d, "b", "ods.imps", 50.0)
>>> c = read(d); (sorted(c.paused), c.rate("b", "ods.imps"), c.rate("a", "x"))
(['a'], 50.0, None)
>>> resume(d, "a"); read(d).paused
frozenset()
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlflow.runtime.heartbeat import service_dir, write_atomic


def control_path(project_dir: Path | str) -> Path:
    return service_dir(project_dir) / "control.json"


@dataclass(frozen=True)
class Controls:
    paused: frozenset[str] = frozenset()
    rates: dict[str, dict[str, float]] = field(default_factory=dict)

    def rate(self, model: str, source: str) -> float | None:
        """Rows per second `model` may read from `source`, or None: unlimited."""
        return self.rates.get(model, {}).get(source)


def _load(project_dir: Path | str) -> dict[str, Any]:
    try:
        value = json.loads(control_path(project_dir).read_text())
    except (FileNotFoundError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def read(project_dir: Path | str) -> Controls:
    raw = _load(project_dir)
    rates = {str(m): {str(s): float(r) for s, r in v.items()}
             for m, v in (raw.get("rates") or {}).items() if isinstance(v, dict)}
    return Controls(frozenset(map(str, raw.get("paused") or ())), rates)


def pause(project_dir: Path | str, model: str) -> None:
    raw = _load(project_dir)
    raw["paused"] = sorted({*raw.get("paused", ()), model})
    write_atomic(control_path(project_dir), raw)


def resume(project_dir: Path | str, model: str) -> None:
    raw = _load(project_dir)
    raw["paused"] = sorted(set(raw.get("paused", ())) - {model})
    write_atomic(control_path(project_dir), raw)


def set_rate(project_dir: Path | str, model: str, source: str, rows_per_s: float) -> None:
    """Limit `model`'s reads from `source` to `rows_per_s` rows per second (0 or less: no limit)."""
    raw = _load(project_dir)
    rates = raw.setdefault("rates", {}).setdefault(model, {})
    if rows_per_s > 0:
        rates[source] = rows_per_s
    else:
        rates.pop(source, None)
    write_atomic(control_path(project_dir), raw)
