"""A whole backfill into an existing sink counts its inputs' quarantine reasons during the sink
write (`runtime.observed_reasons`) instead of a job of its own, and only when the counts are
provably whole: on real Spark and Delta, every run's reported counts and quarantine rows are
compared with the table, and which way they were counted is checked with a spy on
`batch._count` (the job the observation replaces)."""

from __future__ import annotations

import pytest

from runtime.adkit import IMP_SCHEMA, at, batch_project, imp
from sqlflow.compiler import compile_project
from sqlflow.engine.context import Context
from sqlflow.runtime import batch
from sqlflow.runtime.batch import run_batch

pytestmark = pytest.mark.spark

ODS, DW = "or_ods", "or_dw"
PARTS = "partition_by=['dt', 'hour']"
SELECT = """SELECT i.req_id, i.ad_id, i.imp_ts,
       date_format(i.imp_ts, 'yyyy-MM-dd') AS dt, date_format(i.imp_ts, 'HH') AS hour"""
MODELS = {
    "whole.sql": f"{{{{ config(materialized='streaming_table', {PARTS}) }}}}\n"
                 f"{SELECT}\nFROM {{{{ source('ods', 'imps') }}}} AS i\n",
    # reads the input's clean view twice: two observation nodes of one frame
    "twice.sql": f"{{{{ config(materialized='streaming_table', {PARTS}) }}}}\n"
                 f"{SELECT}\nFROM {{{{ source('ods', 'imps') }}}} AS i\n"
                 f"JOIN {{{{ source('ods', 'imps') }}}} AS j ON i.req_id = j.req_id AND i.ad_id = j.ad_id\n",
    # stops reading early: the observation counts only part of the input
    "first.sql": f"{{{{ config(materialized='streaming_table', {PARTS}) }}}}\n"
                 f"{SELECT}\nFROM {{{{ source('ods', 'imps') }}}} AS i\nLIMIT 1\n",
}
CLEAN = [imp(f"r{k}", k, at(1, 10, k)) for k in range(5)]
LATE = imp("late", 90, at(1, 9, 0), ingest=at(1, 12, 0))  # 3 h late: over 10 min
FUTURE = imp("future", 91, at(1, 11, 0), ingest=at(1, 10, 0))  # an hour before it happened


@pytest.fixture
def project(spark, tmp_path):
    yield from batch_project(spark, tmp_path, ODS, DW, MODELS)


@pytest.fixture
def asked(monkeypatch):
    """How many times a run asked for the counts with a job of their own (`batch._count`)."""
    calls = []
    real = batch._count

    def spy(parts, dates):
        calls.append(dates)
        return real(parts, dates)

    monkeypatch.setattr(batch, "_count", spy)
    return calls


def _load(spark, rows):
    """The input as one file (its rows in this order), replacing what it held."""
    spark.createDataFrame(rows, IMP_SCHEMA).coalesce(1).write.format("delta").mode("overwrite") \
        .saveAsTable(f"{ODS}.imps")


def _table_counts(spark, table):
    return [(r["input"], r["reason"], r["n"]) for r in spark.sql(
        f"SELECT input, reason, count(*) AS n FROM {table} GROUP BY input, reason "
        "ORDER BY input, reason").collect()]


def _reported(result):
    return [(q.input, q.reason, q.rows) for q in result.quarantined]


def _plans(project):
    ctx = Context.discover(project)
    return ctx, compile_project(project, mode="batch", target=ctx.target).plans


def test_a_rerun_counts_its_quarantine_in_the_sink_write(spark, project, asked):
    ctx, plans = _plans(project)
    plan = plans["whole"]
    _load(spark, CLEAN)
    run_batch(ctx, plan)  # creates the sink: Delta's CREATE TABLE AS SELECT fills no observation
    assert len(asked) == 1

    _load(spark, [*CLEAN, LATE, FUTURE])
    again = run_batch(ctx, plan)  # the sink exists: counted by its write, no job of its own
    assert len(asked) == 1
    assert _reported(again) == [(f"{ODS}.imps", "future", 1), (f"{ODS}.imps", "late", 1)]
    assert _reported(again) == _table_counts(spark, plan.quarantine)
    held = spark.sql(f"SELECT get_json_object(raw, '$.req_id') AS id, reason, event_time "
                     f"FROM {plan.quarantine}").collect()
    assert sorted(tuple(r) for r in held) == [("future", "future", FUTURE[2].replace(tzinfo=None)),
                                              ("late", "late", LATE[2].replace(tzinfo=None))]
    sink = sorted(tuple(r) for r in spark.table(plan.sink.table).select("req_id", "ad_id", "imp_ts").collect())
    assert sink == [(r[0], r[1], r[2].replace(tzinfo=None)) for r in CLEAN]

    _load(spark, CLEAN)  # fixed upstream: the old rows are replaced by none, still without asking
    fixed = run_batch(ctx, plan)
    assert len(asked) == 1
    assert fixed.quarantined == () and not fixed.quarantine.skipped
    assert spark.table(plan.quarantine).count() == 0


def test_an_input_read_twice_is_counted_once(spark, project, asked):
    ctx, plans = _plans(project)
    plan = plans["twice"]
    _load(spark, CLEAN)
    run_batch(ctx, plan)
    _load(spark, [*CLEAN, LATE, LATE])
    again = run_batch(ctx, plan)
    assert len(asked) == 1  # only the first run's
    assert _reported(again) == [(f"{ODS}.imps", "late", 2)] == _table_counts(spark, plan.quarantine)


def test_counts_of_a_plan_that_stops_reading_early_are_asked_for(spark, project, asked):
    ctx, plans = _plans(project)
    plan = plans["first"]
    _load(spark, CLEAN)
    run_batch(ctx, plan)
    _load(spark, [*CLEAN, LATE, FUTURE])  # the bad rows last: the LIMIT stops before them
    again = run_batch(ctx, plan)
    assert len(asked) == 2  # the observation saw part of the input: the job counted
    assert _reported(again) == [(f"{ODS}.imps", "future", 1), (f"{ODS}.imps", "late", 1)]
    assert _reported(again) == _table_counts(spark, plan.quarantine)


def test_a_range_is_counted_by_a_job(spark, project, asked):
    ctx, plans = _plans(project)
    plan = plans["whole"]
    _load(spark, [*CLEAN, LATE])
    run_batch(ctx, plan)
    day = at(1, 0, 0).date()
    ranged = run_batch(ctx, plan, start=day, end=day)  # the observation cannot be checked
    assert len(asked) == 2 and asked[-1] is not None
    assert _reported(ranged) == [(f"{ODS}.imps", "late", 1)] == _table_counts(spark, plan.quarantine)
