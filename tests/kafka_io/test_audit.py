"""`sqlflow audit` of a live stream over Kafka (docs/semantics.md, "Auditing a live stream"):
the batch plan over exactly the archive versions the stream processed equals the live sink and
quarantine per closed partition; a row lost from the live sink is found, in its partition, and
`--repair` rewrites exactly that partition. A routed group over the model is audited too (every
target and the group quarantine), with partition values holding `/` (real broker, real Spark,
real Delta)."""

from __future__ import annotations

import random
from datetime import date
from pathlib import Path

import pytest

from helpers import make_project
from kafka_io.kafkakit import SOURCES_YML, mixed_records, produce, unique
from sqlflow.compiler import compile_project
from sqlflow.engine.context import Context
from sqlflow.errors import SqlflowError
from sqlflow.project.load import load_project
from sqlflow.runtime import dispatch
from sqlflow.runtime.kafka.archive import archive
from sqlflow.workflows.audit import audit_project

pytestmark = pytest.mark.spark

ROUTE_MACROS = Path(__file__).resolve().parents[2] / "macros" / "route.sql"
DAY = 86_400_000
T0 = 1_764_000_000_000  # 2025-11-24T16:00:00Z

MODEL = """\
{{ config(materialized='streaming_table', file_format='delta', partition_by='dt') }}
select req_id, ad_id, click_ts, ingest_ts, to_date(click_ts) as dt, concat('a/', ad_id) as lane
from {{ source('SCHEMA', 'clicks') }}
"""
# a routed group over the model, by the parity of ad_id; its `lane` partition values hold a `/`
ROUTE = ("{{{{ route_to(ref('stg_clicks'), '{key}', columns=['req_id', 'ad_id', 'click_ts', "
         "'ingest_ts'], route_key='cast(ad_id % 2 as string)', event_time='click_ts', "
         "tags=['lane']) }}}}")
ROUTED = {"models": {"testproj": {"routed": {
    "+materialized": "streaming_table", "+partition_by": ["dt", "hour", "lane"],
    "+routing": {"group": "by_parity"}}}}}


def test_audit_of_a_live_stream_over_kafka(spark, kafka_broker, tmp_path) -> None:
    schema, topic = unique("ka"), unique("clicks")
    root = make_project(tmp_path, models={"stg_clicks.sql": MODEL.replace("SCHEMA", schema),
                                          "routed/r_even.sql": ROUTE.format(key="0"),
                                          "routed/r_odd.sql": ROUTE.format(key="1")},
                        yml={"models/sources.yml": SOURCES_YML.format(schema=schema, topic=topic)},
                        macros={"route.sql": ROUTE_MACROS.read_text()}, project_yml=ROUTED,
                        profiles_yml=f"sqlflow:\n  target: local\n  outputs:\n    local: {{type: spark, "
                                     f"method: session, host: NA, schema: {schema}_dw}}\n")
    table = load_project(root).source(schema, "clicks")
    ctx = Context.with_session(spark, root)
    rnd = random.Random(7)
    for day in (0, 1, 3):  # records on three days: the first two are closed once day 3 arrives
        values, stamps = mixed_records(rnd, 12, T0 + day * DAY)
        produce(kafka_broker.address, topic, values, timestamps_ms=stamps)
    archive(spark, root, [table], kafka_broker.address)
    plans = compile_project(root, mode="stream", target=ctx.target).plans
    plan, group = plans["stg_clicks"], plans["by_parity"]
    dispatch.run_stream(ctx, plan)
    dispatch.run_stream(ctx, group)
    # a record the stream has not processed yet (archived, in a closed partition): the audit
    # reads only what the stream processed, so it is no difference
    produce(kafka_broker.address, topic, [{"req_id": "unseen", "ad_id": 1,
                                           "click_ts": "2025-11-25T16:00:30Z"}],
            timestamps_ms=[T0 + DAY + 60_000])
    archive(spark, root, [table], kafka_broker.address)

    # a row lost from the live sink, and one from a routed target in a partition whose value
    # holds a `/`: one audit of everything finds each in its partition and nothing else (the
    # unprocessed record above, in the sink's damaged partition, would make it 2 missing)
    sink = plan.sink.table
    lost = spark.sql(f"SELECT min(req_id) FROM {sink} WHERE dt = DATE'2025-11-25'").first()[0]
    spark.sql(f"DELETE FROM {sink} WHERE req_id = '{lost}' AND dt = DATE'2025-11-25'")
    target = next(t for t in group.targets if t.model == "r_odd").sink.table
    row = spark.sql(f"SELECT dt, hour, lane, min(req_id) AS r FROM {target} "
                    "WHERE dt = '2025-11-24' GROUP BY ALL ORDER BY lane LIMIT 1").first()
    spark.sql(f"DELETE FROM {target} WHERE req_id = '{row['r']}'")
    spec = f"dt={row['dt']}/hour={row['hour']}/lane={row['lane'].replace('/', '%2F')}"

    [report, routed] = audit_project(ctx)
    assert not report.ok and not report.problems and report.skipped is None, report
    assert [(p.table, p.partition, p.missing, p.extra) for p in report.partitions if not p.ok] == [
        ("sink", "dt=2025-11-25", 1, 0)]
    assert str(report.closed_before) == "2025-11-27"
    days = {p.partition for p in report.partitions}
    assert {"dt=2025-11-24", "dt=2025-11-25"} <= days and "dt=2025-11-27" not in days
    assert any("2025-11-27" in p for p in report.open_partitions)
    assert all(p.batch_rows == p.stream_rows for p in report.partitions if p.ok)
    assert routed.model == "by_parity" and not routed.problems and routed.skipped is None, routed
    assert {p.table for p in routed.partitions} == {"r_even", "r_odd"}  # clean clicks, no quarantine
    assert [(p.table, p.partition, p.missing, p.extra) for p in routed.partitions if not p.ok] == [
        ("r_odd", spec, 1, 0)]
    assert all(p.batch_rows == p.stream_rows for p in routed.partitions if p.ok)

    # selected by one member, the group is audited whole, and the repair rewrites that
    # partition only; then the model's repair rewrites its damaged partition only
    [routed] = audit_project(ctx, select=["r_even"], repair=True)
    assert routed.model == "by_parity" and routed.ok and routed.repaired == (f"r_odd: {spec}",), routed
    [report] = audit_project(ctx, select=["stg_clicks"], repair=True)
    assert report.model == "stg_clicks" and report.ok and report.repaired == ("sink: dt=2025-11-25",), report
    history = spark.sql(f"DESCRIBE HISTORY {sink}").orderBy("version", ascending=False).first()
    assert "2025-11-25" in str(history["operationParameters"])  # that partition was rewritten

    with pytest.raises(SqlflowError, match="--start 2025-11-25 is after --end 2025-11-24"):
        audit_project(ctx, start=date(2025, 11, 25), end=date(2025, 11, 24))
