"""`runtime.incremental.views.bind` on real Spark: dropping the view leaves the frame's cache."""

from __future__ import annotations

import pytest

from sqlflow.runtime.incremental import views

pytestmark = pytest.mark.spark


def _cached(spark, k):
    frame = spark.range(50).selectExpr("id", f"id * {k} AS v").persist()
    frame.count()
    return frame


def test_dropping_a_bound_view_keeps_the_frames_cache_and_the_view_reads_it(spark):
    frame = _cached(spark, 7)
    views.bind(frame, "sqlflow_test_bound")
    assert "InMemoryRelation" in spark.sql("SELECT * FROM sqlflow_test_bound")._jdf.queryExecution().optimizedPlan().toString()
    assert sorted(r.v for r in spark.table("sqlflow_test_bound").collect()) == [7 * i for i in range(50)]
    spark.catalog.dropTempView("sqlflow_test_bound")
    assert frame.storageLevel.useMemory
    frame.unpersist()


def test_spark_uncaches_a_frame_bound_as_it_is(spark):
    """What `bind` avoids: if Spark stops doing this, `bind`'s filter can go."""
    frame = _cached(spark, 11)
    frame.createOrReplaceTempView("sqlflow_test_plain")
    spark.catalog.dropTempView("sqlflow_test_plain")
    assert not frame.storageLevel.useMemory
