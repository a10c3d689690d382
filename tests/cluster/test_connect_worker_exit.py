"""Over a real Spark Connect server: a `foreachBatch` function's cached frames live in the
server's JVM, which outlives the Python worker that runs the function; when the query stops,
`worker_exit.release_at_exit` (what `remote.RemoteMicroBatch` registers for its held rows) lets
them go, and without it they stay cached (Spark's behaviour the module works around)."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.spark

CLIENT = r"""
import sys, time
from pyspark.sql import SparkSession

spark = SparkSession.builder.remote(sys.argv[1]).getOrCreate()


class Holds:
    # caches one frame at its first batch, as the held rows are: released at the worker's end
    # when `release` is set
    def __init__(self, k, release):
        self.k, self.release, self.frame = k, release, None

    def __call__(self, df, batch_id):
        if self.frame is None:
            self.frame = df.sparkSession.range(1000).selectExpr(f"id * {self.k} AS x").persist()
            self.frame.count()
            if self.release:
                from sqlflow.runtime.incremental import worker_exit
                worker_exit.release_at_exit(self.frame.unpersist)


def cached(probe):
    level = probe.storageLevel
    return level.useMemory or level.useDisk


for k, release in ((9173, True), (9181, False)):
    probe = spark.range(1000).selectExpr(f"id * {k} AS x")  # the same plan as the worker's frame
    q = (spark.readStream.format("rate").option("rowsPerSecond", 5).load()
         .writeStream.foreachBatch(Holds(k, release)).trigger(processingTime="1 second").start())
    deadline = time.monotonic() + 120  # until batch 0 has cached its frame and returned
    while not any(p.batchId >= 1 for p in q.recentProgress) and time.monotonic() < deadline:
        time.sleep(0.5)
    running = cached(probe)
    q.stop()
    deadline = time.monotonic() + 20
    while cached(probe) and time.monotonic() < deadline:
        time.sleep(0.5)
    print(f"RESULT release={release} running={running} after={cached(probe)}", flush=True)
    probe.unpersist()
spark.stop()
"""


def test_a_stopped_querys_worker_releases_what_it_cached(connect_server):
    done = subprocess.run([sys.executable, "-c", CLIENT, connect_server.url],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "RESULT release=True running=True after=False" in done.stdout, done.stdout[-2000:]
    # the control: without the release the server keeps the stopped query's frame cached
    assert "RESULT release=False running=True after=True" in done.stdout, done.stdout[-2000:]
