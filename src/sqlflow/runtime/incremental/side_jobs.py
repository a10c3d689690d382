"""A micro-batch's independent collections run at once, on both cores (docs/design.md §2.9).

A micro-batch of a join held on the driver takes each input's new rows there (`toArrow`), one
Spark job per input of one task each. Run one after the other, the second job's planning and
its task wait for the first's, while the machine's other core idles. Here the first frame is
collected in the calling thread (the stream's) and the others, at the same time, in one worker
thread the query keeps for its micro-batches.

A Spark job belongs to its JVM thread's local properties: the streaming query's job group
(what `query.stop()` cancels) and the micro-batch's SQL execution. The worker copies the calling
thread's properties before every collection, so its jobs are the micro-batch's as much as the
calling thread's are (what PySpark's `InheritableThread` does for a new thread). Where a Python
thread is not pinned to a JVM thread of its own (py4j without its client server) or there is no
JVM here (Spark Connect), every frame is collected in the calling thread, one after the other.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession


def _pinned(spark: SparkSession) -> bool:
    """Whether each Python thread here has a JVM thread of its own (py4j's client server)."""
    if getattr(spark, "_jvm", None) is None:
        return False
    from py4j.clientserver import ClientServer
    from pyspark import SparkContext

    return isinstance(SparkContext._gateway, ClientServer)


class SideJobs:
    """One worker thread for a query's micro-batches, started at its first use; `close` ends it."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None

    def to_arrow(self, spark: SparkSession, frames: list[DataFrame]) -> list[pa.Table]:
        """Each frame's rows on the driver (`toArrow`), in the order given: the first in this
        thread, the others in the worker at the same time. An error of any collection is raised
        once every collection has ended (none runs on after the micro-batch)."""
        if len(frames) < 2 or not _pinned(spark):
            return [frame.toArrow() for frame in frames]
        jsc = spark.sparkContext._jsc.sc()
        properties = jsc.getLocalProperties().clone()  # the calling thread's (the stream's)

        def collect(frame: DataFrame) -> pa.Table:
            jsc.setLocalProperties(properties)
            return frame.toArrow()

        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlflow-side-jobs")
        others: list[Future[pa.Table]] = [self._pool.submit(collect, frame) for frame in frames[1:]]
        try:
            first = frames[0].toArrow()
        finally:
            for future in others:
                future.exception()  # waits; the error, if any, is raised below
        return [first, *(future.result() for future in others)]

    def close(self) -> None:
        """End the worker thread (a query's end)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
