"""A sink with a STRING partition column computes the model's rows once per micro-batch and
once per backfill (docs/semantics.md, "Partition values"; issue 23: the fixed cost of a
micro-batch): the count of the rows whose partition value cannot be a directory, their
quarantine write and the sink write all read one cached result. Counted by a Python function
the model calls once per output row, which appends a byte to a file each time Spark runs it.
The backfill's side of it (the same cache in `runtime.batch`) is not counted here yet (its first
try called `dispatch.run_batch`, a generator, without consuming it, so nothing ran); its rows
are compared with the stream's by `test_faults.py`'s partition test."""

from __future__ import annotations

import pytest

from runtime.adkit import CLICK_SCHEMA, IMP_SCHEMA, append, at, call_counter, click, imp, setup_projects
from sqlflow.runtime.dispatch import run_stream

pytestmark = pytest.mark.spark

COUNTER = "sqlflow_test_counted_tag"
MODELS = {
    "counted.sql": "{{ config(materialized='streaming_table', partition_by=['tag']) }}\n" + f"""
SELECT c.req_id, c.click_ts, i.ad_id, {COUNTER}(c.req_id) AS tag
FROM {{{{ source('ods', 'clicks') }}}} AS c
JOIN {{{{ source('ods', 'imps') }}}} AS i
  ON i.req_id = c.req_id AND c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 20 MINUTES""",
}


@pytest.fixture
def setup(spark, tmp_path, request):
    yield from setup_projects(spark, tmp_path, request, "rt_once_", MODELS)


def test_the_model_rows_are_computed_once_per_micro_batch(spark, setup, tmp_path):
    calls = call_counter(spark, tmp_path, COUNTER, "string")
    s, plan = setup, setup.stream_plans["counted"]
    tags = ["ok", "a\x00b", "also ok"]  # the NUL one is quarantined `bad_partition`
    append(spark, f"{s.ods}.imps", [imp(t, 1, at(1, 10, k)) for k, t in enumerate(tags)], IMP_SCHEMA)
    append(spark, f"{s.ods}.clicks", [click(t, at(1, 10, k, 30)) for k, t in enumerate(tags)], CLICK_SCHEMA)

    assert [b.batch_id for b in run_stream(s.stream, plan).batches] == [0]
    assert calls.stat().st_size == len(tags)  # once per output row: not again for the sink write
    assert [r["reason"] for r in spark.table(plan.quarantine).collect()] == ["bad_partition"]
    assert sorted(r["tag"] for r in spark.table(plan.sink.table).collect()) == ["also ok", "ok"]
