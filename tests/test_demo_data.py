"""The demo generator: deterministic for a seed, and the scenario it promises.

Rates are measured from the written tables with the lateness rules of models/sources.yml,
never taken from the generator's own report, and compared with the documented constants
within a binomial tolerance (four standard deviations).
"""

from __future__ import annotations

import math
import re
from datetime import date, timedelta
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml
from pyspark.sql import functions as F

from sqlflow.demo import scenario as S
from sqlflow.demo.generate import generate
from sqlflow.errors import SqlflowError

ROOT = Path(__file__).resolve().parents[1]
ROWS, SEED, DAYS = 30_000, 7, 2
ODS_TABLES = ("ods_ad_impressions", "ods_ad_clicks", "ods_user_events")
DIM_TABLES = ("dim_ad", "dim_user")
KEYS = {
    "ods_ad_impressions": ("req_id", "ad_id", "user_id"),
    "ods_ad_clicks": ("req_id", "ad_id", "user_id"),
    "ods_user_events": ("event_id", "user_id"),
}


def source_tables() -> dict[str, dict]:
    """Every source table of models/sources.yml by name, with its `sqlflow` meta and columns."""
    doc = yaml.safe_load((ROOT / "models" / "sources.yml").read_text())
    return {t["name"]: t for src in doc["sources"] for t in src["tables"]}


def rule(table: str) -> dict:
    return source_tables()[table]["config"]["meta"]["sqlflow"]


def as_timedelta(text: str) -> timedelta:
    n, unit = re.fullmatch(r"\s*(\d+)\s+(second|minute|hour)s?\s*", text).groups()
    return timedelta(**{f"{unit}s": int(n)})


def rows_of(spark, table: str):
    return sorted(spark.table(table).collect(), key=repr)


@pytest.fixture(scope="module")
def demo(spark):
    return generate(spark, rows=ROWS, seed=SEED, days=DAYS, ods_schema="demo_ods", dim_schema="demo_dim")


def measured(spark, table: str) -> dict[str, float]:
    """Defect counts of a demo ODS table among its distinct rows, by the sources.yml rules."""
    r = rule(table)
    et, it = r["event_time"], r["ingest_time"]
    null_key = " OR ".join(f"{k} IS NULL" for k in KEYS[table])
    extra = ""
    if table == "ods_user_events":
        extra = (", count_if(payload IS NOT NULL AND try_parse_json(payload) IS NULL) AS malformed_payload"
                 ", count_if(spmid_department(spmid) IS NULL) AS malformed_spmid")
    row = spark.sql(f"""
        WITH d AS (SELECT DISTINCT * FROM demo_ods.{table})
        SELECT count(*) AS n,
               count_if({et} < {it} - INTERVAL '{r["allowed_lateness"]}') AS late,
               count_if({et} > {it} + INTERVAL '{r["future_tolerance"]}') AS future,
               count_if({et} IS NULL) AS null_event_time,
               count_if({null_key}) AS null_key
               {extra}
        FROM d""").collect()[0].asDict()
    row["duplicate"] = spark.table(f"demo_ods.{table}").count() - row["n"]
    return row


def assert_rate(count: int, n: int, p: float, what: str) -> None:
    tolerance = 4 * math.sqrt(p * (1 - p) / n) + 1 / n
    assert abs(count / n - p) <= tolerance, f"{what}: {count}/{n} = {count / n:.4%}, expected {p:.4%}"


# --- the sources.yml contract and the generator agree ---

def test_sources_yml_lateness_matches_generator():
    for table in ODS_TABLES:
        r = rule(table)
        assert as_timedelta(r["allowed_lateness"]) == S.ALLOWED_LATENESS, table
        assert as_timedelta(r["future_tolerance"]) == S.FUTURE_TOLERANCE, table
    for table in DIM_TABLES:
        assert rule(table) == {"partition_column": "dt", "ready_marker": S.READY_MARKER}


def test_sources_yml_documents_every_column(spark, demo):
    declared = source_tables()
    for table in ODS_TABLES + DIM_TABLES:
        schema = "demo_ods" if table.startswith("ods") else "demo_dim"
        actual = [(f.name, f.dataType.simpleString()) for f in spark.table(f"{schema}.{table}").schema]
        documented = [(c["name"], c["data_type"]) for c in declared[table]["columns"]]
        assert documented == actual, table
        assert all(c.get("description") for c in declared[table]["columns"]), table


def test_bad_arguments_are_user_errors(spark):
    with pytest.raises(SqlflowError, match="--rows must be at least 1"):
        generate(spark, rows=0, seed=1, days=1)
    with pytest.raises(SqlflowError, match="not a valid schema name"):
        generate(spark, rows=10, seed=1, days=1, ods_schema="ods; drop")


# --- determinism ---

