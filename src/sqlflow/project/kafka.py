"""A source table's Kafka binding (yml `meta: sqlflow: kafka:`; docs/semantics.md, "Kafka sources").

The table's yml columns and their types are the JSON payload's schema; the table's
`ingest_time` column is the Kafka record timestamp, never read from the payload. The bootstrap
servers are not here but in the target (`spark.sqlflow.kafka.bootstrap.servers` in its
`server_side_parameters`, `env_var()` allowed): the same yml runs against any cluster, and a
target without them reads the table as the plain Delta table it is (`active`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from sqlflow.project.config import ByteSize

BOOTSTRAP_KEY = "spark.sqlflow.kafka.bootstrap.servers"
"""The target setting naming the Kafka cluster; a target without it binds no topic."""

ARCHIVE_COLUMNS = ("_kafka_key", "_kafka_value", "_kafka_topic", "_kafka_partition",
                   "_kafka_offset", "_kafka_timestamp", "_kafka_error")
"""The columns the archive adds to a Kafka source's yml columns: the record as it arrived
(key and value bytes, where it was read, its timestamp) and why its payload did not parse
(NULL when it did)."""


class KafkaBinding(BaseModel):
    """Where a source table's rows come from when the target names a Kafka cluster."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    topic: str
    format: Literal["json"] = "json"
    starting_offsets: Literal["earliest", "latest"] = "earliest"
    max_value_bytes: ByteSize = 1024 * 1024
    max_offsets_per_trigger: int | None = None


def kafka_keys() -> list[str]:
    return sorted(KafkaBinding.model_fields)


def bootstrap_servers(server_side_parameters: dict[str, str]) -> str | None:
    """The target's Kafka cluster, None when it binds no topic.

    >>> bootstrap_servers({BOOTSTRAP_KEY: "127.0.0.1:9092"})
    '127.0.0.1:9092'
    >>> bootstrap_servers({}) is None
    True
    """
    value = server_side_parameters.get(BOOTSTRAP_KEY, "").strip()
    return value or None
