"""The demo's ODS landing tables as Spark DataFrames: ad impressions, ad clicks, user events.

Each table starts from the "truth" (what happened, when) and then lands like a Kafka copy
does: an ingest time a few seconds after the event, the `dt`/`hour` partition of that ingest
time (a landing table is partitioned by arrival, not by event time), and the defects of
`scenario` at their documented rates. Two helper columns stay on the frames for the report:
`_defect` (the row's one defect, or "clean") and `_copy` (1 for a re-delivered duplicate).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from sqlflow.demo import scenario as S
from sqlflow.demo.noise import choice, index, normal, truncated_exponential, uniform, weighted, zipf_rank
from sqlflow.project.config import micros

US = 1_000_000
HOUR_US = 3600 * US
DAY_US = 24 * HOUR_US
CLEAN = "clean"
HELPER_COLUMNS = ("_defect", "_copy")

IMPRESSION_COLUMNS = ("req_id", "ad_id", "user_id", "imp_ts", "ingest_ts", "dt", "hour")
CLICK_COLUMNS = ("req_id", "ad_id", "user_id", "click_ts", "ingest_ts", "dt", "hour")
EVENT_COLUMNS = ("event_id", "user_id", "spmid", "event_type", "product", "event_ts", "ingest_ts",
                 "payload", "dt", "hour")




@dataclass(frozen=True)
class Scale:
    """The knobs of one generation: seed, the event-time range and the catalogue sizes."""

    seed: int
    rows: int
    days: int
    start: date
    partitions: int | None = None

    @property
    def start_us(self) -> int:
        return (self.start - date(1970, 1, 1)).days * DAY_US

    @property
    def ads(self) -> int:
        return min(max(int(self.rows * S.ADS_PER_ROW), S.MIN_ADS), S.MAX_ADS)

    @property
    def users(self) -> int:
        return min(max(int(self.rows * S.USERS_PER_ROW), S.MIN_USERS), S.MAX_USERS)

    def u(self, salt: str, *keys: Column) -> Column:
        return uniform(self.seed, salt, *(keys or (F.col("id"),)))

    def ids(self, spark: SparkSession, n: int) -> DataFrame:
        return spark.range(0, n, 1, self.partitions) if self.partitions else spark.range(n)


def _true_time_us(s: Scale, salt: str) -> Column:
    """Event time in microseconds: a uniform day, an hour from the daily curve, any microsecond."""
    day = index(s.u(f"{salt}:day"), s.days).cast("bigint")
    hour = weighted(s.u(f"{salt}:hour"), S.HOUR_WEIGHTS).cast("bigint")
    within = F.floor(s.u(f"{salt}:us") * F.lit(HOUR_US))
    return F.lit(s.start_us) + day * F.lit(DAY_US) + hour * F.lit(HOUR_US) + within


def _hashed_id(s: Scale, prefix: str) -> Column:
    h = F.xxhash64(F.lit(s.seed), F.lit(prefix), F.col("id"))
    return F.concat(F.lit(f"{prefix}-"), F.lower(F.lpad(F.hex(h), 16, "0")))


def _bands(u: Column, kinds: list[tuple[str, float]]) -> Column:
    """The first kind whose cumulative rate band holds u, else CLEAN: defects never overlap."""
    expr: Any  # the functions module, then a Column
    expr, acc = F, 0.0  # F.when starts the CASE chain, Column.when extends it
    for kind, rate in kinds:
        acc += rate
        expr = expr.when(u < F.lit(acc), F.lit(kind))
    return expr.otherwise(F.lit(CLEAN))


def land(df: DataFrame, s: Scale, salt: str, *, event_col: str, keys: tuple[str, ...],
         extra_defects: tuple[tuple[str, float], ...] = ()) -> DataFrame:
    """Give rows with `id` and `_true_us` their event time, ingest time, partitions and defects."""
    kinds = [("late", S.LATE_RATE), ("future", S.FUTURE_RATE),
             ("null_event_time", S.NULL_EVENT_TIME_RATE), ("null_key", S.NULL_KEY_RATE),
             *extra_defects]
    defect = F.col("_defect")
    normal_s = F.lit(S.INGEST_DELAY_MEAN_S) + F.lit(S.INGEST_DELAY_SD_S) * normal(
        s.seed, f"{salt}:delay", F.col("id"))
    delay_s = F.least(F.greatest(normal_s, F.lit(S.INGEST_DELAY_MIN_S)), F.lit(S.INGEST_DELAY_MAX_S))
    late_delay_us = (F.lit(micros(S.ALLOWED_LATENESS + S.LATE_EXTRA_MIN))
                     + F.floor(s.u(f"{salt}:late") * F.lit(micros(S.LATE_EXTRA_SPAN))))
    ingest_us = F.col("_true_us") + F.when(defect == "late", late_delay_us).otherwise(
        F.floor(delay_s * F.lit(US)))
    # Kafka record timestamps have millisecond precision; event times keep microseconds.
    ingest_ms_us = F.floor(ingest_us / 1000) * 1000
    ahead_us = (F.lit(micros(S.FUTURE_TOLERANCE + S.FUTURE_EXTRA_MIN))
                + F.floor(s.u(f"{salt}:future") * F.lit(micros(S.FUTURE_EXTRA_SPAN))))
    event_us = (F.when(defect == "future", F.col("_ingest_us") + ahead_us)
                .when(defect == "null_event_time", F.lit(None))
                .otherwise(F.col("_true_us")))
    null_key = index(s.u(f"{salt}:null_key"), len(keys))
    out = (df.withColumn("_defect", _bands(s.u(f"{salt}:defect"), kinds))
             .withColumn("_ingest_us", ingest_ms_us.cast("bigint"))
             .withColumn(event_col, F.timestamp_micros(event_us.cast("bigint")))
             .withColumn("ingest_ts", F.timestamp_micros(F.col("_ingest_us"))))
    for i, key in enumerate(keys):
        out = out.withColumn(key, F.when(~((defect == "null_key") & (null_key == i)), F.col(key)))
    day = F.floor(F.col("_ingest_us") / F.lit(DAY_US)).cast("int")
    out = (out.withColumn("dt", F.date_add(F.lit(date(1970, 1, 1)), day).cast("string"))
              .withColumn("hour", F.lpad(F.floor(F.pmod(F.col("_ingest_us"), F.lit(DAY_US))
                                                 / F.lit(HOUR_US)).cast("string"), 2, "0")))
    redelivered = s.u(f"{salt}:dup") < F.lit(S.DUPLICATE_RATE)
    return (out.withColumn("_copy", F.lit(0))
               .unionByName(out.filter(redelivered).withColumn("_copy", F.lit(1))))


def _impression_truth(spark: SparkSession, s: Scale) -> DataFrame:
    return s.ids(spark, s.rows).select(
        "id",
        _hashed_id(s, "req").alias("req_id"),
        zipf_rank(s.u("imp:ad"), s.ads).alias("ad_id"),
        (index(s.u("imp:user"), s.users) + 1).cast("bigint").alias("user_id"),
        _true_time_us(s, "imp").alias("_true_us"),
        (s.u("imp:click") < F.lit(S.CLICK_RATE)).alias("_clicked"),
    )


def impressions(spark: SparkSession, s: Scale) -> DataFrame:
    """`ods_ad_impressions`: one row per ad shown, ad ids Zipf-skewed."""
    landed = land(_impression_truth(spark, s), s, "imp", event_col="imp_ts",
                  keys=("req_id", "ad_id", "user_id"))
    return landed.select(*IMPRESSION_COLUMNS, *HELPER_COLUMNS)


def clicks(spark: SparkSession, s: Scale) -> DataFrame:
    """`ods_ad_clicks`: CLICK_RATE of impressions, 0 to CLICK_DELAY_MAX after them."""
    mean_s = S.CLICK_DELAY_MEAN.total_seconds()
    delay_s = truncated_exponential(s.u("click:delay"), mean_s, S.CLICK_DELAY_MAX.total_seconds())
    truth = (_impression_truth(spark, s).filter("_clicked")
             .withColumn("_true_us", F.col("_true_us") + F.floor(delay_s * F.lit(US))))
    landed = land(truth, s, "click", event_col="click_ts", keys=("req_id", "ad_id", "user_id"))
    return landed.select(*CLICK_COLUMNS, *HELPER_COLUMNS)


def _spmid(s: Scale) -> Column:
    pages = F.create_map(*[x for dept, ps in S.PAGES.items()
                           for x in (F.lit(dept), F.array(*map(F.lit, ps)))])
    dept_pages = F.element_at(pages, F.col("_dept"))
    page = F.element_at(dept_pages, (F.floor(s.u("ev:page") * F.size(dept_pages)) + 1).cast("int"))
    position = (index(s.u("ev:position"), S.MAX_POSITION) + 1).cast("string")
    return F.concat_ws(".", F.col("_dept"), page, choice(s.u("ev:module"), S.MODULES), position)


def events(spark: SparkSession, s: Scale) -> DataFrame:
    """`ods_user_events`: pv/show/click events of every product, spmids of six departments."""
    truth = (s.ids(spark, s.rows * S.EVENTS_PER_IMPRESSION)
             .withColumn("_dept", weighted(s.u("ev:dept"), S.DEPARTMENTS))
             .select(
                 "id",
                 _hashed_id(s, "ev").alias("event_id"),
                 (index(s.u("ev:user"), s.users) + 1).cast("bigint").alias("user_id"),
                 _spmid(s).alias("spmid"),
                 weighted(s.u("ev:type"), S.EVENT_TYPES).alias("event_type"),
                 weighted(s.u("ev:product"), S.PRODUCTS).alias("product"),
                 _true_time_us(s, "ev").alias("_true_us"),
                 F.floor(F.lit(200.0) + F.lit(60_000.0) * s.u("ev:duration") ** 3).cast("int")
                 .alias("_duration_ms"),
                 choice(s.u("ev:net"), S.NETWORKS).alias("_net"),
                 choice(s.u("ev:version"), S.APP_VERSIONS).alias("_version"),
             ))
    landed = land(truth, s, "ev", event_col="event_ts", keys=("event_id", "user_id"),
                  extra_defects=(("malformed_payload", S.MALFORMED_PAYLOAD_RATE),
                                 ("malformed_spmid", S.MALFORMED_SPMID_RATE)))
    good = F.to_json(F.struct(F.col("_duration_ms").alias("duration_ms"), F.col("_net").alias("net"),
                              F.col("_version").alias("app_version")))
    # An old SDK sent query strings; a crashing client cut its body short.
    bad = F.when(s.u("ev:bad_payload") < 0.5, F.left(good, F.length(good) - 7)).otherwise(
        F.concat(F.lit("duration_ms="), F.col("_duration_ms").cast("string"), F.lit("&net="), F.col("_net")))
    defect = F.col("_defect")
    return landed.select(
        *[c for c in EVENT_COLUMNS if c not in ("spmid", "payload")],
        F.when(defect == "malformed_spmid", choice(s.u("ev:bad_spmid"), S.BAD_SPMIDS))
        .otherwise(F.col("spmid")).alias("spmid"),
        F.when(defect == "malformed_payload", bad).otherwise(good).alias("payload"),
        *HELPER_COLUMNS,
    ).select(*EVENT_COLUMNS, *HELPER_COLUMNS)
