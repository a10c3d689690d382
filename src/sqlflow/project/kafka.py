"""A source table's Kafka binding (yml `meta: sqlflow: kafka:`; docs/semantics.md, "Kafka sources").

The table's yml columns and their types are the JSON payload's schema; the table's
`ingest_time` column is the Kafka record timestamp, never read from the payload. The bootstrap
servers are not here but in the target (`spark.sqlflow.kafka.bootstrap.servers` in its
`server_side_parameters`, `env_var()` allowed): the same yml runs against any cluster, and a
target without them reads the table as the plain Delta table it is (`active`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, PositiveFloat, PositiveInt, model_validator

from sqlflow.project.config import ByteSize, Duration

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
    # source control (docs/semantics.md, "Kafka sources: rate limits, playback, alignment")
    max_offsets_per_trigger: PositiveInt | None = None  # Spark `maxOffsetsPerTrigger`
    max_rows_per_second: PositiveFloat | None = None  # held across micro-batches
    playback_speed: PositiveFloat | None = None  # a backlog at N x the pace of its timestamps
    alignment_group: str | None = None  # Flink `scan.watermark.alignment.group`
    max_skew: Duration | None = None  # Flink `scan.watermark.alignment.max-drift`

    @model_validator(mode="after")
    def _aligned_together(self) -> KafkaBinding:
        if (self.alignment_group is None) != (self.max_skew is None):
            raise ValueError("`alignment_group` and `max_skew` go together: give both "
                             "(the sources of one group stay within `max_skew` of each other)")
        return self

    def offsets_per_trigger(self) -> int | None:
        """Spark's `maxOffsetsPerTrigger`: the declared one, else one second of
        `max_rows_per_second` (so a micro-batch is never a burst far above the rate).

        >>> KafkaBinding(topic="t", max_rows_per_second=250).offsets_per_trigger()
        250
        >>> KafkaBinding(topic="t", max_offsets_per_trigger=10, max_rows_per_second=250).offsets_per_trigger()
        10
        """
        if self.max_offsets_per_trigger:
            return self.max_offsets_per_trigger
        if self.max_rows_per_second:
            return max(1, int(self.max_rows_per_second))
        return None


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
