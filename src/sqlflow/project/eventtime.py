"""The event-time block of an input: one frozen value from the source's yml to the plan.

A source table declares `event_time`, `ingest_time`, `allowed_lateness` and
`future_tolerance` (docs/semantics.md, "Late and malformed rows"); the compiler turns them
into one `EventTime` (durations in microseconds), the analyzer's `InputRel` carries it, and
so does the plan's `SourceBinding`, which the quarantine rule reads. A model's output keeps
the block of its stream inputs (`EventTime.widest`).

    >>> EventTime("click_ts", "ingest_ts", allowed_lateness_us=600_000_000).has_event_time
    True
    >>> EventTime.widest([EventTime("a", "i", 5, 1), EventTime("b", "j", 9, 0)])
    EventTime(event_time=None, ingest_time='i', allowed_lateness_us=9, future_tolerance_us=1)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class EventTime:
    """`event_time`: the column holding when the event happened (None: the input has no
    event time); `ingest_time`: the column holding when it arrived; a row is late when
    `event_time < ingest_time - allowed_lateness_us`, from the future when
    `event_time > ingest_time + future_tolerance_us`."""

    event_time: str | None = None
    ingest_time: str | None = None
    allowed_lateness_us: int = 0
    future_tolerance_us: int = 0

    @property
    def has_event_time(self) -> bool:
        return self.event_time is not None

    @classmethod
    def widest(cls, blocks: Iterable[EventTime]) -> EventTime:
        """What a model's output keeps of its stream inputs' blocks: the first one's ingest
        column and the largest lateness and tolerance (its event column is the model's own)."""
        found = list(blocks)
        if not found:
            return cls()
        return cls(None, found[0].ingest_time, max(b.allowed_lateness_us for b in found),
                   max(b.future_tolerance_us for b in found))


class HasEventTime:
    """The block's fields read through a value that carries it as `time` (the IR's `InputRel`,
    the plan's `SourceBinding`)."""

    time: EventTime

    @property
    def event_time(self) -> str | None:
        return self.time.event_time

    @property
    def ingest_time(self) -> str | None:
        return self.time.ingest_time

    @property
    def allowed_lateness_us(self) -> int:
        return self.time.allowed_lateness_us

    @property
    def future_tolerance_us(self) -> int:
        return self.time.future_tolerance_us
