"""Where a local Delta table's timestamp columns lie at one version, from the statistics Delta
keeps for each data file in its log: no Spark job, no data file read.

An `incremental` micro-batch reads an input's older rows as the table at one version plus the
micro-batch's held rows (`sqlflow.runtime.incremental.held`), pruned to the event-time range
the other side's new rows can match. Spark cannot know before it plans a scan that a version's
files hold no such row: every micro-batch planned the read and Delta's file skipping ran a
job over the version's file list (about 0.1 s an input on two cores). Once a running query's
new rows are past the version's newest event time, its rows can match nothing new; the
runtime asks `Extent` once per held version and leaves the table out of the micro-batch's
plan when no prune range reaches it (docs/semantics.md, "Stream runs").

Delta writes a timestamp's statistics truncated to the millisecond (`...T08:24:46.058Z`,
with the session's offset); a file's true maximum may be up to 999 µs above its recorded one,
so the extent widens each bound by a millisecond. A column whose statistics a file lacks (a
table that collects statistics on fewer columns, a file written without them) is unknown,
and unknown means "may match": the caller reads the table.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sqlflow.runtime.delta import logfiles

MS = 1_000  # µs: the precision of Delta's timestamp statistics
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


@dataclass(frozen=True)
class Extent:
    """A table at one version: its live data files, and per timestamp column (lower case) a
    `(low, high)` in µs since the epoch that holds every non-NULL value of the column (a
    column with only NULLs has no entry in `empty`; a column in neither is unknown), and its
    rows (None: a file's statistics do not count them)."""

    files: int
    ranges: dict[str, tuple[int, int]] = field(default_factory=dict)
    empty: frozenset[str] = frozenset()  # columns that are NULL in every row
    rows: int | None = None

    def may_hold(self, column: str, low: int, high: int) -> bool:
        """Whether a row's `column` may lie in `[low, high]` µs (False only when known not to).

        >>> e = Extent(2, {"t": (1_000, 5_000)})
        >>> e.may_hold("t", 5_001, 9_000), e.may_hold("t", 0, 999), e.may_hold("t", 4_000, 4_000)
        (False, False, True)
        >>> e.may_hold("other", 0, 1), Extent(0).may_hold("t", 0, 1)
        (True, False)
        """
        if self.files == 0 or column.lower() in self.empty:
            return False
        known = self.ranges.get(column.lower())
        return known is None or known[0] <= high and low <= known[1]


def extent(table_dir: Path, version: int, columns: list[str]) -> Extent | None:
    """The `Extent` of timestamp `columns` of the local Delta table at `table_dir` as of
    `version`; None when its log cannot be read exactly here (`logfiles.Unsupported`: deletion
    vectors, column mapping, a version the log no longer holds, not a Delta folder)."""
    try:
        adds = logfiles.live_adds(table_dir, version)
    except (logfiles.Unsupported, FileNotFoundError, OSError, ValueError):
        return None
    ranges: dict[str, tuple[int, int]] = {}
    unknown: set[str] = set()
    seen: set[str] = set()  # columns with a non-NULL value somewhere
    rows: int | None = 0
    for add in adds.values():
        known = stats(add)
        count = known.get("numRecords") if known else None
        rows = rows + count if rows is not None and isinstance(count, int) else None
        for column in columns:
            name = column.lower()
            found = span(known, name)
            if found is None:
                unknown.add(name)
            elif found:
                seen.add(name)
                first, last = found
                low, high = ranges.get(name, (first, last))
                ranges[name] = (min(low, first), max(high, last))
    names = {c.lower() for c in columns}
    return Extent(len(adds), {c: r for c, r in ranges.items() if c not in unknown},
                  frozenset(names - seen - unknown) if adds else frozenset(), rows)


def stats(add: dict[str, Any]) -> dict[str, Any] | None:
    """The statistics of one `add` action (`numRecords`, `minValues`, ...), or None."""
    raw = add.get("stats")
    try:
        found = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def span(stats: dict[str, Any] | None, column: str, *,
         widen: bool = True) -> tuple[int, int] | tuple[()] | None:
    """One file's `(low, high)` µs for `column` (lower case), widened by Delta's truncation
    (`widen=False`: as recorded, each bound at most a millisecond below the true one), `()`
    when every row of it is NULL there, None when its statistics do not say.

    >>> stats = {"numRecords": 2, "nullCount": {"T": 0},
    ...          "minValues": {"T": "1970-01-01T00:00:00.001Z"},
    ...          "maxValues": {"T": "1970-01-01T01:00:00.002+01:00"}}
    >>> span(stats, "t"), span(stats, "t", widen=False)
    ((0, 2999), (1000, 2000))
    >>> span({"numRecords": 2, "nullCount": {"t": 2}}, "t"), span({"numRecords": 2}, "t")
    ((), None)
    """
    if stats is None:
        return None
    count, none = stats.get("numRecords"), nulls(stats, column)
    if isinstance(count, int) and none is not None and none >= count:
        return ()
    low = _micros(_field(stats.get("minValues"), column))
    high = _micros(_field(stats.get("maxValues"), column))
    if low is None or high is None:
        return None
    return (low - MS, high + MS - 1) if widen else (low, high)


def nulls(stats: dict[str, Any] | None, column: str) -> int | None:
    """How many rows of one file are NULL in `column` (lower case); None when not recorded."""
    found = _field(stats.get("nullCount") if stats else None, column)
    return found if isinstance(found, int) else None


def _field(values: Any, column: str) -> Any:
    """`values[column]`, matched without regard to case (Spark's column names)."""
    if not isinstance(values, dict):
        return None
    for key, value in values.items():
        if key.lower() == column:
            return value
    return None


def _micros(text: Any) -> int | None:
    """A Delta timestamp statistic (`2026-11-28T08:24:46.058Z`, or with an offset) as µs since
    the epoch; None for anything else (a date, a string column's value, a naive time)."""
    if not isinstance(text, str):
        return None
    try:
        moment = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    delta = moment - _EPOCH
    return delta.days * 86_400_000_000 + delta.seconds * 1_000_000 + delta.microseconds
