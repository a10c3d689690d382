"""A failure that repeats on every run does not say "run again" (docs/semantics.md, "When a
stream query stops"): a value Spark cannot compute, sqlflow's own error on the rows; a failure
that may pass still does."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from helpers import ad_sources_yml, make_project
from sqlflow.compiler import compile_project
from sqlflow.engine.context import Context
from sqlflow.errors import SqlflowError
from sqlflow.runtime.batchfn import query_failed
from sqlflow.runtime.dispatch import run_stream

ODS, DW = "rt_repeats_ods", "rt_repeats_dw"
RESUME = "run again to resume"


def hint(error: BaseException) -> str:
    return query_failed("model `m`", "models/m.sql", error, error, rebuild="sqlflow run x").diagnostics[0].hint


def test_sqlflow_failing_on_the_rows_says_to_report_it_not_to_run_again():
    text = hint(ValueError("`dt=x/a/b=c` is not a partition like dt=2026-11-01/hour=3"))
    assert RESUME not in text and "fails the same way" in text and "--debug" in text


def test_a_failure_that_may_pass_says_run_again():
    assert RESUME in hint(RuntimeError("Python worker exited unexpectedly"))
    assert RESUME in hint(ConnectionResetError("connection reset"))


@pytest.mark.spark
def test_a_value_spark_cannot_cast_fails_every_stream_run_with_what_to_fix(spark, tmp_path, ansi_mode):
    for db in (ODS, DW):
        spark.sql(f"DROP DATABASE IF EXISTS {db} CASCADE")
        spark.sql(f"CREATE DATABASE {db}")
    t = datetime(2026, 11, 1, 10, tzinfo=timezone.utc)
    spark.createDataFrame([("1", 1, t, t, "2026-11-01"), ("x1", 2, t, t, "2026-11-01")],
                          "req_id string, ad_id bigint, imp_ts timestamp, ingest_ts timestamp, dt string"
                          ).write.format("delta").saveAsTable(f"{ODS}.imps")
    root = make_project(tmp_path, models={"casts.sql": """\
        {{ config(materialized='streaming_table', partition_by=['dt']) }}
        SELECT cast(i.req_id AS INT) AS n, to_date(i.imp_ts) AS dt FROM {{ source('ods', 'imps') }} AS i
        """}, yml={"sources.yml": ad_sources_yml(ODS)},
        profiles_yml=f"sqlflow:\n  target: local\n  outputs:\n    local: {{type: spark, method: session, host: NA, schema: {DW}}}\n")
    ctx = Context.with_session(spark, root)
    result = compile_project(root, mode="stream", target=ctx.target)
    result.raise_if_errors()
    try:
        for _ in range(2):  # the second run replays the same micro-batch and fails the same way
            with pytest.raises(SqlflowError) as err:
                run_stream(ctx, result.plans["casts"])
            (diag,) = err.value.diagnostics
            assert RESUME not in diag.hint and "CAST_INVALID_INPUT" in diag.hint, diag
            assert "try_cast" in diag.hint and "fails the same way" in diag.hint
    finally:
        for db in (ODS, DW):
            spark.sql(f"DROP DATABASE IF EXISTS {db} CASCADE")
