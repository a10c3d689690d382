"""Source control of the Kafka archive (docs/semantics.md, "Source control"): a rate limit held
across micro-batches, history playback at N x real time, and two sources of one alignment group
kept within `max_skew` while one replays a 2-hour backlog and the other is live (real broker,
real Spark, real Delta)."""

from __future__ import annotations

import time

import pytest

from helpers import make_project
from kafka_io.kafkakit import produce, unique
from sqlflow.project.load import load_project
from sqlflow.runtime.kafka.archive import archive, archive_table

pytestmark = pytest.mark.spark

TABLE = """\
      - name: {name}
        meta:
          sqlflow:
            event_time: click_ts
            ingest_time: ingest_ts
            kafka:
              topic: {topic}
{extra}
        columns:
          - {{name: req_id, data_type: string}}
          - {{name: click_ts, data_type: timestamp}}
          - {{name: ingest_ts, data_type: timestamp}}
"""


def _project(tmp_path, **tables: str):
    """A project whose source `<schema>` has one Kafka table per keyword (name=its extra
    binding lines); returns (root, {name: SourceTable})."""
    schema = unique("kc")
    body = "".join(TABLE.format(name=n, topic=unique(n), extra="\n".join(
        "              " + line for line in extra.splitlines())) for n, extra in tables.items())
    root = make_project(tmp_path, yml={"models/sources.yml":
                                       f"version: 2\nsources:\n  - name: {schema}\n    tables:\n{body}"})
    project = load_project(root)
    return root, {n: project.source(schema, n) for n in tables}


def _records(n: int, first_ms: int, step_ms: int) -> tuple[list[dict], list[int]]:
    stamps = [first_ms + i * step_ms for i in range(n)]
    return [{"req_id": f"r{i}", "click_ts": "2025-11-24T16:00:00Z"} for i in range(n)], stamps


def _count(spark, table) -> int:
    return spark.table(archive_table(table)).count()


def _archived(spark, table) -> list[str]:
    """The archive's parsed `req_id`s, every row (duplicates kept), sorted."""
    return sorted(r[0] for r in spark.table(archive_table(table)).select("req_id").collect())


def _produced(n: int) -> list[str]:
    return sorted(f"r{i}" for i in range(n))


def test_rate_limit_and_playback_hold_the_archive(spark, kafka_broker, tmp_path) -> None:
    root, t = _project(tmp_path, rated="max_rows_per_second: 5",
                       played="playback_speed: 10\nmax_offsets_per_trigger: 10")
    # `rated`: 15 rows at 5/s; `played`: 30 records over 58 s of ingest time, an hour ago
    values, stamps = _records(15, int(time.time() * 1000) - 60_000, 10)
    produce(kafka_broker.address, t["rated"].kafka.topic, values, timestamps_ms=stamps)
    values, stamps = _records(30, int(time.time() * 1000) - 3_600_000, 2_000)
    produce(kafka_broker.address, t["played"].kafka.topic, values, timestamps_ms=stamps)
    done = {a.table: a for a in archive(spark, root, [t["rated"], t["played"]], kafka_broker.address)}
    rated, played = done["rated"], done["played"]
    # three micro-batches of 5 (one second's worth each): the third is written no earlier
    # than the two seconds the first two cost (the pacing itself: tests/kafka_io/test_pacing.py)
    assert (rated.rows, rated.batches) == (15, 3) and rated.seconds >= 2.0
    # at 10x, 58 s of timestamps take at least 5.8 s, in three batches of 10
    assert (played.rows, played.batches) == (30, 3) and played.seconds >= 5.8
    assert _count(spark, t["rated"]) == 15 and _count(spark, t["played"]) == 30
    # each record archived once, none lost or repeated by the pacing
    assert _archived(spark, t["rated"]) == _produced(15) and _archived(spark, t["played"]) == _produced(30)


def test_alignment_holds_the_live_source_while_the_other_replays_its_backlog(
        spark, kafka_broker, tmp_path) -> None:
    group = "alignment_group: ads\nmax_skew: 30 minutes"
    root, t = _project(tmp_path, backlog=f"{group}\nmax_offsets_per_trigger: 4", live=group)
    now = int(time.time() * 1000)
    # `backlog`: 24 records over the last 2 hours (one every 5 minutes); `live`: the last 5 minutes
    values, stamps = _records(24, now - 7_200_000, 300_000)
    produce(kafka_broker.address, t["backlog"].kafka.topic, values, timestamps_ms=stamps)
    values, stamps = _records(6, now - 300_000, 60_000)
    produce(kafka_broker.address, t["live"].kafka.topic, values, timestamps_ms=stamps)
    done = {a.table: a for a in archive(spark, root, list(t.values()), kafka_broker.address)}
    assert (done["backlog"].rows, done["live"].rows) == (24, 6)
    assert done["backlog"].batches == 6
    assert _archived(spark, t["backlog"]) == _produced(24) and _archived(spark, t["live"]) == _produced(6)
    # the live source's one batch (its newest record 2 hours after the backlog's oldest) was
    # written only once the backlog had caught up to within 30 minutes of it
    assert done["live"].lead_ms is not None and done["live"].lead_ms <= 30 * 60_000
    assert done["live"].held_s > 0
