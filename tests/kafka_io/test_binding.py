"""A source table's Kafka binding in yml (`meta: sqlflow: kafka:`): values, and errors at their line."""

from __future__ import annotations

import pytest

from helpers import make_project
from sqlflow.errors import SqlflowError
from sqlflow.project.load import load_project

YML = """\
version: 2
sources:
  - name: ods
    tables:
      - name: clicks
        meta:
          sqlflow:
            event_time: click_ts
            ingest_time: ingest_ts
            kafka:
              topic: ad_click
              starting_offsets: earliest
              max_value_bytes: 64KB
        columns:
          - {name: req_id, data_type: string}
          - {name: click_ts, data_type: timestamp}
          - {name: ingest_ts, data_type: timestamp}
"""


def _error(root) -> str:
    with pytest.raises(SqlflowError) as err:
        load_project(root)
    return str(err.value)


def test_binding_values(tmp_path) -> None:
    table = load_project(make_project(tmp_path, yml={"models/sources.yml": YML})).source("ods", "clicks")
    assert table.kafka is not None
    assert (table.kafka.topic, table.kafka.format, table.kafka.starting_offsets,
            table.kafka.max_value_bytes) == ("ad_click", "json", "earliest", 64 * 1024)


def test_unknown_binding_key_names_the_line_and_the_closest_key(tmp_path) -> None:
    yml = YML.replace("starting_offsets:", "starting_offset:")
    assert _error(make_project(tmp_path, yml={"models/sources.yml": yml})) == (
        "models/sources.yml:12: error: unknown key `starting_offset` in the `kafka:` binding; "
        "did you mean `starting_offsets`?")


def test_binding_needs_a_topic_and_a_known_format(tmp_path) -> None:
    yml = YML.replace("topic: ad_click", "format: avro")
    msg = _error(make_project(tmp_path, yml={"models/sources.yml": yml}))
    assert "the `kafka:` binding needs `topic:`" in msg
    assert "models/sources.yml:11: error: `kafka.format` has an invalid value 'avro'" in msg


def test_binding_needs_every_column_typed(tmp_path) -> None:
    yml = YML.replace("{name: req_id, data_type: string}", "{name: req_id}")
    assert "column `req_id` has no `data_type`" in _error(make_project(
        tmp_path, yml={"models/sources.yml": yml}))


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_stream_run_with_no_broker_says_where_it_looked(tmp_path, monkeypatch) -> None:
    from rich.console import Console

    from sqlflow.compiler import compile_project
    from sqlflow.engine.context import Context
    from sqlflow.workflows.run import archive_topics

    address = f"127.0.0.1:{_closed_port()}"
    profiles = ("sqlflow:\n  target: k\n  outputs:\n    k:\n      {type: spark, method: session, "
                "host: NA, schema: dw, server_side_parameters: {spark.sqlflow.kafka.bootstrap.servers: "
                "\"{{ env_var('KAFKA_ADDR') }}\", spark.sqlflow.kafka.retries: \"1\", "
                "spark.sqlflow.kafka.retry_backoff: \"100 ms\"}}\n")
    monkeypatch.setenv("KAFKA_ADDR", address)
    group = "              alignment_group: ads\n              max_skew: 30 minutes\n"
    twin = YML.split("      - name: clicks\n")[1].replace("topic: ad_click", "topic: ad_click2")
    yml = YML.replace("max_value_bytes: 64KB\n", "max_value_bytes: 64KB\n" + group) \
        + "      - name: clicks2\n" + twin.replace("max_value_bytes: 64KB\n", "max_value_bytes: 64KB\n" + group)
    root = make_project(tmp_path, yml={"models/sources.yml": yml}, profiles_yml=profiles,
                        models={"stg.sql": "{{ config(materialized='streaming_table') }}\n"
                                           "select req_id, click_ts from {{ source('ods', 'clicks') }}\n"
                                           "union all select req_id, click_ts from {{ source('ods', 'clicks2') }}"})
    ctx = Context.discover(root)
    plans = list(compile_project(root, mode="stream", target=ctx.target).plans.values())
    out = Console(record=True, width=200)
    with pytest.raises(SqlflowError) as err:
        archive_topics(ctx, plans, out)
    assert f"no Kafka broker answers at {address} (target `k`)" in str(err.value)
    # waited for as the target says (`spark.sqlflow.kafka.retries`), once, then refused
    assert out.export_text().count("no broker answers yet, trying again") == 1
    assert "ods.clicks" in str(err.value) and "sqlflow kafka up" in str(err.value)
    assert not ctx.has_spark  # refused before Spark started
    # an address read from a secret variable is never printed
    monkeypatch.setenv("DBT_ENV_SECRET_KAFKA", address)
    secret = profiles.replace("KAFKA_ADDR", "DBT_ENV_SECRET_KAFKA")
    (root / "profiles" / "profiles.yml").write_text(secret)
    with pytest.raises(SqlflowError) as err:
        archive_topics(Context.discover(root), plans, Console())
    assert address not in str(err.value) and "the target's bootstrap servers" in str(err.value)


