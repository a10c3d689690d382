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


STAGING = """\
{{ config(materialized='streaming_table', file_format='delta') }}
select req_id, ad_id, click_ts, ingest_ts from {{ source('SCHEMA', 'clicks') }}
"""


def profiles(schema: str) -> str:
    return f"""\
sqlflow:
  target: local
  outputs:
    local: {{type: spark, method: session, host: NA, schema: {schema}}}
"""


def twin_projects(tmp_path: Path) -> tuple[Path, Path, SourceTable]:
    """A batch project and a stream project (their outputs in two schemas) over the same
    Kafka source `<schema>.clicks` and its one archive, each with the model `stg_clicks`."""
    schema, topic = unique("kq"), unique("clicks")
    roots = []
    for mode in ("batch", "stream"):
        roots.append(make_project(
            tmp_path / mode, models={"stg_clicks.sql": STAGING.replace("SCHEMA", schema)},
            yml={"models/sources.yml": SOURCES_YML.format(schema=schema, topic=topic)},
            profiles_yml=profiles(f"{schema}_{mode}")))
    table = load_project(roots[1]).source(schema, "clicks")
    assert table is not None
    return roots[0], roots[1], table


def mixed_records(rnd, n: int, t0_ms: int) -> tuple[list[bytes | dict], list[int]]:
    """`n` click records around `t0_ms`: clean, late, future, no event time, and the payloads
    that do not parse (bad JSON, not UTF-8, a wrong type, oversized), shuffled."""
    from datetime import datetime, timedelta, timezone

    values: list[bytes | dict] = []
    stamps = []
    for i in range(n):
        ingest = t0_ms + i * 1000
        event = datetime.fromtimestamp(ingest / 1000, timezone.utc) - timedelta(seconds=rnd.randint(0, 900))
        clean = {"req_id": f"r{i}", "ad_id": rnd.randint(1, 5),
                 "click_ts": event.isoformat().replace("+00:00", "Z")}
        value: bytes | dict = clean
        kind = rnd.random()
        if kind < 0.05:
            value = b'{"req_id": "r' + str(i).encode() + b'", "ad_id": '
        elif kind < 0.08:
            value = b"\xc3\x28 not utf-8"
        elif kind < 0.11:
            value = {**clean, "ad_id": "many"}
        elif kind < 0.13:
            value = {**clean, "req_id": "x" * 300}
        elif kind < 0.16:
            value = {"req_id": f"r{i}", "ad_id": 1}
        elif kind < 0.2:
            value = {**clean, "click_ts": (event + timedelta(hours=1)).isoformat().replace("+00:00", "Z")}
        values.append(value)
        stamps.append(ingest)
    return values, stamps
