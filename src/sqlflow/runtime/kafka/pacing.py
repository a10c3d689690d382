"""Source control of a Kafka archive query: its rate, its playback speed, and its alignment with
the other sources of its group (docs/semantics.md, "Kafka sources", "Source control").

Each archive micro-batch is held, before it is written, by:

- `Pacer.hold`, for the source's own limits: `max_rows_per_second` (a batch of n rows costs
  n / rate seconds, and the next batch waits until that is paid, so the rate holds across
  micro-batches), and `playback_speed` N (a batch whose newest record is t after the first
  record of the run is written no earlier than t / N after the run's first batch: a backlog
  plays at N times the pace its ingest timestamps advanced; once it has caught up the formula
  no longer holds anything and the source is live);
- `Aligner.hold`, for the group: a batch whose newest record is more than `max_skew` ahead
  of the slowest other source of the group waits until that source has caught up to within
  `max_skew`, has no more records, or has stopped. The slowest source never waits, so two
  sources never wait for each other.

Both only delay a write; no record is skipped or reordered, so the archive holds the same
records as without them.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from sqlflow.project.kafka import KafkaBinding


@dataclass
class Pacer:
    """One archive query's rate limit and playback speed (per source, across micro-batches).

    >>> now = [0.0]
    >>> p = Pacer(rows_per_second=10, clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s))
    >>> p.hold(rows=10, first_ms=0, last_ms=0), p.hold(rows=10, first_ms=0, last_ms=0)
    (0.0, 1.0)
    >>> q = Pacer(speed=10, clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s))
    >>> q.hold(rows=5, first_ms=0, last_ms=20_000), q.hold(rows=5, first_ms=20_000, last_ms=30_000)
    (2.0, 1.0)
    """

    rows_per_second: float | None = None
    speed: float | None = None
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    held_s: float = 0.0
    _ready_at: float | None = None
    _anchor: tuple[float, int] | None = None  # (clock at the first batch, its first record's ms)

    @classmethod
    def of(cls, binding: KafkaBinding) -> Pacer:
        return cls(rows_per_second=binding.max_rows_per_second, speed=binding.playback_speed)

    def hold(self, *, rows: int, first_ms: int | None, last_ms: int | None) -> float:
        """Wait until the batch (`rows` records, ingest times `first_ms`..`last_ms`) may be
        written; returns the seconds waited."""
        now = self.clock()
        due = now
        if self.rows_per_second and self._ready_at is not None:
            due = max(due, self._ready_at)
        if self.speed and first_ms is not None and last_ms is not None:
            if self._anchor is None:
                self._anchor = (now, first_ms)
            start, ts0 = self._anchor
            due = max(due, start + (last_ms - ts0) / 1000.0 / self.speed)
        waited = max(0.0, due - now)
        if waited:
            self.sleep(waited)
        if self.rows_per_second:
            self._ready_at = max(due, now) + rows / self.rows_per_second
        self.held_s += waited
        return waited


@dataclass
class Aligner:
    """The archive queries of one `alignment_group`, run together: each source's position is
    its ingest-time frontier (the newest record it archived; while a batch waits or is written,
    that batch's oldest record), `inf` once its query stopped, None before it is known.

    >>> a = Aligner(max_skew_ms=10, members=["a", "b"])
    >>> a.start("a", 0); a.start("b", None)
    >>> a.may_write("a", first_ms=5, last_ms=50)   # b unknown yet: wait
    False
    >>> a.start("b", 45); a.may_write("a", first_ms=5, last_ms=50)  # a is the slowest
    True
    >>> a.may_write("b", first_ms=45, last_ms=60)  # 60 > 0 + 10 while a is at 0
    False
    >>> a.finish("a"); a.may_write("b", first_ms=45, last_ms=60)
    True
    """

    max_skew_ms: int
    members: list[str]
    poll_s: float = 0.5
    positions: dict[str, float | None] = field(default_factory=dict)
    lead_ms: dict[str, int] = field(default_factory=dict)  # the largest lead a batch was written at
    held_s: dict[str, float] = field(default_factory=dict)
    _cond: threading.Condition = field(default_factory=threading.Condition)

    def start(self, name: str, frontier_ms: int | None) -> None:
        """`name`'s frontier before its query starts: its archive's newest record, if any."""
        with self._cond:
            self.positions[name] = frontier_ms
            self._cond.notify_all()

    def _others(self, name: str) -> list[float | None]:
        return [self.positions.get(m) for m in self.members if m != name]

    def may_write(self, name: str, *, first_ms: int, last_ms: int) -> bool:
        others = self._others(name)
        if any(p is None for p in others):
            return False
        slowest = min((p for p in others if p is not None), default=math.inf)
        return slowest == math.inf or first_ms <= slowest or last_ms <= slowest + self.max_skew_ms

    def hold(self, name: str, *, first_ms: int | None, last_ms: int | None) -> float:
        """Wait until `name`'s batch may be written (see the module); returns the seconds."""
        if first_ms is None or last_ms is None:  # an empty batch moves nothing
            return 0.0
        began = time.monotonic()
        with self._cond:
            previous = self.positions.get(name)
            self.positions[name] = first_ms if previous is None else max(previous, first_ms)
            self._cond.notify_all()
            while not self.may_write(name, first_ms=first_ms, last_ms=last_ms):
                self._cond.wait(self.poll_s)
            finite = [p for p in self._others(name) if p is not None and p != math.inf]
            if finite:
                lead = int(last_ms - min(finite))
                self.lead_ms[name] = max(self.lead_ms.get(name, lead), lead)
        waited = time.monotonic() - began
        self.held_s[name] = self.held_s.get(name, 0.0) + waited
        return waited

    def wrote(self, name: str, last_ms: int | None) -> None:
        """`name` archived its batch up to `last_ms`."""
        if last_ms is None:
            return
        with self._cond:
            previous = self.positions.get(name)
            self.positions[name] = last_ms if previous is None else max(previous, last_ms)
            self._cond.notify_all()

    def finish(self, name: str) -> None:
        """`name`'s query stopped (done, failed or idle): it holds no one back any more."""
        with self._cond:
            self.positions[name] = math.inf
            self._cond.notify_all()
