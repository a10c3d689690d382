"""Spark settings for a small micro-batch of an `incremental` query (docs/design.md §2.9).

Spark's adaptive execution runs each shuffle and broadcast of a query as a job of its own and
plans the rest again after each: on a catch-up micro-batch of millions of rows that pays (the
sink write's rebalance is split and packed by it), on a micro-batch of a few thousand rows it
is fixed cost, paid in every one of the batch's actions. `begin` turns it off for a
micro-batch whose new rows (all inputs, counted by the batch's stats) are fewer than
`ROWS`; `end` puts back what was set. The settings change how Spark runs the batch, never
its rows (docs/semantics.md, "Stream runs").

The conf is set on the micro-batch's own session: `foreachBatch` hands each query's batches a
session of that query, so no other query sees it.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import SparkSession

ADAPTIVE = "spark.sql.adaptive.enabled"
ROWS = 10_000


@dataclass(frozen=True)
class Saved:
    """The setting `begin` replaced (None: it was not set in the session)."""

    value: str | None


def begin(spark: SparkSession, rows: int) -> Saved | None:
    """Turn adaptive execution off for a batch of `rows` new rows below `ROWS`; returns what
    to put back with `end` (None: nothing was changed)."""
    if rows >= ROWS:
        return None
    saved = Saved(spark.conf.get(ADAPTIVE, None))
    spark.conf.set(ADAPTIVE, "false")
    return saved


def end(spark: SparkSession, saved: Saved | None) -> None:
    """Put back the setting `begin` replaced."""
    if saved is None:
        return
    if saved.value is None:
        spark.conf.unset(ADAPTIVE)
    else:
        spark.conf.set(ADAPTIVE, saved.value)
