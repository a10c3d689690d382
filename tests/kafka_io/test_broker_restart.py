"""The broker restarts while a Kafka source is archived (docs/semantics.md, "Kafka sources:
broker trouble"): the run resumes and every record is archived exactly once (real broker,
stopped and started again from its state folder; real Spark, real Delta)."""

from __future__ import annotations

import threading
import time

import pytest

from kafka_io.kafkakit import kafka_project, produce
from sqlflow.engine import broker
from sqlflow.runtime.kafka.archive import archive, archive_table, checkpoint_of

pytestmark = pytest.mark.spark

T0 = 1_764_000_000_000


def test_a_broker_restart_mid_archive_loses_and_doubles_nothing(spark, kafka_broker, tmp_path) -> None:
    root, table = kafka_project(tmp_path)
    table = table.model_copy(update={"kafka": table.kafka.model_copy(
        update={"max_offsets_per_trigger": 10})})  # 6 micro-batches
    topic, address = table.kafka.topic, kafka_broker.address
    sent = [{"req_id": f"r{i}", "ad_id": i, "click_ts": "2025-11-24T16:00:00Z"} for i in range(60)]
    produce(address, topic, sent, timestamps_ms=[T0 + i for i in range(60)])
    bounced = threading.Event()

    def bounce() -> None:  # once the first micro-batch is committed: down for 8 s, then up
        first = checkpoint_of(root, table) / "commits" / "0"
        deadline = time.monotonic() + 300
        while not first.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        broker.stop(kafka_broker.folder)
        time.sleep(8)
        broker.start(kafka_broker.folder, kafka_broker.port)
        bounced.set()

    thread = threading.Thread(target=bounce, daemon=True)
    thread.start()
    try:
        done = archive(spark, root, [table], address)
    finally:
        thread.join(timeout=120)
    assert bounced.is_set() and broker.reachable(address)
    rows = sorted((r[0], r[1]) for r in spark.sql(
        f"SELECT _kafka_offset, req_id FROM {archive_table(table)}").collect())
    assert rows == [(i, f"r{i}") for i in range(60)]  # each record once, none lost
    assert done[0].rows == 60
