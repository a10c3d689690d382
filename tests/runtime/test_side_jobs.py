"""`side_jobs.SideJobs.to_arrow`: the frames' rows, in the order given, collected at once, each
collection's Spark job carrying the calling thread's local properties (the streaming query's
job group, which `query.stop()` cancels); an error of a collection in the worker is raised in
the calling thread once every collection has ended."""

from __future__ import annotations

import pyarrow as pa
import pytest

from sqlflow.runtime.incremental.side_jobs import SideJobs


def _frames(spark):
    left = spark.range(0, 3000).selectExpr("id", "id % 7 AS k")
    right = spark.range(0, 50).selectExpr("id * 10 AS id", "CAST(id AS STRING) AS s")
    return [left, right, left.where("k = 3")]


@pytest.mark.spark
def test_every_frame_s_rows_in_the_order_given(spark):
    jobs = SideJobs()
    try:
        frames = _frames(spark)
        got = jobs.to_arrow(spark, frames)
        want = [frame.toArrow() for frame in frames]
        assert [t.num_rows for t in got] == [3000, 50, 3000 // 7 + 1]
        for table, expected in zip(got, want, strict=True):
            assert table.sort_by("id").equals(expected.sort_by("id"))
        again = jobs.to_arrow(spark, frames[:2])  # the same worker, a second time
        assert again[1].sort_by("id").equals(want[1].sort_by("id"))
    finally:
        jobs.close()


@pytest.mark.spark
def test_the_worker_s_jobs_belong_to_the_calling_thread_s_job_group(spark):
    sc = spark.sparkContext
    tracker = sc.statusTracker()
    jobs = SideJobs()
    sc.setJobGroup("sqlflow-side-jobs-test", "side jobs")
    try:
        jobs.to_arrow(spark, _frames(spark))
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
        sc.setLocalProperty("spark.job.description", None)
        jobs.close()
    # one collection in this thread, two in the worker: a job each at least, every one the group's
    assert len(tracker.getJobIdsForGroup("sqlflow-side-jobs-test")) >= 3
    seen = set(tracker.getJobIdsForGroup("sqlflow-side-jobs-test"))
    spark.range(5).toArrow()  # after the reset: no group
    assert set(tracker.getJobIdsForGroup("sqlflow-side-jobs-test")) == seen


@pytest.mark.spark
def test_an_error_in_the_worker_is_raised_here(spark):
    jobs = SideJobs()
    try:
        good = spark.range(10)
        bad = spark.range(10).selectExpr("raise_error(CONCAT('side job failed at ', id)) AS x")
        with pytest.raises(Exception, match="side job failed at"):
            jobs.to_arrow(spark, [good, bad])
        tables = jobs.to_arrow(spark, [good, good])  # the worker still serves
        assert [t.num_rows for t in tables] == [10, 10]
        assert isinstance(tables[0], pa.Table)
    finally:
        jobs.close()
