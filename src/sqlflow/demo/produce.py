"""`sqlflow demo produce`: the demo's impressions, clicks and user events into Kafka topics.

The records are the rows `sqlflow demo generate` writes (`sqlflow.demo.ods`, the same seed
gives the same rows), so they carry the same disorder, late and future rows, re-delivered
duplicates and defects; each becomes one JSON record whose Kafka timestamp is its ingest time,
sent in ingest order, keyed by its id (so one key stays in one partition). About
`MALFORMED_RATE` of the records are then spoiled the way broken producers spoil them
(truncated JSON, a wrong type, bytes that are not UTF-8, an oversized value), chosen by the
seed. The dimension tables are written as `generate` writes them, into the target's warehouse.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from sqlflow.demo import ods
from sqlflow.demo import scenario as S
from sqlflow.demo.generate import generate

TOPICS = {"ods_ad_impressions": ("ad_impression", "req_id", ods.impressions),
          "ods_ad_clicks": ("ad_click", "req_id", ods.clicks),
          "ods_user_events": ("user_event", "event_id", ods.events)}
"""Source table -> (topic, key column, the generator of its rows); models/sources.yml binds them."""
MALFORMED_RATE = 0.005
PARTITIONS = 2
OVERSIZED_BYTES = 128 * 1024  # over the demo binding's max_value_bytes (64KB), under the broker's 1MB


@dataclass(frozen=True)
class Produced:
    topic: str
    records: int
    malformed: int


_JSON = {"timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX", "ignoreNullFields": "true"}


def spoil(payload: bytes, rnd: random.Random) -> bytes:
    """A payload as a broken producer sends it (one of four ways)."""
    way = rnd.randrange(4)
    if way == 0:
        return payload[: max(1, len(payload) // 2)]  # truncated
    if way == 1:
        return json.dumps({**json.loads(payload), "user_id": "many"}).encode()  # a wrong type
    if way == 2:
        return b"\xff\xfe" + payload  # not UTF-8
    return payload[:-1] + b', "pad": "' + b"x" * OVERSIZED_BYTES + b'"}'


def produce(spark: SparkSession, servers: str, *, rows: int = S.DEFAULT_ROWS, seed: int = S.DEFAULT_SEED,
            days: int = S.DEFAULT_DAYS, rate: float | None = None, dim_schema: str = "dim",
            topics: dict[str, str] | None = None,
            progress: Callable[[str], None] | None = None) -> list[Produced]:
    """Write the dimensions, then send every topic's records (at most `rate` records a second
    over all topics when given); one `Produced` per topic. `topics` renames topics (tests)."""
    from kafka import KafkaAdminClient, KafkaProducer
    from kafka.admin import NewTopic
    from kafka.errors import TopicAlreadyExistsError

    say = progress or (lambda _line: None)
    names = {t: (topics or {}).get(t, t) for t, _, _ in TOPICS.values()}
    generate(spark, rows=rows, seed=seed, days=days, ods_schema="ods", dim_schema=dim_schema,
             write_ods=False, progress=say)
    admin = KafkaAdminClient(bootstrap_servers=servers)
    for topic in names.values():
        try:
            admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
        except TopicAlreadyExistsError:
            pass
    admin.close()
    producer = KafkaProducer(bootstrap_servers=servers, linger_ms=20,
                             max_request_size=OVERSIZED_BYTES * 2)
    rnd = random.Random(seed)
    scale = ods.Scale(seed=seed, rows=rows, days=days, start=S.DEFAULT_START)
    out, sent, began = [], 0, time.monotonic()
    for default, key, build in TOPICS.values():
        topic = names[default]
        rows_ = build(spark, scale).drop(*ods.HELPER_COLUMNS)
        payload_cols = [c for c in rows_.columns if c != "ingest_ts"]
        frame = rows_.select(F.col(key).cast("string").alias("k"),
                             F.to_json(F.struct(*payload_cols), _JSON).alias("v"),
                             F.unix_millis("ingest_ts").alias("ms")).orderBy("ms")
        bad, records = 0, 0
        for row in frame.toLocalIterator():
            payload = row["v"].encode()
            if rnd.random() < MALFORMED_RATE:
                payload, bad = spoil(payload, rnd), bad + 1
            producer.send(topic, payload, key=(row["k"] or "").encode(), timestamp_ms=row["ms"])
            sent, records = sent + 1, records + 1
            if rate and sent / max(time.monotonic() - began, 1e-3) > rate:
                time.sleep(sent / rate - (time.monotonic() - began))
        producer.flush()
        out.append(Produced(topic, records, bad))  # (what was sent: no second pass over the rows)
        say(f"produced {out[-1].records:,} records to {topic} ({bad:,} malformed)")
    producer.close()
    return out
