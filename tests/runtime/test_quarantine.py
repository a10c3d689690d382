"""The quarantine rule (docs/design.md §2.1) on real Spark: boundaries to the microsecond, NULLs,
malformed times, the raw payload, and agreement with a plain-Python reference."""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

from sqlflow.errors import SqlflowError
from sqlflow.planning.plan import SourceBinding
from sqlflow.project.eventtime import EventTime
from sqlflow.runtime.quarantine import COLUMNS, REASONS, split

pytestmark = pytest.mark.spark

UTC = timezone.utc
US = timedelta(microseconds=1)
LATENESS, TOLERANCE = timedelta(minutes=10), timedelta(minutes=5)
INGEST = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
BINDING = SourceBinding(
    relation="ods.events", input="ods.events", read="static", view="__sqlflow_clean__ods__events",
    time=EventTime("event_ts", "ingest_ts", LATENESS // US, TOLERANCE // US))
SCHEMA = StructType([StructField("id", LongType()), StructField("event_ts", TimestampType()),
                     StructField("ingest_ts", TimestampType())])


def reference_reason(event: datetime | None, ingest: datetime | None) -> str | None:
    """docs/design.md §2.1 in plain Python: the rule the Spark expression must equal."""
    if event is None:
        return "null_event_time"
    if ingest is None:
        return None
    if event < ingest - LATENESS:
        return "late"
    if event > ingest + TOLERANCE:
        return "future"
    return None


def reasons(spark, rows, binding=BINDING, schema=SCHEMA) -> dict[int, str | None]:
    """id -> reason (None when clean), checking every row lands on exactly one side."""
    df = spark.createDataFrame(rows, schema)
    parts = split(df, binding, model="m", origin="ods.events@v0")
    clean = [r["id"] for r in parts.clean.collect()]
    quarantined = {r["id"]: r["reason"] for r in
                   parts.quarantine.selectExpr("get_json_object(raw, '$.id') AS id", "reason").collect()}
    quarantined = {int(k): v for k, v in quarantined.items()}
    assert not set(clean) & set(quarantined)
    assert sorted(clean + list(quarantined)) == sorted(r[0] for r in rows)
    return {**dict.fromkeys(clean), **quarantined}


def test_lateness_and_tolerance_boundaries_to_the_microsecond(spark):
    rows = [
        (1, INGEST - LATENESS, INGEST),  # exactly at ingest - lateness: not late
        (2, INGEST - LATENESS - US, INGEST),  # one µs earlier: late
        (3, INGEST + TOLERANCE, INGEST),  # exactly at ingest + tolerance: not future
        (4, INGEST + TOLERANCE + US, INGEST),  # one µs later: future
        (5, INGEST, INGEST),
        (6, None, INGEST),
        (7, INGEST - timedelta(days=3), None),  # no ingest time: neither late nor future
        (8, None, None),
    ]
    assert reasons(spark, rows) == {1: None, 2: "late", 3: None, 4: "future", 5: None,
                                    6: "null_event_time", 7: None, 8: "null_event_time"}


def test_zero_lateness_quarantines_anything_before_ingest(spark):
    strict = dataclasses.replace(BINDING, time=dataclasses.replace(BINDING.time, allowed_lateness_us=0,
                                                                   future_tolerance_us=0))
    rows = [(1, INGEST, INGEST), (2, INGEST - US, INGEST), (3, INGEST + US, INGEST)]
    assert reasons(spark, rows, strict) == {1: None, 2: "late", 3: "future"}


def test_an_unparseable_event_time_is_malformed(spark):
    schema = StructType([StructField("id", LongType()), StructField("event_ts", StringType()),
                         StructField("ingest_ts", TimestampType())])
    rows = [(1, "2026-11-01 12:00:00", INGEST), (2, "yesterday-ish", INGEST), (3, None, INGEST),
            (4, "2026-11-01 11:49:59.999999", INGEST)]
    assert reasons(spark, rows, schema=schema) == {1: None, 2: "malformed", 3: "null_event_time",
                                                   4: "late"}


def test_quarantine_rows_carry_the_raw_row_and_where_it_came_from(spark):
    event = INGEST - LATENESS - US
    df = spark.createDataFrame([(1, event, INGEST), (2, None, INGEST + timedelta(days=1))], SCHEMA)
    rows = sorted(split(df, BINDING, model="m", origin="ods.events@v7").quarantine.collect(),
                  key=lambda r: r["reason"])
    assert tuple(rows[0].asDict()) == COLUMNS
    late, null = rows
    assert (late["model"], late["input"], late["origin"], late["dt"]) == (
        "m", "ods.events", "ods.events@v7", "2026-11-01")
    raw = json.loads(late["raw"])
    assert raw == {"id": 1, "event_ts": "2026-11-01T11:49:59.999999Z",
                   "ingest_ts": "2026-11-01T12:00:00.000000Z"}  # every microsecond kept
    assert null["dt"] == "2026-11-02"  # no event time: dated by the ingest time
    assert null["event_time"] is None and null["reason"] == "null_event_time"


def test_a_missing_event_time_column_is_a_user_error(spark):
    df = spark.createDataFrame([(1, INGEST)], "id long, ts timestamp")
    with pytest.raises(SqlflowError, match="has no column `event_ts`, its declared event time"):
        split(df, BINDING, model="m", origin="x")


offsets = st.one_of(
    st.none(),
    st.sampled_from([-LATENESS - US, -LATENESS, TOLERANCE, TOLERANCE + US]),
    st.integers(min_value=-(LATENESS // US) * 2, max_value=(TOLERANCE // US) * 2).map(lambda n: n * US))


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cases=st.lists(st.tuples(offsets, st.booleans()), min_size=1, max_size=40))
def test_split_equals_the_reference_rule(spark, cases):
    rows = []
    for n, (offset, has_ingest) in enumerate(cases):
        event = None if offset is None else INGEST + offset
        rows.append((n, event, INGEST if has_ingest else None))
    expected = {n: reference_reason(e, i) for n, e, i in rows}
    got = reasons(spark, rows)
    assert got == expected
    assert set(got.values()) <= {None, *REASONS}
