"""Every column expression sqlflow builds for a write can be sent by a Spark Connect client.

The client copies each expression into its parent message, which protobuf (upb) re-parses with
a nesting limit of 100 messages, about 50 nested function calls: deeper, and the client fails
with `DecodeError: Error parsing message with type 'spark.connect.Expression'` before the server
sees the plan (docs/deploy.md, "Spark Connect"). Built here as Connect columns, without a server
or a JVM: `to_plan` is where the client copies them.
"""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from sqlflow.planning.plan import SourceBinding
from sqlflow.runtime import quarantine as Q
from sqlflow.runtime.delta import partition_path as P

LIMIT = 100  # upb's default recursion limit, in messages
LEVELS = ["dt", "hour", "event_type", "product", "region"]


@pytest.fixture
def connect_columns(monkeypatch):
    monkeypatch.setenv("SPARK_CONNECT_MODE_ENABLED", "1")  # pyspark.sql.functions builds Connect columns


def _depth(message) -> int:
    below = [_depth(m) for field, value in message.ListFields() if field.type == field.TYPE_MESSAGE
             for m in (value if field.is_repeated else [value])]
    return 1 + max(below, default=0)


def _encoded_depth(column) -> int:
    return _depth(column._expr.to_plan(None))  # raises DecodeError when too deep


@pytest.mark.parametrize("levels", [1, 3, len(LEVELS)])
def test_partition_checks_and_keys_stay_shallow_whatever_the_levels(connect_columns, levels):
    cols = LEVELS[:levels]
    depths = {_encoded_depth(P.problem(cols, required=cols[:1])), _encoded_depth(P.key(cols))}
    # a third of the limit at most, whatever the levels: the plan around it needs the rest
    assert max(depths) <= LIMIT // 3, depths


def test_the_quarantine_reason_of_a_kafka_source_stays_shallow(connect_columns):
    binding = SourceBinding(relation="ods.t", input="src.t", read="static")
    times = Q.Times(raw_event=F.col("ts"), event=F.try_to_timestamp(F.col("ts").cast("string")),
                    ingest=F.col("ingest"), kafka_error=F.col(Q.KAFKA_ERROR))
    assert _encoded_depth(Q.reason_of(times, binding).isNull()) <= LIMIT // 3
