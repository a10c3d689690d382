"""A backfill replaces its quarantine rows, creates the table empty, or leaves it alone,
without reading every input column when there is nothing to quarantine (`runtime.batch._quarantine`), and a model whose partition columns are a
`date_format` of a fixed pattern is written unchecked (`planning.partition_safety`): on real
Spark and Delta, each step's quarantine and sink compared row for row."""

from __future__ import annotations

import pytest

from helpers import delta_writers
from runtime.adkit import IMP_SCHEMA, at, batch_project, imp
from sqlflow.compiler import compile_project
from sqlflow.engine.context import Context
from sqlflow.runtime.batch import run_batch

pytestmark = pytest.mark.spark

ODS, DW = "bq_ods", "bq_dw"
MODEL = """{{ config(materialized='streaming_table', partition_by=['dt', 'hour']) }}
SELECT i.req_id, i.ad_id, i.imp_ts,
       date_format(i.imp_ts, 'yyyy-MM-dd') AS dt, date_format(i.imp_ts, 'HH') AS hour
FROM {{ source('ods', 'imps') }} AS i
"""


@pytest.fixture
def project(spark, tmp_path):
    yield from batch_project(spark, tmp_path, ODS, DW, {"m.sql": MODEL})


def _load(spark, rows):
    spark.createDataFrame(rows, IMP_SCHEMA).write.format("delta").mode("overwrite") \
        .saveAsTable(f"{ODS}.imps")


def _naive(ts):  # Spark returns the session zone's (UTC's) local time, without a zone
    return ts.replace(tzinfo=None)


def _counts(spark, table, where="true"):
    """The quarantine table's rows per input and reason, as a run reports them."""
    return [(r["input"], r["reason"], r["n"]) for r in spark.sql(
        f"SELECT input, reason, count(*) AS n FROM {table} WHERE {where} GROUP BY input, reason "
        "ORDER BY input, reason").collect()]


def _reported(result):
    return [(q.input, q.reason, q.rows) for q in result.quarantined]


def _rows(spark, table, columns):
    return sorted(tuple(r) for r in spark.table(table).select(*columns).collect())


def test_quarantine_rows_are_replaced_and_an_empty_quarantine_is_not_written_again(spark, project):
    ctx = Context.discover(project)
    plan = compile_project(project, mode="batch", target=ctx.target).plans["m"]
    assert plan.sink.safe_partitions == ("dt", "hour")
    clean = [imp("a", 1, at(1, 10, 0)), imp("b", 2, at(1, 23, 59))]
    late = imp("late", 3, at(1, 9, 0), ingest=at(1, 12, 0))  # 3 h late: over 10 min

    _load(spark, clean)  # nothing to quarantine: the table is made empty, no input row read
    first = run_batch(ctx, plan)
    assert first.quarantine is not None and not first.quarantine.skipped and first.quarantined == ()
    assert spark.table(plan.quarantine).count() == 0
    want = sorted((r[0], r[1], _naive(r[2]), r[2].strftime("%Y-%m-%d"), r[2].strftime("%H")) for r in clean)
    assert _rows(spark, plan.sink.table, ["req_id", "ad_id", "imp_ts", "dt", "hour"]) == want

    again = run_batch(ctx, plan)  # still nothing, and nothing to replace: not written at all
    assert again.quarantine.skipped and again.quarantined == ()

    _load(spark, [*clean, late])  # a late row: quarantined
    second = run_batch(ctx, plan)
    assert [(q.reason, q.rows) for q in second.quarantined] == [("late", 1)]
    assert _rows(spark, plan.quarantine, ["reason", "event_time"]) == [("late", _naive(late[2]))]
    assert _reported(second) == _counts(spark, plan.quarantine)

    # a range: the reported counts are the range's rows, as the table holds them after the run
    late2 = imp("late2", 4, at(2, 9, 0), ingest=at(2, 12, 0))
    future = imp("future", 5, at(2, 11, 0), ingest=at(2, 10, 0))  # an hour before it happened
    _load(spark, [*clean, late, late2, future])
    ranged = run_batch(ctx, plan, start=at(2, 0, 0).date(), end=at(2, 0, 0).date())
    day2 = f"dt = '{at(2, 0, 0).strftime('%Y-%m-%d')}'"
    assert _reported(ranged) == _counts(spark, plan.quarantine, day2) != []
    assert sorted(q.reason for q in ranged.quarantined) == ["future", "late"]
    assert _counts(spark, plan.quarantine, f"NOT ({day2})") == [(f"{ODS}.imps", "late", 1)]  # kept

    _load(spark, clean)  # fixed upstream: the old quarantine rows are replaced by none
    third = run_batch(ctx, plan)
    assert not third.quarantine.skipped and third.quarantined == ()
    assert spark.table(plan.quarantine).count() == 0
    assert _rows(spark, plan.sink.table, ["req_id", "ad_id", "imp_ts", "dt", "hour"]) == want


def test_a_small_quarantine_is_replaced_from_the_driver_with_the_rows_spark_writes(
        spark, project, monkeypatch):
    """A whole run's few quarantine rows replacing an existing table are committed by delta-rs
    (`LOCAL_QUARANTINE_ROWS`): every column of every row as Spark's replace writes them, the
    owner kept, the counts reported; an emptied table is known empty from its log (no Spark
    job asks it for a row) and not written again."""
    from sqlflow.runtime import batch
    from sqlflow.runtime.delta import deltalog

    ctx = Context.discover(project)
    plan = compile_project(project, mode="batch", target=ctx.target).plans["m"]
    clean = [imp("a", 1, at(1, 10, 0)), imp("b", 2, at(1, 23, 59))]
    bad = [imp("late", 3, at(1, 9, 0), ingest=at(1, 12, 0)),
           imp("future", 4, at(2, 11, 0), ingest=at(2, 10, 0)), imp("nul", 5, None, ingest=at(1, 11, 0))]
    _load(spark, [*clean, *bad])
    created = run_batch(ctx, plan)  # the table is created by Spark
    columns = spark.table(plan.quarantine).columns

    def everything():
        return sorted((tuple(r) for r in spark.table(plan.quarantine).collect()), key=repr)

    by_spark = everything()
    assert len(by_spark) == 3 and _reported(created) == _counts(spark, plan.quarantine)
    local = run_batch(ctx, plan)  # an existing table, three rows: replaced from the driver
    assert delta_writers(spark, plan.quarantine)[-1] == "delta-rs"
    assert spark.table(plan.quarantine).columns == columns and everything() == by_spark
    assert _reported(local) == _reported(created)
    props = {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES {plan.quarantine}").collect()}
    assert (props.get("sqlflow.model"), props.get("sqlflow.role")) == ("m", "quarantine")

    monkeypatch.setattr(batch, "LOCAL_QUARANTINE_ROWS", 0)  # Spark replaces it: the same rows
    run_batch(ctx, plan)
    assert delta_writers(spark, plan.quarantine)[-1] != "delta-rs"
    assert everything() == by_spark
    monkeypatch.undo()

    _load(spark, clean)  # fixed upstream: replaced by no row, from the driver
    emptied = run_batch(ctx, plan)
    assert delta_writers(spark, plan.quarantine)[-1] == "delta-rs"
    assert not emptied.quarantine.skipped and everything() == []
    location = deltalog.describe(spark, plan.quarantine).location
    assert deltalog.holds_no_files(spark, location)  # from the log: delta-rs writes no checksum
    again = run_batch(ctx, plan)
    assert again.quarantine.skipped and again.quarantined == ()
    assert _rows(spark, plan.sink.table, ["req_id"]) == [("a",), ("b",)]
