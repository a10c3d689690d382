"""`sqlflow demo produce`: the demo generator's rows reach Kafka whole; archived under the
demo's own source yml, every record is either exactly a generator row or a spoiled one in
quarantine-to-be (`_kafka_error`), about the documented rate."""

from __future__ import annotations

import random

import pytest

from helpers import make_project
from kafka_io.kafkakit import unique
from sqlflow.demo import ods
from sqlflow.demo.produce import TOPICS, produce, spoil
from sqlflow.project.load import load_project
from sqlflow.runtime.kafka.archive import archive

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


def test_spoil_breaks_every_payload() -> None:
    import json

    rnd = random.Random(3)
    good = json.dumps({"req_id": "a", "ad_id": 1, "user_id": 2, "imp_ts": "2026-11-01T00:00:00Z"}).encode()
    for _ in range(40):
        bad = spoil(good, rnd)
        try:
            value = json.loads(bad.decode("utf-8"))
        except ValueError:
            continue  # truncated or not UTF-8
        assert value.get("user_id") == "many" or len(bad) > 64 * 1024


@pytest.mark.spark
def test_produced_records_are_the_generator_rows(spark, kafka_broker, tmp_path) -> None:
    schema, dims = unique("kd"), unique("kdim")
    names = {t: unique(t) for t, _, _ in TOPICS.values()}
    yml = (ROOT / "models" / "sources.yml").read_text().replace("schema: ods", f"schema: {schema}")
    for default, topic in names.items():
        yml = yml.replace(f"topic: {default}\n", f"topic: {topic}\n")
    root = make_project(tmp_path, yml={"models/sources.yml": yml})
    done = produce(spark, kafka_broker.address, rows=120, seed=5, days=1, dim_schema=dims, topics=names)
    tables = [t for t in load_project(root).sources.values() if t.kafka]
    archived = {a.topic: a for a in archive(spark, root, tables, kafka_broker.address)}
    scale = ods.Scale(seed=5, rows=120, days=1, start=ods.S.DEFAULT_START)
    for (source, (_, _, build)), made in zip(TOPICS.items(), done, strict=True):
        assert archived[made.topic].rows == made.records and archived[made.topic].malformed == made.malformed
        truth = build(spark, scale).drop(*ods.HELPER_COLUMNS)
        got = spark.table(f"{schema}.{source}").where("_kafka_error IS NULL").select(*truth.columns)
        assert got.exceptAll(truth).count() == 0  # every clean record is a generator row
        assert truth.exceptAll(got).count() == made.malformed  # the rest were spoiled
    assert sum(p.records for p in done) > 200
