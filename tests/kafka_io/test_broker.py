"""`sqlflow kafka up|down` and the test run's broker: a real KRaft broker on 127.0.0.1."""

from __future__ import annotations

import uuid

from click.testing import CliRunner

from sqlflow.cli.main import main
from sqlflow.engine import broker


def test_broker_takes_and_serves_records(kafka_broker) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    topic = f"t_{uuid.uuid4().hex[:8]}"
    producer = KafkaProducer(bootstrap_servers=kafka_broker.address)
    for i in range(3):
        producer.send(topic, f"v{i}".encode(), partition=0, timestamp_ms=1_700_000_000_000 + i)
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=kafka_broker.address,
                             auto_offset_reset="earliest", consumer_timeout_ms=10_000)
    got = []
    for r in consumer:  # stop at the third record, not at the timeout
        got.append((r.value, r.timestamp, r.offset))
        if len(got) == 3:
            break
    consumer.close()
    assert got == [(b"v0", 1_700_000_000_000, 0), (b"v1", 1_700_000_000_001, 1),
                   (b"v2", 1_700_000_000_002, 2)]


def test_kafka_up_reports_the_running_broker_and_down_without_one(kafka_broker, tmp_path) -> None:
    # `up` over the folder of a running broker finds it instead of starting a second one
    assert broker.running(kafka_broker.folder) == kafka_broker
    again = broker.start(kafka_broker.folder, kafka_broker.port + 7)
    assert again == kafka_broker
    (tmp_path / "dbt_project.yml").write_text("name: p\nprofile: sqlflow\n")
    out = CliRunner().invoke(main, ["--project-dir", str(tmp_path), "kafka", "down"])
    assert out.exit_code == 0, out.output
    assert "no kafka broker runs" in out.output


def test_kafka_up_refuses_a_port_another_program_holds(kafka_broker, tmp_path) -> None:
    (tmp_path / "dbt_project.yml").write_text("name: p\nprofile: sqlflow\n")
    out = CliRunner().invoke(main, ["--project-dir", str(tmp_path), "kafka", "up",
                                    "--port", str(kafka_broker.port)])
    assert out.exit_code == 1
    assert f"port {kafka_broker.port}" in out.output and "--port" in out.output
