"""What a run returns: plain frozen values the report module renders (`sqlflow.report`).

The runtime never prints; every runtime function returns (or yields) these, and
`sqlflow.report.summary` turns them into the lines and tables a user sees.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any

from sqlflow.errors import SqlflowError
from sqlflow.runtime import quarantine as Q
from sqlflow.runtime.delta.sinks import WriteResult


@dataclass(frozen=True)
class DateRange:
    """Inclusive dates of a backfill, e.g. `DateRange(date(2026, 11, 1), date(2026, 11, 3))`."""

    start: date
    end: date

    @classmethod
    def of(cls, start: date | None, end: date | None) -> DateRange | None:
        if start is None and end is None:
            return None
        if start is None or end is None:
            raise SqlflowError("a backfill range needs both --start and --end (inclusive dates)",
                               hint="e.g. --start 2026-11-01 --end 2026-11-01 for one day")
        if start > end:
            raise SqlflowError(f"--start {start} is after --end {end}",
                               hint="swap them; both dates are included")
        return cls(start, end)


@dataclass(frozen=True)
class InputRead:
    """One input as the run read it: the Delta version (pinned for clean-view inputs)."""

    relation: str
    version: int | None
    view: str | None = None


@dataclass(frozen=True)
class QuarantineCount:
    input: str
    reason: str
    rows: int


@dataclass(frozen=True)
class RunResult:
    """What one model's backfill did; `dates` is None for a full run (or a full rebuild).
    `route`: on the last target of a routed group, the group's `RouteReport` (file budgets,
    committed hours)."""

    model: str
    dates: DateRange | None
    inputs: tuple[InputRead, ...]
    sink: WriteResult
    quarantine: WriteResult | None
    quarantined: tuple[QuarantineCount, ...]
    seconds: float
    dims: tuple[Any, ...] = ()  # snapshot.DimUse per output partition and dimension
    route: Any = None

    def quarantined_by_reason(self) -> dict[str, int]:
        out = dict.fromkeys(Q.REASONS, 0)
        for q in self.quarantined:
            out[q.reason] = out.get(q.reason, 0) + q.rows
        return out


@dataclass(frozen=True)
class StreamResult:
    """What one model's bounded stream run did, batch by batch (`BatchReport`s of its
    runtime: `microbatch.BatchReport`, `stateful.StatefulReport` or `routing.RouteReport`)."""

    model: str
    batches: tuple[Any, ...]
    seconds: float

    @property
    def rows_out(self) -> int:
        return sum(b.rows_out for b in self.batches)

    @property
    def quarantined(self) -> int:
        return sum(b.quarantined for b in self.batches)

    @property
    def padded(self) -> int:
        return sum(getattr(b, "padded", 0) for b in self.batches)

    @property
    def dirty(self) -> tuple[tuple[str, str], ...]:
        """(partition, reason) of every partition a micro-batch found dirty (docs/semantics.md,
        "Repair")."""
        return tuple(d for b in self.batches for d in getattr(b, "dirty", ()))


@dataclass(frozen=True)
class StreamRow:
    """One line of a stream run's summary: a model's stream query, or its batch plan run once
    (a model without a stream plan)."""

    model: str
    kind: str  # "stream" or "batch"
    batches: int
    rows: int
    quarantined: int
    seconds: float
    dirty: int
    state: str = ""  # the stream service: how the model's region ended (stopped / failed)
    restarts: int = 0
    error: str | None = None  # a failed model's error, at its file
