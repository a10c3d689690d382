"""Continuous archiving (docs/semantics.md, "Kafka sources"): a stream run with an interval
trigger keeps archiving the topic beside the model, so records produced while it runs reach
the sink; the result equals the batch plan over the archive, sink and quarantine, row for row
(real broker, real Spark, real Delta, the stream service of `sqlflow run --mode stream`)."""

from __future__ import annotations

import io
import random
import threading
import time

import pytest
from rich.console import Console

from kafka_io.kafkakit import mixed_records, produce, twin_projects
from runtime.adkit import assert_same
from sqlflow.compiler import compile_project
from sqlflow.engine.context import Context
from sqlflow.runtime import dispatch
from sqlflow.workflows.run import run_stream_plans

pytestmark = pytest.mark.spark

T0 = 1_764_000_000_000


def _bind(root, address: str) -> None:
    """The stream project's target names the broker: its stream runs archive the topic."""
    path = root / "profiles" / "profiles.yml"
    path.write_text(path.read_text().replace(
        "schema: ", f"server_side_parameters: {{spark.sqlflow.kafka.bootstrap.servers: "
                    f"'{address}'}}, schema: ", 1))


def test_records_produced_during_an_interval_run_reach_the_sink(spark, kafka_broker, tmp_path) -> None:
    rnd = random.Random(5)
    batch_root, stream_root, table = twin_projects(tmp_path)
    _bind(stream_root, kafka_broker.address)
    topic = table.kafka.topic
    first, stamps = mixed_records(rnd, 30, T0)
    produce(kafka_broker.address, topic, first, timestamps_ms=stamps)
    stream_ctx = Context.with_session(spark, stream_root)
    stream = compile_project(stream_root, mode="stream", target=stream_ctx.target)
    stream.raise_if_errors()
    plan = stream.plans["stg_clicks"]
    out, stop = io.StringIO(), threading.Event()
    run = threading.Thread(target=run_stream_plans, daemon=True, kwargs=dict(
        ctx=stream_ctx, plans=[plan], out=Console(file=out, width=200), trigger="1 second",
        stop_timeout_s=20, stop=stop))
    run.start()
    try:
        later, later_stamps = mixed_records(rnd, 20, T0 + 60_000)
        later = [{**v, "req_id": "live_" + v["req_id"]} if isinstance(v, dict) else v for v in later]
        clean = [{"req_id": f"live_clean{i}", "ad_id": 1,
                  "click_ts": f"2025-11-24T16:01:3{i}Z"} for i in range(3)]  # ingest 16:01:40
        later, later_stamps = later + clean, later_stamps + [T0 + 100_000] * 3
        wanted = {v["req_id"] for v in clean}
        deadline = time.monotonic() + 240
        while not spark.catalog.tableExists(plan.sink.table) and time.monotonic() < deadline:
            time.sleep(1)
        produce(kafka_broker.address, topic, later, timestamps_ms=later_stamps)  # while it runs
        while time.monotonic() < deadline:
            seen = {r[0] for r in spark.table(plan.sink.table).select("req_id").collect()}
            if wanted <= seen:
                break
            time.sleep(1)
    finally:
        stop.set()
        run.join(timeout=120)
    log = out.getvalue()
    assert not run.is_alive(), log
    assert f"kafka {table.key}: running" in log, log  # the live archive query ran
    assert wanted <= {r[0] for r in spark.table(plan.sink.table).select("req_id").collect()}, log
    batch_ctx = Context.with_session(spark, batch_root)
    batch = compile_project(batch_root, mode="batch", target=batch_ctx.target)
    batch.raise_if_errors()
    want = batch.plans["stg_clicks"]
    list(dispatch.run_batch(batch_ctx, want))
    assert_same(spark, plan.sink.table, want.sink.table)
    assert_same(spark, plan.quarantine, want.quarantine)
