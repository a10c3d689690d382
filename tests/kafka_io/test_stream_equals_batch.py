"""A model over a Kafka source: the stream run (archive, then the model over the archive, in
several rounds) equals the batch plan over the archive, sink and quarantine, row for row; the
malformed records sit in quarantine with their payload, reason and topic/partition/offset."""

from __future__ import annotations

import random

import pytest

from kafka_io.kafkakit import mixed_records, produce, twin_projects
from runtime.adkit import assert_same
from sqlflow.compiler import compile_project
from sqlflow.engine.context import Context
from sqlflow.runtime import dispatch
from sqlflow.runtime.kafka.archive import archive

pytestmark = pytest.mark.spark

T0 = 1_764_000_000_000


def test_stream_over_kafka_equals_batch_over_the_archive(spark, kafka_broker, tmp_path) -> None:
    rnd = random.Random(21)
    batch_root, stream_root, table = twin_projects(tmp_path)
    stream_ctx = Context.with_session(spark, stream_root)
    stream = compile_project(stream_root, mode="stream", target=stream_ctx.target)
    stream.raise_if_errors()
    quarantined = 0
    for round_ in range(3):  # three arrivals: three archive runs, three stream runs
        values, stamps = mixed_records(rnd, 40, T0 + round_ * 100_000)
        half = len(values) // 2
        produce(kafka_broker.address, table.kafka.topic, values[:half], partition=0,
                timestamps_ms=stamps[:half])
        produce(kafka_broker.address, table.kafka.topic, values[half:], partition=1,
                timestamps_ms=stamps[half:])
        archive(spark, stream_root, [table], kafka_broker.address)
        res = dispatch.run_stream(stream_ctx, stream.plans["stg_clicks"])
        quarantined += sum(b.quarantined for b in res.batches)
    batch_ctx = Context.with_session(spark, batch_root)
    batch = compile_project(batch_root, mode="batch", target=batch_ctx.target)
    batch.raise_if_errors()
    want = batch.plans["stg_clicks"]
    list(dispatch.run_batch(batch_ctx, want))
    got = stream.plans["stg_clicks"]
    assert_same(spark, got.sink.table, want.sink.table)
    assert_same(spark, got.quarantine, want.quarantine)
    q = {r["reason"]: r for r in spark.table(got.quarantine).collect()}
    assert {"bad_json", "wrong_type", "oversized", "null_event_time", "future"} <= set(q)
    assert quarantined == spark.table(got.quarantine).count()  # counted in the run summary
    bad = q["bad_json"]
    topic, partition, offset = bad["origin"].split("/")
    raw = spark.sql(f"SELECT _kafka_value FROM {table.schema}.{table.identifier} WHERE "
                    f"_kafka_partition = {partition} AND _kafka_offset = {offset}").first()[0]
    assert topic == table.kafka.topic
    assert bad["raw"] in (bytes(raw).decode("utf-8", "strict") if bad["raw"][:7] != "base64:"
                          else "", "base64:" + __import__("base64").b64encode(bytes(raw)).decode())
