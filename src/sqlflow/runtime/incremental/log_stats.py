"""A micro-batch's statistics of one input read from its new files' Delta statistics, when
they prove that no new row is quarantined (docs/design.md §2.9): no Spark job.

A micro-batch of an `incremental` join must know, before it plans the join, how many rows
each input brought, how many of them the quarantine rule takes and why, and where the clean
rows' event times lie (the prune ranges of the other side's older rows). Counting that is a
Spark job over the new rows (`MicroBatch._stats`), some tenths of a second on two cores for a
batch of a thousand rows. Delta records, for each data file, its row count, NULL counts and
the minimum and maximum of its first columns. When they say, file by file, that

- the event-time column (a TIMESTAMP) is never NULL, so neither `null_event_time` nor
  `malformed` (docs/design.md §2.1) can apply,
- its lowest event time is not before its newest ingest time less the allowed lateness, so no
  row is `late`, and its newest event time is not after its oldest ingest time plus the future
  tolerance, so no row is `future` (for each row: event >= min event >= max ingest - lateness
  >= its ingest - lateness),

then every new row is clean, its count is the files' row count, and the range of each prune
column holds within the files' ranges. Delta truncates a timestamp statistic to the
millisecond, so every bound is widened by one (`file_stats.span`): a wider prune range keeps
more older rows, each of which the join's own condition still tests, so the join's rows are
the same. Anything the statistics do not say (a column past the ones Delta collects, a file
without statistics, a STRING event time, a Kafka payload's error column) means "not proven",
and the micro-batch counts with Spark as before. An outer join needs each input's exact newest
ingest time (its padding frontier): it always counts with Spark.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlflow.runtime.delta import file_stats


@dataclass(frozen=True)
class Rule:
    """What the proof needs of one input: its event-time and ingest-time columns (lower case;
    `ingest` None when the rows have none: then nothing is late or future), the input's
    allowed lateness and future tolerance (µs), and the columns whose range the other side's
    prune ranges read (lower case)."""

    event: str
    ingest: str | None
    lateness_us: int
    future_us: int
    ranged: tuple[str, ...] = ()


@dataclass(frozen=True)
class Clean:
    """An input's new rows, proven clean: how many, a `(low, high)` µs per ranged column that
    holds every non-NULL value of it (absent: NULL in every row), and their newest ingest time
    as recorded (at most a millisecond below the true one; None: no ingest column, or NULL
    in every row)."""

    rows: int
    ranges: dict[str, tuple[int, int]] = field(default_factory=dict)
    newest_ingest_us: int | None = None


def prove_clean(adds: list[dict[str, Any]], rule: Rule) -> Clean | None:
    """`Clean` for the rows of the data files `adds` (Delta `add` actions), or None when their
    statistics do not prove every row clean by `rule`.

    >>> def add(n, t, ingest, nulls=0):
    ...     return {"stats": '{"numRecords": %d, "nullCount": {"t": %d, "i": 0},'
    ...             '"minValues": {"t": "%s", "i": "%s"}, "maxValues": {"t": "%s", "i": "%s"}}'
    ...             % (n, nulls, t[0], ingest[0], t[1], ingest[1])}
    >>> rule = Rule("t", "i", lateness_us=60_000_000, future_us=1_000_000, ranged=("t",))
    >>> s, m = "1970-01-01T00:01:00.000Z", "1970-01-01T00:01:30.000Z"
    >>> found = prove_clean([add(3, (s, m), (m, m))], rule)
    >>> found.rows, found.ranges["t"], found.newest_ingest_us
    (3, (59999000, 90000999), 90000000)
    >>> prove_clean([add(3, (s, m), (m, m), nulls=1)], rule) is None  # a NULL event time
    True
    >>> late = Rule("t", "i", lateness_us=1_000_000, future_us=1_000_000)
    >>> prove_clean([add(3, (s, m), (m, m))], late) is None  # 30 s behind, 1 s allowed
    True
    >>> prove_clean([], rule)
    Clean(rows=0, ranges={}, newest_ingest_us=None)
    """
    rows, newest = 0, None
    ranges: dict[str, tuple[int, int]] = {}
    for add in adds:
        stats = file_stats.stats(add)
        count = stats.get("numRecords") if stats else None
        if not isinstance(count, int):
            return None
        if count == 0:
            continue
        if file_stats.nulls(stats, rule.event) != 0:
            return None
        event = file_stats.span(stats, rule.event)
        if not event:
            return None
        if rule.ingest is not None:
            ingest = file_stats.span(stats, rule.ingest)
            if ingest is None:
                return None
            if ingest:
                if event[0] < ingest[1] - rule.lateness_us or event[1] > ingest[0] + rule.future_us:
                    return None
                recorded = file_stats.span(stats, rule.ingest, widen=False)
                assert recorded  # recorded when the widened span is
                newest = recorded[1] if newest is None else max(newest, recorded[1])
        for column in rule.ranged:
            found = file_stats.span(stats, column)
            if found is None:
                return None
            if found:
                low, high = ranges.get(column, found)
                ranges[column] = (min(low, found[0]), max(high, found[1]))
        rows += count
    return Clean(rows, ranges, newest)
