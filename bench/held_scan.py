"""How much cheaper a micro-batch's scan of the held rows could be made without indexing
them: the held impressions as a running query holds them, against cheaper shapes of the
same rows. A design benchmark for issue 23 (p99 at 20,000 rows/s), not a benchmark of
code the product runs.

    .venv/bin/python bench/held_scan.py [--held 3000000] [--new 60000] [--pieces 24] [--rounds 6]

It holds `--held` impressions (the seven columns of `stg_ad_impressions`) as `--pieces` local
checkpoints, filled before timing (what a held run's merged pieces are once a batch has read
them: `runtime/incremental/held.py`), draws `--new` clicks of held impressions (same request
and ad, 60 s later), and times, alternating the order round by round, the 20-minute interval
join of the clicks to:

- `held`: the pieces as held today (every column of the input);
- `narrow`: the pieces cut to the four columns the join reads;
- `hash key`: every column plus a 64-bit hash of the join keys, the join's one equality
  key (a `LongHashedRelation` probe instead of building a key row per held row), the keys
  themselves checked after the probe;
- `both`: the four columns and the hash key.

Each join's rows are written to Spark's `noop` sink. It checks the three give the same rows
(as multisets), then prints every round, the medians and their ratios to `held`. A
benchmark, not a test: nothing asserts a time. Last line:

    held_scan: held=<s> narrow=<s> hash_key=<s> both=<s>
"""

from __future__ import annotations

import argparse
import statistics
import time

COLUMNS = ["req_id", "ad_id", "user_id", "imp_ts", "ingest_ts", "dt", "hour"]
READ = ["req_id", "ad_id", "user_id", "imp_ts"]  # what the join reads of the impressions
JOIN = """
SELECT c.req_id, c.ad_id, c.click_ts, i.imp_ts, i.user_id AS imp_user_id
FROM clicks AS c JOIN {held} AS i ON {on}
 AND i.imp_ts BETWEEN c.click_ts - INTERVAL 20 MINUTES AND c.click_ts
"""
KEYS_EQUAL = "c.req_id = i.req_id AND c.ad_id = i.ad_id"
# the real keys inside a `coalesce`: Spark does not take them as equality keys of the join
HASH_EQUAL = "c.k = i.k AND coalesce(c.req_id = i.req_id AND c.ad_id = i.ad_id, false)"
SHAPES = {"held": ("held", KEYS_EQUAL), "narrow": ("narrow", KEYS_EQUAL), "hash key": ("hashed", HASH_EQUAL),
          "both": ("narrow_hashed", HASH_EQUAL)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--held", type=int, default=3_000_000, help="held impressions")
    parser.add_argument("--new", type=int, default=60_000, help="new clicks per micro-batch")
    parser.add_argument("--pieces", type=int, default=24, help="held pieces (one partition each)")
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    if args.held < args.new or args.new < 1 or args.pieces < 1 or args.rounds < 1:
        parser.error("--held must be at least --new; --new, --pieces and --rounds at least 1")

    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from sqlflow.engine.session import SESSION_DEFAULTS

    builder = (SparkSession.builder.master("local[*]").appName("held_scan")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "4").config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.memory", "6g"))
    for key, value in SESSION_DEFAULTS.items():  # the codegen settings a running query has
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")

    t0 = 1_796_000_000_000_000  # µs; an impression every 100 µs of event time
    impressions = spark.range(args.held).select(
        F.concat(F.lit("req-"), F.col("id").cast("string")).alias("req_id"),
        (F.col("id") % 1000).alias("ad_id"), (F.col("id") % 100_000).alias("user_id"),
        F.timestamp_micros(F.lit(t0) + F.col("id") * 100).alias("imp_ts"),
        F.timestamp_micros(F.lit(t0 + 2_000_000) + F.col("id") * 100).alias("ingest_ts"),
        F.lit("2026-12-03").alias("dt"), F.lit("10").alias("hour"),
    ).withColumn("k", F.xxhash64("req_id", "ad_id"))
    step = args.held // args.new
    clicks = spark.range(args.new).select((F.col("id") * step).alias("n")).select(
        F.concat(F.lit("req-"), F.col("n").cast("string")).alias("req_id"),
        (F.col("n") % 1000).alias("ad_id"),
        F.timestamp_micros(F.lit(t0 + 60_000_000) + F.col("n") * 100).alias("click_ts"),
    ).withColumn("k", F.xxhash64("req_id", "ad_id")).coalesce(1).cache()
    clicks.count()
    clicks.createOrReplaceTempView("clicks")

    def held(columns: list[str]):
        pieces = [impressions.where(F.col("ad_id") % args.pieces == p).select(*columns).coalesce(1)
                  .localCheckpoint(eager=True) for p in range(args.pieces)]
        frame = pieces[0]
        for piece in pieces[1:]:
            frame = frame.unionByName(piece)
        return frame

    held(COLUMNS).createOrReplaceTempView("held")
    held(READ).createOrReplaceTempView("narrow")
    held([*COLUMNS, "k"]).createOrReplaceTempView("hashed")
    held([*READ, "k"]).createOrReplaceTempView("narrow_hashed")

    def query(name: str):
        view, on = SHAPES[name]
        return spark.sql(JOIN.format(held=view, on=on))

    rows = {name: query(name) for name in SHAPES}
    want = rows["held"]
    for name, got in rows.items():
        if got.exceptAll(want).count() or want.exceptAll(got).count():
            raise SystemExit(f"held_scan: `{name}` joined other rows than `held`")
    print(f"{want.count():,} joined rows, the same for every shape; {args.held:,} held, {args.new:,} new")

    def timed(name: str) -> float:
        began = time.perf_counter()
        query(name).write.format("noop").mode("overwrite").save()
        return time.perf_counter() - began

    for name in SHAPES:  # warm: each shape's code compiled once
        timed(name)
    seconds: dict[str, list[float]] = {name: [] for name in SHAPES}
    order = list(SHAPES)
    for r in range(args.rounds):
        for name in order if r % 2 == 0 else reversed(order):
            seconds[name].append(timed(name))
        print(f"round {r + 1}: " + ", ".join(f"{n} {s[-1]:.2f} s" for n, s in seconds.items()), flush=True)
    medians = {name: statistics.median(s) for name, s in seconds.items()}
    for name, m in medians.items():
        print(f"{name:8} median {m:.2f} s, {m / medians['held']:.2f}x held")
    print(f"held_scan: held={medians['held']:.3f} narrow={medians['narrow']:.3f} "
          f"hash_key={medians['hash key']:.3f} both={medians['both']:.3f}")
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