SMALL = 3_000  # determinism holds at any size: small generations, not the fixture's


@pytest.fixture(scope="module")
def small(spark) -> str:
    """The ODS schema of one small generation with SEED (its dims in `once_dim`): the
    reference both determinism tests compare another generation with."""
    generate(spark, rows=SMALL, seed=SEED, days=DAYS, ods_schema="once_ods", dim_schema="once_dim")
    return "once_ods"


def counts(spark, a: str, b: str) -> dict[str, int]:
    """Rows of `a` (`a`), of `a EXCEPT ALL b` (`only_a`) and of `b EXCEPT ALL a` (`only_b`), in
    one Spark job (not three)."""
    left, right = spark.table(a), spark.table(b)
    tagged = (left.select(F.lit("a").alias("k"))
              .unionByName(left.exceptAll(right).select(F.lit("only_a").alias("k")))
              .unionByName(right.exceptAll(left).select(F.lit("only_b").alias("k"))))
    return {"a": 0, "only_a": 0, "only_b": 0} | {r["k"]: r["n"] for r in tagged.groupBy("k").agg(
        F.count("*").alias("n")).collect()}


def test_same_seed_gives_identical_tables_however_split(spark, small):
    generate(spark, rows=SMALL, seed=SEED, days=DAYS, ods_schema="twin_ods", dim_schema="twin_dim",
             partitions=3)
    for table in ODS_TABLES + DIM_TABLES:
        schema = "ods" if table.startswith("ods") else "dim"
        a, b = f"once_{schema}.{table}", f"twin_{schema}.{table}"
        n = counts(spark, a, b)
        assert n["only_a"] == 0, f"{a} has {n['only_a']} rows {b} lacks"
        assert n["only_b"] == 0, f"{b} has {n['only_b']} rows {a} lacks"
        assert n["a"] > 0


def test_different_seed_gives_different_rows(spark, small):
    generate(spark, rows=SMALL, seed=SEED + 1, days=DAYS, ods_schema="other_ods", dim_schema="other_dim")
    for table in ODS_TABLES:
        a, b = f"{small}.{table}", f"other_ods.{table}"
        counted = counts(spark, a, b)
        n, shared = counted["a"], counted["a"] - counted["only_a"]
        assert n > 0 and shared < n * 0.01, f"{table}: {shared} of {n} rows are the same under another seed"


# --- dirty rows at their documented rates ---

@pytest.mark.parametrize("table", ODS_TABLES)
def test_dirty_row_rates(spark, demo, table):
    m = measured(spark, table)
    expected = {"late": S.LATE_RATE, "future": S.FUTURE_RATE,
                "null_event_time": S.NULL_EVENT_TIME_RATE, "null_key": S.NULL_KEY_RATE,
                "duplicate": S.DUPLICATE_RATE}
    if table == "ods_user_events":
        expected |= {"malformed_payload": S.MALFORMED_PAYLOAD_RATE,
                     "malformed_spmid": S.MALFORMED_SPMID_RATE}
    for kind, p in expected.items():
        assert_rate(m[kind], m["n"], p, f"{table} {kind}")
        if table != "ods_ad_clicks":  # clicks are few; a rare defect may be absent there
            assert m[kind] > 0, f"{table}: no {kind} rows"


def test_report_counts_match_the_data(spark, demo):
    for table in ODS_TABLES:
        r = rule(table)
        et, it = r["event_time"], r["ingest_time"]
        late, future, total = spark.sql(f"""
            SELECT count_if({et} < {it} - INTERVAL '{r["allowed_lateness"]}'),
                   count_if({et} > {it} + INTERVAL '{r["future_tolerance"]}'), count(*)
            FROM demo_ods.{table}""").collect()[0]
        report = demo.table(table)
        assert (report.dirty["late"], report.dirty["future"], report.rows) == (late, future, total)


# --- the ad scenario ---

def test_click_rate_and_delays(spark, demo):
    imps, clicks = measured(spark, "ods_ad_impressions")["n"], measured(spark, "ods_ad_clicks")["n"]
    assert_rate(clicks, imps, S.CLICK_RATE, "click-through rate")
    tol = rule("ods_ad_clicks")["future_tolerance"]
    delays = [r[0] for r in spark.sql(f"""
        SELECT (unix_micros(c.click_ts) - unix_micros(i.imp_ts)) / 60e6
        FROM (SELECT DISTINCT * FROM demo_ods.ods_ad_clicks) c
        JOIN (SELECT DISTINCT * FROM demo_ods.ods_ad_impressions) i ON c.req_id = i.req_id
        WHERE c.click_ts <= c.ingest_ts + INTERVAL '{tol}'
          AND i.imp_ts <= i.ingest_ts + INTERVAL '{tol}'""").collect()]
    assert len(delays) > clicks * 0.95
    assert min(delays) >= 0 and max(delays) <= 30
    beyond_20 = sum(d > 20 for d in delays) / len(delays)
    assert 0.02 <= beyond_20 <= 0.15, f"{beyond_20:.1%} of clicks are more than 20 minutes late"


