"""The rows of a held run's base version that later micro-batches can still match, cached once
(docs/design.md §2.9; docs/semantics.md, "Stream runs").

A running `incremental` join reads each input's older rows as the table at the held run's base
version plus the held batches (`sqlflow.runtime.incremental.held`), pruned to the event-time
range the other side's new rows can match. While those rows are recent, every micro-batch
planned a Delta read of that version and Delta's file skipping ran a job over its file list
(0.15-0.3 s a batch on two cores, `bench/microbatch_cost.py`, 2026-11-28). The prune ranges
move forward with the new rows, so the first batch that needs the version caches the rows
from a floor on instead: per prune column, the lowest bound of that batch's ranges, less the
other side's allowed lateness and future tolerance (how far behind an earlier batch a later
batch's clean rows can reach while ingest times move forward). A later batch whose ranges all
start at or above the floors reads the cache: exactly the rows the Delta read would give
(a row is in a range only if it is above the floor). A batch that reaches below a floor (its
inputs' ingest times went backwards) reads the table as before; nothing is ever wrong, only
slower. The cache goes with its run.

The window is a local checkpoint (the rows in the executors' block stores, its plan cut from
the table), not a cache of the read: Spark re-plans, and so reads again, every cached plan
over a table whose folder a Spark write touched, and in a stream service the model upstream
appends to this input in the same process every micro-batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

Keep = list[tuple[str, int, int]]  # (column, low µs, high µs): a row is kept in any of them


@dataclass
class Window:
    """The cached rows of one held version with each prune column at or above its floor."""

    rows: DataFrame | None
    floors: dict[str, int]  # column (lower case) -> µs

    def serves(self, keep: Keep) -> bool:
        """Whether every row of the version that `keep` keeps is in the window.

        >>> w = Window(None, {"t": 100})
        >>> w.serves([("T", 100, 200)]), w.serves([("t", 99, 200)]), w.serves([("u", 500, 600)])
        (True, False, False)
        >>> w.serves([])
        True
        """
        return all(c.lower() in self.floors and low >= self.floors[c.lower()] for c, low, _ in keep)

    def release(self) -> None:
        """Let go of the rows (Spark's context cleaner removes a checkpoint's blocks once
        nothing refers to its frame)."""
        self.rows = None


def floors(keep: Keep, margin_us: dict[str, int]) -> dict[str, int]:
    """Per column of `keep`, its lowest bound less the column's margin.

    >>> floors([("t", 500, 900), ("T", 300, 400), ("u", 50, 60)], {"t": 100})
    {'t': 200, 'u': 50}
    """
    out: dict[str, int] = {}
    for column, low, _ in keep:
        name = column.lower()
        out[name] = min(out.get(name, low), low - margin_us.get(name, 0))
    return out


def open_window(table: DataFrame, keep: Keep, margin_us: dict[str, int],
                as_timestamp, parallelism: int) -> Window:
    """The window of `table` (the version's clean rows) for a batch that keeps `keep`;
    `as_timestamp(column)` is the column as a timestamp. Read now, in at most `parallelism`
    partitions (the caller's `spark.sql.shuffle.partitions`: the version's files may be many
    small ones, a task each)."""
    bounds = floors(keep, margin_us)
    above: list[Column] = [as_timestamp(c) >= F.timestamp_micros(F.lit(low)) for c, low in bounds.items()]
    rows = table.where(reduce(lambda a, b: a | b, above)).coalesce(max(1, parallelism)).localCheckpoint()
    return Window(rows, bounds)
