"""A routed target whose SQL Spark rejects fails at the target model's line, in the group's
batch run and stream run (the targets keep their models' source maps through fusion)."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from helpers import events_sources_yml, make_project
from sqlflow.compiler import compile_project
from sqlflow.engine.context import Context
from sqlflow.errors import Location, SqlflowError
from sqlflow.runtime.routed.routing import run_routed_batch, run_routed_stream

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
ODS, DW = "rt_route_anerr_ods", "rt_route_anerr_dw"
SCHEMA = "event_id string, spmid string, event_type string, product string, event_ts timestamp, ingest_ts timestamp"
BAD = """\
-- the live department, with a column the source does not have
{{ route_to(source('ods', 'events'), 'live',
            columns=['event_id', 'spmid', 'no_such_column', 'event_ts']) }}
"""


@pytest.fixture(scope="module")
def ctx(spark, tmp_path_factory):
    for db in (ODS, DW):
        spark.sql(f"DROP DATABASE IF EXISTS {db} CASCADE")
    spark.sql(f"CREATE DATABASE {ODS}")
    t = datetime(2026, 11, 1, 10, tzinfo=timezone.utc)  # one row: a stream runs a micro-batch
    spark.createDataFrame([("e1", "live.page.mod.1", "pv", "app", t, t)], SCHEMA) \
        .write.format("delta").saveAsTable(f"{ODS}.events")
    root = make_project(
        tmp_path_factory.mktemp("routed_errors"),
        models={"routed/r_main.sql": "{{ route_to(source('ods', 'events'), 'main', "
                                     "columns=['event_id', 'spmid', 'event_ts']) }}",
                "routed/r_bad.sql": BAD},
        yml={"sources.yml": events_sources_yml(ODS)},
        macros={"route.sql": (ROOT / "macros" / "route.sql").read_text()},
        project_yml={"models": {"testproj": {"routed": {
            "+materialized": "streaming_table", "+partition_by": ["dt", "hour", "event_type", "product"],
            "+routing": {"group": "by_dept"}}}}},
        profiles_yml=f"sqlflow:\n  target: local\n  outputs:\n    local: {{type: spark, method: session, host: NA, schema: {DW}}}\n")
    yield Context.with_session(spark, root)
    for db in (ODS, DW):
        spark.sql(f"DROP DATABASE IF EXISTS {db} CASCADE")


def group(ctx, mode):
    result = compile_project(ctx.project_dir, mode=mode, target=ctx.target)
    result.raise_if_errors()
    plan = result.plans["by_dept"]
    assert all(t.source_map is not None for t in plan.targets)
    assert "source_map" not in str(plan.to_dict())  # runtime only: not in the artifacts
    return plan


@pytest.mark.parametrize("mode", ["batch", "stream"])
def test_a_routed_target_spark_rejects_fails_at_its_model_line(spark, ctx, mode):
    plan = group(ctx, mode)
    with pytest.raises(SqlflowError) as raised:
        if mode == "batch":
            list(run_routed_batch(ctx, plan))
        else:
            run_routed_stream(ctx, plan)
    diag = raised.value.diagnostics[0]
    # the column comes out of the macro: the error points at the macro call
    assert diag.location == Location("models/routed/r_bad.sql", 2, 1)
    assert "model `r_bad`: column `no_such_column` does not exist" in diag.message
    assert f"target/sqlflow/{mode}/by_dept.sql" in diag.hint
