"""Binding a micro-batch's frames to the plan's temp views without tying a cache to the view.

Spark's `dropTempView` also uncaches a cached plan equal to the view's own (the cache manager's
`uncacheQuery` with the view's analysed plan). A micro-batch binds its new rows, cached, and the
older rows it holds, cached, to the plan's views and drops the views at its end
(`MicroBatch._drop_views`); a view bound to exactly such a frame took its cache with it, and the
held runs and copies (`held`, `copies`) that keep the frame for the next micro-batches read it
again from the micro-batch's input files. Each view therefore reads its frame through a filter
that keeps every row: a plan of its own, which still reads the frame's cache and which Spark's
optimizer removes. Dropping the view then leaves every cache as it was; the frames' owners
unpersist them (docs/design.md, "The runtime")."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F


def bind(frame: DataFrame, view: str) -> None:
    """Bind `view` to `frame`'s rows, through a plan of its own (the module's docstring)."""
    frame.where(F.lit(True)).createOrReplaceTempView(view)
