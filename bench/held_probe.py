"""How a micro-batch reads the older rows a running query holds: scanned by Spark (a cluster
target), or probed by key on the driver (the embedded `local` target,
`sqlflow.runtime.incremental.keyed`). The design benchmark that chose the probe; it builds
both shapes itself rather than running a query.

    .venv/bin/python bench/held_probe.py [--held 30000,300000,1000000,3000000] [--new 15000]
                                         [--rounds 5]

For each held size it caches that many impressions (`req_id`, `ad_id`, `user_id`, `imp_ts`)
as one frame, as a held run does, and draws `--new` clicks of the newest held impressions
(same request and ad, a click 1-60 s after its impression). Then, side by side, `--rounds`
times each:

- `scan`: what an `incremental` micro-batch does today: Spark joins the new clicks to the
  cached impressions (a broadcast hash join of the new rows; every held row scanned to probe
  it) with the 20-minute interval condition, and the joined rows are collected as Arrow, as
  the sink's driver-side append collects them;
- `probe`: the held impressions kept as an Arrow table on the driver; the new clicks' keys
  collected; a left-semi join on (`req_id`, `ad_id`) picks the held rows that can match (a
  hash table of the new keys, probed by every held row in vectorized code); only those are
  handed to Spark, which runs the same join over them.

It checks that both give the same rows (as multisets), then prints the median seconds per
size and `probe / scan`. A benchmark, not a test: nothing asserts a time. Last line:

    held_probe: sizes=<n,...> scan=<s,...> probe=<s,...>
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter

JOIN = """
SELECT c.req_id, c.ad_id, c.click_ts, i.imp_ts, i.user_id AS imp_user_id
FROM clicks AS c JOIN {held} AS i
  ON c.req_id = i.req_id AND c.ad_id = i.ad_id
 AND i.imp_ts BETWEEN c.click_ts - INTERVAL 20 MINUTES AND c.click_ts
"""
KEYS = ["req_id", "ad_id"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--held", default="30000,300000,1000000,3000000", help="held impressions, by size")
    parser.add_argument("--new", type=int, default=15000, help="new clicks per micro-batch")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    sizes = [int(n) for n in args.held.split(",") if n.strip()]
    if not sizes or min(sizes) < args.new or args.rounds < 1:
        parser.error("every --held size must be at least --new, and --rounds at least 1")

    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[*]").appName("held_probe")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "4")
             .config("spark.sql.session.timeZone", "UTC").config("spark.driver.memory", "4g")
             .config("spark.sql.inMemoryColumnarStorage.compressed", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    scans, probes = [], []
    for size in sizes:
        scan, probe = measure(spark, size, args.new, args.rounds)
        scans.append(scan)
        probes.append(probe)
        print(f"held {size:>9,}: scan {scan:.3f}s  probe {probe:.3f}s  probe/scan {probe / scan:.2f}x",
              flush=True)
    spark.stop()
    print(f"held_probe: sizes={','.join(map(str, sizes))} scan={','.join(f'{s:.3f}' for s in scans)} "
          f"probe={','.join(f'{s:.3f}' for s in probes)}")
    return 0


def measure(spark, size: int, new: int, rounds: int) -> tuple[float, float]:
    """Median seconds of the scan and of the probe over `rounds` alternating rounds, after
    checking that they give the same rows."""
    from pyspark.sql import functions as F

    imps = (spark.range(size).select(
        F.concat(F.lit("r"), F.col("id").cast("string")).alias("req_id"),
        (F.col("id") % 500).alias("ad_id"),
        (F.col("id") % 99991).alias("user_id"),
        F.timestamp_seconds(F.lit(1_700_000_000) + F.col("id") * 1200 / size).alias("imp_ts"))
        .coalesce(max(1, size // 100_000)).persist())
    imps.count()
    clicks = (imps.orderBy(F.col("imp_ts").desc()).limit(new)
              .select("req_id", "ad_id", (F.col("imp_ts") + F.expr("make_interval(0, 0, 0, 0, 0, 0, 1 + pmod(hash(req_id), 60))"))
                      .alias("click_ts"))
              .persist())
    clicks.count()
    imps.createOrReplaceTempView("imps")
    clicks.createOrReplaceTempView("clicks")
    held = imps.toArrow()  # the driver's copy of the held rows (built once, as a run would grow it)
    try:
        want = spark.sql(JOIN.format(held="imps")).toArrow()
        if not want.num_rows or _rows(_probe(spark, clicks, held)) != _rows(want):
            raise SystemExit(f"held {size}: the probe's rows differ from the scan's (or none joined)")
        scan, probe = [], []
        for _ in range(rounds):
            began = time.perf_counter()
            spark.sql(JOIN.format(held="imps")).toArrow()
            scan.append(time.perf_counter() - began)
            began = time.perf_counter()
            _probe(spark, clicks, held)
            probe.append(time.perf_counter() - began)
        return statistics.median(scan), statistics.median(probe)
    finally:
        spark.catalog.dropTempView("imps")
        spark.catalog.dropTempView("clicks")
        imps.unpersist()
        clicks.unpersist()


def _probe(spark, clicks, held):
    """The join over only the held rows whose key a new click has (Arrow on the driver)."""
    keys = clicks.select(*KEYS).toArrow()
    matched = held.join(keys.group_by(KEYS).aggregate([]), keys=KEYS, join_type="left semi")
    spark.createDataFrame(matched).createOrReplaceTempView("probed")
    try:
        return spark.sql(JOIN.format(held="probed")).toArrow()
    finally:
        spark.catalog.dropTempView("probed")


def _rows(table) -> Counter:
    """An Arrow table's rows as a multiset of tuples."""
    return Counter(tuple(row.values()) for row in table.to_pylist())


if __name__ == "__main__":
    raise SystemExit(main())
