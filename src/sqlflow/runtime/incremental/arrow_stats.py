"""A micro-batch's statistics of one input counted on the driver, from its new rows taken there
as Arrow (docs/design.md §2.9; `MicroBatch._arrow_stats`).

A small micro-batch whose inputs are held by key takes each input's clean new rows to the
driver anyway (the key index is probed with them and holds them). Spark computes, beside the
rows, each row's quarantine reason and the values the stats job takes extremes of (its own
column expressions, so the rules are Spark's in both ways of counting); this module counts
what the stats job would: the rows per reason, the clean rows, and the lowest and highest of
each value over them (a value is NULL on a quarantined row, as in the job's `when(clean, ...)`,
and NULLs are skipped, as Spark's `min` and `max` skip them).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc


@dataclass(frozen=True)
class Counted:
    """What `count` found: rows per quarantine reason (reasons with none left out), the clean
    rows (every column `count` was given, the reason and value columns too), and per value its
    lowest and highest over them (None: NULL in every clean row, or no clean row)."""

    reasons: dict[str, int]
    rows: pa.Table
    lows: dict[str, int | None] = field(default_factory=dict)
    highs: dict[str, int | None] = field(default_factory=dict)

    @property
    def clean(self) -> int:
        return self.rows.num_rows


def count(table: pa.Table, reason: str, values: dict[str, str]) -> Counted:
    """`Counted` of `table`, whose column `reason` is each row's quarantine reason (NULL: clean)
    and whose columns named in `values` (name -> column) hold the values to take extremes of.

    >>> t = pa.table({"x": [1, 2, 3, 4], "why": [None, "late", None, "late"],
    ...               "v": pa.array([10, None, 30, None], pa.int64())})
    >>> c = count(t, "why", {"ingest": "v"})
    >>> c.reasons, c.clean, c.lows, c.highs, c.rows.column("x").to_pylist()
    ({'late': 2}, 2, {'ingest': 10}, {'ingest': 30}, [1, 3])
    >>> empty = count(t.slice(0, 0), "why", {"ingest": "v"})
    >>> empty.reasons, empty.clean, empty.lows, empty.highs
    ({}, 0, {'ingest': None}, {'ingest': None})
    """
    why = table.column(reason)
    reasons: dict[str, int] = {}
    if why.null_count < len(why):
        for entry in pc.value_counts(pc.drop_null(why)).to_pylist():
            reasons[entry["values"]] = entry["counts"]
    rows = table.filter(pc.is_null(why))
    lows: dict[str, int | None] = {}
    highs: dict[str, int | None] = {}
    for name, column in values.items():
        extremes = pc.min_max(rows.column(column)).as_py()
        lows[name], highs[name] = extremes["min"], extremes["max"]
    return Counted(reasons, rows, lows, highs)