def test_source_control_values(tmp_path) -> None:
    yml = YML.replace("max_value_bytes: 64KB", "max_value_bytes: 64KB\n              "
                      "max_rows_per_second: 500\n              playback_speed: 10\n              "
                      "alignment_group: ads\n              max_skew: 10 minutes")
    kafka = load_project(make_project(tmp_path, yml={"models/sources.yml": yml})).source(
        "ods", "clicks").kafka
    assert (kafka.max_rows_per_second, kafka.playback_speed, kafka.alignment_group,
            kafka.max_skew.total_seconds(), kafka.offsets_per_trigger()) == (500, 10, "ads", 600, 500)


def test_source_control_errors_name_the_line(tmp_path) -> None:
    yml = YML.replace("max_value_bytes: 64KB", "max_value_bytes: 64KB\n              "
                      "max_rows_per_second: 0\n              alignment_group: ads")
    msg = _error(make_project(tmp_path, yml={"models/sources.yml": yml}))
    assert "models/sources.yml:14: error: `kafka.max_rows_per_second`: Input should be greater than 0" in msg
    yml = YML.replace("max_value_bytes: 64KB", "max_value_bytes: 64KB\n              alignment_group: ads")
    msg = _error(make_project(tmp_path / "b", yml={"models/sources.yml": yml}))
    assert "the `kafka:` binding: `alignment_group` and `max_skew` go together" in msg


def test_reset_offsets_is_for_stream_runs_and_kafka_sources(tmp_path) -> None:
    from click.testing import CliRunner

    from sqlflow.cli.main import main

    root = make_project(tmp_path, yml={"models/sources.yml": YML},
                        models={"stg.sql": "{{ config(materialized='streaming_table') }}\n"
                                           "select req_id, click_ts from {{ source('ods', 'clicks') }}"})
    batch = CliRunner().invoke(main, ["--project-dir", str(root), "run", "--mode", "batch",
                                      "--reset-offsets", "earliest"])
    assert batch.exit_code == 1 and "--reset-offsets applies to --mode stream only" in batch.output
    wrong = CliRunner().invoke(main, ["--project-dir", str(root), "run", "--mode", "stream",
                                      "--reset-offsets", "oldest"])
    assert wrong.exit_code == 2 and "'oldest' is not one of 'earliest', 'latest'" in wrong.output


def test_an_alignment_group_over_kafka_is_refused_over_spark_connect(tmp_path) -> None:
    """Two sources of one alignment group are held against each other in this process: over
    Connect their archive queries' batches would run in the server's workers (a lone Kafka
    source archives there: tests/cluster/test_connect_demo.py)."""
    from rich.console import Console

    from sqlflow.compiler import compile_project
    from sqlflow.engine.context import Context
    from sqlflow.workflows.run import archive_topics

    profiles = ("sqlflow:\n  target: c\n  outputs:\n    c:\n      {type: spark, method: session, "
                "host: NA, schema: dw, server_side_parameters: {spark.remote: 'sc://127.0.0.1:1', "
                "spark.sqlflow.kafka.bootstrap.servers: '127.0.0.1:1'}}\n")
    group = "              alignment_group: ads\n              max_skew: 30 minutes\n"
    twin = YML.split("      - name: clicks\n")[1].replace("topic: ad_click", "topic: ad_click2")
    yml = YML.replace("max_value_bytes: 64KB\n", "max_value_bytes: 64KB\n" + group) \
        + "      - name: clicks2\n" + twin.replace("max_value_bytes: 64KB\n", "max_value_bytes: 64KB\n" + group)
    root = make_project(tmp_path, yml={"models/sources.yml": yml}, profiles_yml=profiles,
                        models={"stg.sql": "{{ config(materialized='streaming_table') }}\n"
                                           "select req_id, click_ts from {{ source('ods', 'clicks') }}\n"
                                           "union all select req_id, click_ts from {{ source('ods', 'clicks2') }}"})
    ctx = Context.discover(root)
    plans = list(compile_project(root, mode="stream", target=ctx.target).plans.values())
    with pytest.raises(SqlflowError) as err:
        archive_topics(ctx, plans, Console())
    assert "`kafka` cannot run over Spark Connect" in str(err.value)
    assert "alignment group" in str(err.value) and not ctx.has_spark
