"""A sink's rows rebalanced by its partition columns, in parts of a size of their own.

A partitioned write is rebalanced by its partition columns (`sinks.write`): one shuffle sends a
partition's rows to one task, and adaptive execution merges small parts and splits a part
larger than its advisory size, so a write adds about one file per partition, each up to that
size. Spark's `rebalance` hint takes that size from the session
(`spark.sql.adaptive.advisoryPartitionSizeInBytes`), which also sizes every join's and
aggregation's shuffle parts: a profile that lowers it to keep a join task's memory small (the
embedded one, docs/design.md §4) would make a large backfill's files as small.

`by_partition` gives the rebalance a size of its own, `FILE_BYTES`, on a classic session: it
builds Spark's `RebalancePartitions` node with its advisory size set (the field Spark 4.2 has
and no hint of 4.2 sets) through the session's JVM. The column names become unresolved
attributes, each one name part, never SQL text. Over Spark Connect, which has no JVM on this
side, the hint stays and the server's session size applies (docs/deploy.md).
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sqlflow.identifiers import quote as quote_ident

# Spark's default advisory size: the size of a file a rebalanced write aims at, whatever the
# session's size for joins
FILE_BYTES = 64 * 1024 * 1024


def by_partition(rows: DataFrame, columns: Sequence[str]) -> DataFrame:
    """`rows` rebalanced by `columns` (at least one), its parts merged or split to about
    `FILE_BYTES` of shuffle output (the session's advisory size over Spark Connect)."""
    if not columns:
        raise ValueError("a rebalance needs at least one column")
    jdf = getattr(rows, "_jdf", None)  # (Connect: an AttributeError, so None)
    if jdf is None:
        return rows.hint("rebalance", *[F.col(quote_ident(c)) for c in columns])
    jvm = rows.sparkSession._jvm
    assert jvm is not None  # a classic frame's session has one
    scala = jvm.scala.jdk.javaapi
    names = jvm.java.util.ArrayList()
    for c in columns:
        names.add(jvm.org.apache.spark.sql.catalyst.analysis.UnresolvedAttribute.quoted(c))
    # a Scala Option of a JVM-side Long: py4j would hand a java.lang.Long back as a Python int
    boxed = jvm.java.util.stream.LongStream.of(FILE_BYTES).boxed().findFirst()
    node = jvm.org.apache.spark.sql.catalyst.plans.logical.RebalancePartitions(
        scala.CollectionConverters.asScala(names).toSeq(), jdf.queryExecution().logical(),
        scala.OptionConverters.toScala(jvm.java.util.Optional.empty()),
        scala.OptionConverters.toScala(boxed))
    frame = jvm.org.apache.spark.sql.classic.Dataset.ofRows(rows.sparkSession._jsparkSession, node)
    return DataFrame(frame, rows.sparkSession)