def test_hot_ads(spark, demo):
    counts = [r[0] for r in spark.sql(
        "SELECT count(*) c FROM demo_ods.ods_ad_impressions WHERE ad_id IS NOT NULL GROUP BY ad_id "
        "ORDER BY c DESC").collect()]
    top = counts[: max(len(counts) // 10, 1)]
    assert sum(top) >= 0.5 * sum(counts), "the top 10% of ads should take half the traffic"
    assert counts[0] >= 20 * counts[len(counts) // 2]


def test_timestamps_have_microseconds_and_partitions_follow_ingest_time(spark, demo):
    for table in ODS_TABLES:
        r = rule(table)
        et = r["event_time"]
        sub_ms, wrong_partition, before_event, n = spark.sql(f"""
            SELECT count_if(unix_micros({et}) % 1000 != 0),
                   count_if(dt != date_format(ingest_ts, 'yyyy-MM-dd')
                            OR hour != date_format(ingest_ts, 'HH')),
                   count_if(ingest_ts < {et} AND {et} <= ingest_ts + INTERVAL '{r["future_tolerance"]}'),
                   count(*)
            FROM demo_ods.{table}""").collect()[0]
        assert sub_ms > 0.9 * n and wrong_partition == 0, table
        assert before_event == 0, f"{table}: {before_event} rows arrived before they happened"
        detail = spark.sql(f"DESCRIBE DETAIL demo_ods.{table}").collect()[0]
        assert (detail["format"], list(detail["partitionColumns"])) == ("delta", ["dt", "hour"])


# --- user events ---

def test_departments_have_very_different_volumes(spark, demo):
    shares = {r["d"]: r["n"] for r in spark.sql(
        "SELECT spmid_department(spmid) d, count(*) n FROM demo_ods.ods_user_events "
        "WHERE spmid_department(spmid) IS NOT NULL GROUP BY 1").collect()}
    total = sum(shares.values())
    assert set(shares) == set(S.DEPARTMENTS) and len(shares) >= 5
    for dept, p in S.DEPARTMENTS.items():
        assert_rate(shares[dept], total, p, f"department {dept}")
    assert max(shares.values()) >= 20 * min(shares.values())


def test_event_types_and_products(spark, demo):
    rows = spark.sql("SELECT DISTINCT event_type, product FROM demo_ods.ods_user_events").collect()
    assert {r[0] for r in rows} == {"pv", "show", "click"}
    assert {r[1] for r in rows} == set(S.PRODUCTS) and len(S.PRODUCTS) >= 5


# --- dimension readiness ---

def _partition_dir(spark, table: str, day: str) -> Path:
    location = spark.sql(f"DESCRIBE DETAIL {table}").collect()[0]["location"]
    return Path(urlparse(location).path) / f"dt={day}"


def test_dimension_readiness(spark, demo):
    days = [(date(2026, 11, 1) + timedelta(days=i)).isoformat() for i in range(-1, DAYS)]
    newest, older = days[-1], days[:-1]
    written = {t: sorted(r[0] for r in spark.sql(f"SELECT DISTINCT dt FROM demo_dim.{t}").collect())
               for t in DIM_TABLES}
    assert written == {"dim_ad": days, "dim_user": older}

    for day in older:
        for table in DIM_TABLES:
            assert (_partition_dir(spark, f"demo_dim.{table}", day) / "_SUCCESS").is_file(), (table, day)
    newest_ad = _partition_dir(spark, "demo_dim.dim_ad", newest)
    assert any(newest_ad.glob("*.parquet")) and not (newest_ad / "_SUCCESS").exists()
    assert not _partition_dir(spark, "demo_dim.dim_user", newest).exists()
    assert demo.ready_days == {"dim_ad": tuple(older), "dim_user": tuple(older)}


def test_dimensions_cover_every_id_once_per_day(spark, demo):
    for table, key, fact_key in (("dim_ad", "ad_id", "ad_id"), ("dim_user", "user_id", "user_id")):
        dupes = spark.sql(f"SELECT count(*) FROM (SELECT dt, {key} FROM demo_dim.{table} "
                          f"GROUP BY ALL HAVING count(*) > 1)").collect()[0][0]
        unknown = spark.sql(f"""
            SELECT count(*) FROM demo_ods.ods_ad_impressions i
            LEFT ANTI JOIN (SELECT DISTINCT {key} FROM demo_dim.{table}) d ON i.{fact_key} = d.{key}
            WHERE i.{fact_key} IS NOT NULL""").collect()[0][0]
        assert (dupes, unknown) == (0, 0), table
