"""`sqlflow demo` over Kafka (`sqlflow.demo.kafka_demo`): which target it runs on, the broker it
uses (one already answering is used and left running), and its fresh start (the demo's topics
deleted). The whole demo runs by hand (README command 1); these are the cheap parts, with the
test run's broker and no Spark."""

from __future__ import annotations

from pathlib import Path

from helpers import make_project
from kafka_io.kafkakit import produce, unique
from sqlflow.demo.kafka_demo import delete_topics, ensure_broker, kafka_context
from sqlflow.engine.context import Context

ROOT = Path(__file__).resolve().parents[2]


def _profiles(address: str | None = None) -> str:
    text = (ROOT / "profiles" / "profiles.yml").read_text()
    if address is not None:  # the kafka target pointed at the test run's broker
        text = text.replace("{{ env_var('SQLFLOW_KAFKA_BOOTSTRAP', '127.0.0.1:9092') }}", address)
    return text


def test_the_demo_runs_over_kafka_unless_a_target_without_a_cluster_is_named(tmp_path) -> None:
    root = make_project(tmp_path, profiles_yml=_profiles())
    chosen = kafka_context(Context.discover(root))  # no --target: the profile's `kafka` target
    assert chosen is not None and chosen.target.name == "kafka"
    named = Context.discover(root, "kafka")
    assert kafka_context(named) is named
    for delta_only in ("local", "cluster"):  # tests, benchmarks, the cluster demo
        assert kafka_context(Context.discover(root, delta_only)) is None
    without = make_project(tmp_path / "plain")  # a profile with no `kafka` target
    assert kafka_context(Context.discover(without)) is None


def test_a_running_broker_is_used_and_the_demo_topics_start_over(kafka_broker, tmp_path) -> None:
    root = make_project(tmp_path, profiles_yml=_profiles(kafka_broker.address))
    ctx = Context.discover(root, "kafka")
    lines: list[str] = []
    assert ensure_broker(ctx, kafka_broker.address, lines.append) is None  # not the demo's to stop
    assert "already running: using it" in lines[0]
    assert not (root / ".sqlflow" / "kafka").exists()  # no broker of the project's was started

    from kafka import KafkaAdminClient

    topics = [unique("demo_a"), unique("demo_b")]
    produce(kafka_broker.address, topics[0], [{"req_id": "r1"}])
    assert delete_topics(kafka_broker.address, [*topics, unique("never")]) == [topics[0]]
    admin = KafkaAdminClient(bootstrap_servers=kafka_broker.address)
    try:
        assert not set(topics) & set(admin.list_topics())
    finally:
        admin.close()
    produce(kafka_broker.address, topics[0], [{"req_id": "r2"}])  # it can be created again
