"""The demo's daily dimension snapshots: `dim_ad` and `dim_user`, one `dt` partition per day.

A daily dimension is a full snapshot of the catalogue as of the end of `dt`. Most attributes
are fixed per ad or user; a few (bid, status, vip level) change from day to day, so a join
that picks the wrong partition gives visibly different rows.
"""

from __future__ import annotations

from datetime import timedelta

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sqlflow.demo import scenario as S
from sqlflow.demo.noise import choice, index, weighted
from sqlflow.demo.ods import Scale

DIM_AD_COLUMNS = ("ad_id", "advertiser_id", "campaign_id", "ad_category", "creative_type", "bid_cpm",
                  "status", "dt")
DIM_USER_COLUMNS = ("user_id", "age_band", "gender", "city", "vip_level", "register_date", "dt")


def dim_days(s: Scale) -> list[str]:
    """Every day a dimension could have: the day before the events start, through their last day."""
    return [(s.start + timedelta(days=i)).isoformat() for i in range(-1, s.days)]


def _per_day(spark: SparkSession, n: int, key: str, days: list[str]) -> DataFrame:
    catalogue = spark.range(1, n + 1).withColumnRenamed("id", key)
    calendar = spark.createDataFrame([(d,) for d in days], "dt string")
    return catalogue.crossJoin(F.broadcast(calendar))


def dim_ad(spark: SparkSession, s: Scale, days: list[str]) -> DataFrame:
    """`dim_ad`: every ad of the catalogue, per day."""
    ad, dt = F.col("ad_id"), F.col("dt")
    advertisers = max(int(s.ads * S.ADVERTISERS_PER_AD), 1)
    advertiser = (index(s.u("ad:advertiser", ad), advertisers) + 1).cast("bigint")
    campaigns_each = max(int(1 / S.ADVERTISERS_PER_AD * S.CAMPAIGNS_PER_AD), 1)
    return _per_day(spark, s.ads, "ad_id", days).select(
        ad,
        advertiser.alias("advertiser_id"),
        (advertiser * 100 + index(s.u("ad:campaign", ad), campaigns_each) + 1).alias("campaign_id"),
        choice(s.u("ad:category", ad), S.AD_CATEGORIES).alias("ad_category"),
        choice(s.u("ad:creative", ad), S.CREATIVE_TYPES).alias("creative_type"),
        (F.lit(2.0) + F.lit(30.0) * s.u("ad:bid", ad, dt)).cast("decimal(10,2)").alias("bid_cpm"),
        F.when(s.u("ad:status", ad, dt) < 0.9, "active").otherwise("paused").alias("status"),
        dt,
    )


def dim_user(spark: SparkSession, s: Scale, days: list[str]) -> DataFrame:
    """`dim_user`: every user, per day; about 2% of users show one vip level higher on a day."""
    user, dt = F.col("user_id"), F.col("dt")
    base_vip = weighted(s.u("user:vip", user), {0: 0.6, 1: 0.25, 2: 0.1, 3: 0.05})
    bump = F.when(s.u("user:vip_day", user, dt) < 0.02, 1).otherwise(0)
    registered = F.date_sub(F.lit(s.start), index(s.u("user:registered", user), 3000))
    return _per_day(spark, s.users, "user_id", days).select(
        user,
        choice(s.u("user:age", user), S.AGE_BANDS).alias("age_band"),
        choice(s.u("user:gender", user), S.GENDERS).alias("gender"),
        choice(s.u("user:city", user), S.CITIES).alias("city"),
        F.least(base_vip + bump, F.lit(3)).cast("int").alias("vip_level"),
        registered.alias("register_date"),
        dt,
    )

