"""Offsets gone from the broker (docs/semantics.md, "Kafka sources: offsets gone from the
broker"): the archive fails with the operator's choice instead of skipping, and
`--reset-offsets earliest|latest` archives or skips exactly the lost partitions' records while
the others resume where they stood (real broker, real Spark, real Delta)."""

from __future__ import annotations

import time

import pytest

from kafka_io.kafkakit import kafka_project, produce
from sqlflow.errors import SqlflowError
from sqlflow.runtime.kafka.archive import archive, archive_table, checkpoint_of

pytestmark = pytest.mark.spark

T0 = 1_764_000_000_000


def _records(prefix: str, n: int) -> list[bytes | dict]:
    return [{"req_id": f"{prefix}{i}", "ad_id": i, "click_ts": "2025-11-24T16:00:00Z"} for i in range(n)]


def _archived(spark, table) -> list[tuple[int, int, str]]:
    return sorted((r[0], r[1], r[2]) for r in spark.sql(
        f"SELECT _kafka_partition, _kafka_offset, req_id FROM {archive_table(table)}").collect())


def _admin(address: str):
    from kafka import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=address)


def test_retention_loss_is_refused_then_earliest_archives_what_is_left(spark, kafka_broker, tmp_path) -> None:
    from kafka import TopicPartition

    root, table = kafka_project(tmp_path)
    topic, address = table.kafka.topic, kafka_broker.address
    produce(address, topic, _records("a", 5), partition=0, timestamps_ms=[T0] * 5)
    produce(address, topic, _records("b", 3), partition=1, timestamps_ms=[T0] * 3)
    archive(spark, root, [table], address)
    produce(address, topic, _records("c", 5), partition=0, timestamps_ms=[T0] * 5)  # offsets 5..9
    produce(address, topic, _records("d", 2), partition=1, timestamps_ms=[T0] * 2)  # offsets 3..4
    admin = _admin(address)
    admin.delete_records({TopicPartition(topic, 0): 7})  # retention took offsets 5 and 6 unread
    admin.close()

    with pytest.raises(SqlflowError) as err:
        archive(spark, root, [table], address)
    text = str(err.value)
    assert "partition 0: archived up to offset 5, the broker holds offsets 7..9" in text
    assert "retention removed offsets 5..6" in text and "nothing was skipped" in text
    assert "--reset-offsets earliest" in text and "--reset-offsets latest" in text
    assert err.value.diagnostics[0].location.path.endswith("sources.yml")
    before = _archived(spark, table)

    done = archive(spark, root, [table], address, reset="earliest")
    assert any("earliest archives 3 records" in line for line in done[0].reset)
    assert list(checkpoint_of(root, table).parent.glob(f"{checkpoint_of(root, table).name}.reset-*"))
    # partition 0 from the broker's first offset, partition 1 exactly where it stood
    new = [(0, o, f"c{o - 5}") for o in (7, 8, 9)] + [(1, 3, "d0"), (1, 4, "d1")]
    assert _archived(spark, table) == sorted(before + new)
    # the new checkpoint goes on as any other
    produce(address, topic, _records("e", 1), partition=1, timestamps_ms=[T0])
    assert archive(spark, root, [table], address)[0].rows == 1
    assert _archived(spark, table) == sorted(before + new + [(1, 5, "e0")])


def test_a_recreated_topic_is_refused_then_latest_skips_what_it_holds(spark, kafka_broker, tmp_path) -> None:
    root, table = kafka_project(tmp_path)
    topic, address = table.kafka.topic, kafka_broker.address
    produce(address, topic, _records("a", 4), partition=0, timestamps_ms=[T0] * 4)
    archive(spark, root, [table], address)
    before = _archived(spark, table)
    admin = _admin(address)
    admin.delete_topics([topic])
    admin.close()
    time.sleep(2)  # the deletion completes on the broker
    produce(address, topic, _records("n", 2), partition=0, timestamps_ms=[T0] * 2)

    with pytest.raises(SqlflowError) as err:
        archive(spark, root, [table], address)
    assert "the topic was recreated" in str(err.value)
    assert _archived(spark, table) == before  # nothing written, nothing skipped

    done = archive(spark, root, [table], address, reset="latest")
    assert done[0].rows == 0
    assert any("latest skips 2 records" in line for line in done[0].reset)
    produce(address, topic, _records("m", 1), partition=0, timestamps_ms=[T0])
    assert archive(spark, root, [table], address)[0].rows == 1
    assert _archived(spark, table) == sorted(before + [(0, 2, "m0")])
