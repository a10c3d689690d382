"""A Kafka source archived to its Delta table with Spark's Kafka connector, each record once,
malformed payloads kept whole with their reason (real broker, real Spark, real Delta)."""

from __future__ import annotations

import pytest

from kafka_io.kafkakit import kafka_project, produce
from sqlflow.runtime.kafka.archive import archive, archive_table

pytestmark = pytest.mark.spark

T0 = 1_764_000_000_000  # ms: 2025-11-24T16:00:00Z


def _rows(spark, table):
    return sorted(tuple(r) for r in spark.sql(
        f"SELECT _kafka_offset, req_id, ad_id, CAST(click_ts AS STRING), CAST(ingest_ts AS STRING), "
        f"_kafka_error, _kafka_value FROM {archive_table(table)}").collect())


def test_archive_each_record_once_with_malformed_payloads_kept(spark, kafka_broker, tmp_path) -> None:
    root, table = kafka_project(tmp_path)
    topic = table.kafka.topic
    produce(kafka_broker.address, topic, [
        {"req_id": "r1", "ad_id": 7, "click_ts": "2025-11-24T15:59:58.123456Z"},
        b"{not json",
        {"req_id": "r3", "ad_id": "seven", "click_ts": "2025-11-24T15:59:59Z"},
        b"\xff\xfe binary",
        {"req_id": "r5" * 200, "ad_id": 1, "click_ts": "2025-11-24T15:59:59Z"},
        {"req_id": "r6", "ad_id": 8},
    ], timestamps_ms=[T0 + i for i in range(6)])
    first = archive(spark, root, [table], kafka_broker.address)
    assert (first[0].rows, first[0].malformed) == (6, 4)
    got = _rows(spark, table)
    ts = ["2025-11-24 16:00:00"] + [f"2025-11-24 16:00:00.00{i}" for i in range(1, 6)]
    assert [g[:6] for g in got] == [
        (0, "r1", 7, "2025-11-24 15:59:58.123456", ts[0], None),
        (1, None, None, None, ts[1], "bad_json"),
        (2, None, None, None, ts[2], "wrong_type"),
        (3, None, None, None, ts[3], "bad_json"),
        (4, None, None, None, ts[4], "oversized"),
        (5, "r6", 8, None, ts[5], None),
    ]
    assert bytes(got[3][6]) == b"\xff\xfe binary"  # the record kept whole
    # a second run finds nothing new; new records are archived once
    assert archive(spark, root, [table], kafka_broker.address)[0].rows == 0
    produce(kafka_broker.address, topic, [{"req_id": "r7", "ad_id": 9,
                                           "click_ts": "2025-11-24T16:00:01Z"}],
            timestamps_ms=[T0 + 10_000])
    assert archive(spark, root, [table], kafka_broker.address)[0].rows == 1
    again = _rows(spark, table)
    assert again[:6] == got and [g[:3] for g in again[6:]] == [(6, "r7", 9)]


def test_an_archive_create_killed_before_its_catalog_entry_is_moved_aside(spark, kafka_broker, tmp_path) -> None:
    """A kill -9 between the archive's first commit and its catalog entry leaves version 0 of
    the archive table in its folder with no catalog entry (tests/kafka_io/test_kill.py hit it at
    random): the next run moves that folder aside and archives every record once. It was
    refused at every restart while archives carried no owner."""
    import glob
    import os
    import shutil

    from sqlflow.runtime import ownership
    from sqlflow.runtime.delta import interrupted_create
    from sqlflow.runtime.kafka.archive import archive_sink

    root, table = kafka_project(tmp_path)
    sink = archive_sink(table)
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {table.schema}")
    folder = interrupted_create.table_folder(spark, sink.table)
    spark.sql(f"CREATE TABLE {sink.table} (a string) USING delta {ownership.tblproperties(sink.owner, sink.role)}")
    shutil.copytree(folder, f"{folder}.copy")
    spark.sql(f"DROP TABLE {sink.table}")
    shutil.move(f"{folder}.copy", folder)
    produce(kafka_broker.address, table.kafka.topic,
            [{"req_id": "r1", "ad_id": 7, "click_ts": "2025-11-24T15:59:58Z"}], timestamps_ms=[T0])
    assert archive(spark, root, [table], kafka_broker.address)[0].rows == 1
    (moved,) = glob.glob(f"{folder}.interrupted-*")
    assert os.path.isdir(os.path.join(moved, "_delta_log"))
    assert [g[:3] for g in _rows(spark, table)] == [(0, "r1", 7)]
