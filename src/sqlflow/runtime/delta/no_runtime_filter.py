"""A write whose query reads Delta tables, planned without Spark's runtime (bloom) filter rule,
so the planning does not rebuild each input's latest Delta snapshot (docs/design.md §2.9).

A sink write (`DataFrameWriterV2.append`) is a V2 write command: Spark optimizes its query once
as part of the command, where Delta leaves its scans unprepared (Delta plans them again inside
its transaction), and the `InjectRuntimeFilter` rule then asks each scan for its size.
`TahoeLogFileIndex.sizeInBytes` is the size of the table's LATEST snapshot, whatever version
the scan reads (Delta 4.4), and a new latest snapshot computes its state for it: three Spark
jobs per input table that moved since the last look, in every micro-batch of a stream whose
inputs keep growing. The rule only ever adds a filter when one side of a join scans more than
`spark.sql.optimizer.runtime.bloomFilter.applicationSideScanSizeThreshold` (10 GB), so a
micro-batch's join loses nothing without it, and the rows are the same either way.
"""

from __future__ import annotations

from contextlib import AbstractContextManager

from pyspark.sql import SparkSession

from sqlflow.runtime.session_settings import changed

BLOOM_FILTER = "spark.sql.optimizer.runtime.bloomFilter.enabled"
SEMI_JOIN = "spark.sql.optimizer.runtimeFilter.semiJoinReduction.enabled"


def no_runtime_filter(spark: SparkSession) -> AbstractContextManager[None]:
    """Plan the queries run inside the block without runtime filters; the session's settings
    are restored after it."""
    return changed(spark, {BLOOM_FILTER: "false", SEMI_JOIN: "false"})
