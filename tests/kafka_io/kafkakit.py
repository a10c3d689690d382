"""Helpers of the Kafka tests: a project with one Kafka source, and producing records."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from helpers import make_project
from sqlflow.project.load import load_project
from sqlflow.project.sources import SourceTable

SOURCES_YML = """\
version: 2
sources:
  - name: {schema}
    tables:
      - name: clicks
        meta:
          sqlflow:
            event_time: click_ts
            ingest_time: ingest_ts
            allowed_lateness: 10 minutes
            future_tolerance: 5 minutes
            kafka:
              topic: {topic}
              max_value_bytes: 200
        columns:
          - {{name: req_id, data_type: string}}
          - {{name: ad_id, data_type: bigint}}
          - {{name: click_ts, data_type: timestamp}}
          - {{name: ingest_ts, data_type: timestamp}}
"""


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def kafka_project(tmp_path: Path, *, models: dict[str, str] | None = None) -> tuple[Path, SourceTable]:
    """A project whose source `<schema>.clicks` reads a new topic; returns (root, table)."""
    schema, topic = unique("kq"), unique("clicks")
    root = make_project(tmp_path, models=models,
                        yml={"models/sources.yml": SOURCES_YML.format(schema=schema, topic=topic)})
    table = load_project(root).source(schema, "clicks")
    assert table is not None and table.kafka is not None
    return root, table


def produce(address: str, topic: str, values: list[bytes | dict], *, partition: int = 0,
            timestamps_ms: list[int] | None = None) -> None:
    """Append `values` (dicts as JSON) to `topic`, in order, with the given record timestamps."""
    from kafka import KafkaAdminClient, KafkaProducer
    from kafka.admin import NewTopic
    from kafka.errors import TopicAlreadyExistsError

    admin = KafkaAdminClient(bootstrap_servers=address)
    try:  # created up front: a producer waits for an auto-created topic's metadata
        admin.create_topics([NewTopic(topic, 2, 1)])
    except TopicAlreadyExistsError:
        pass
    admin.close()
    producer = KafkaProducer(bootstrap_servers=address)
    for i, value in enumerate(values):
        raw = json.dumps(value).encode() if isinstance(value, dict) else value
        ts = timestamps_ms[i] if timestamps_ms else None
        producer.send(topic, raw, partition=partition, timestamp_ms=ts)
    producer.flush()
    producer.close()
