"""The fault catalogue (docs/semantics.md, "Faults: what is guaranteed, what is refused"), on
real Spark and Delta with small data. Each case damages a run the way an operator's accident
does, then compares every row of every output with the batch plan's:

- a crash after the sink write (or after the state append) of a micro-batch, before Spark's
  commit file, with the checkpoint's `sqlflow_once/` journal lost: the replay writes nothing
  twice (the journal is rebuilt from the markers in the tables);
- the same for a routed group, crashed between two targets;
- an older copy of the checkpoint restored over a newer one: refused with both named and the
  way out; the matching checkpoint resumes and nothing was written twice.
"""

from __future__ import annotations

import shutil
import time

import pytest

from runtime.adkit import CLICK_SCHEMA, IMP_SCHEMA, append, assert_same, at, click, edge_cases, setup_projects
from sqlflow.errors import SqlflowError
from sqlflow.runtime.delta import once, sink_truth
from sqlflow.runtime.dispatch import run_stream

pytestmark = pytest.mark.spark

HEAD = "{{ config(materialized='streaming_table', partition_by=['dt']) }}\n"
MODELS = {
    "attributed.sql": HEAD + """
SELECT c.req_id, c.click_ts, i.ad_id, i.imp_ts, to_date(c.click_ts) AS dt
FROM {{ source('ods', 'clicks') }} AS c
JOIN {{ source('ods', 'imps') }} AS i
  ON i.req_id = c.req_id AND c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 20 MINUTES""",
}


@pytest.fixture
def setup(spark, tmp_path, request):
    yield from setup_projects(spark, tmp_path, request, "rt_fault_", MODELS)


def checkpoint_of(s, model):
    return s.stream.project_dir / ".sqlflow" / "checkpoints" / model


def assert_equals_the_batch_plan(spark, s, model):
    sink, quarantine = s.truth(model)
    assert_same(spark, s.stream_plans[model].sink.table, sink)
    assert_same(spark, s.stream_plans[model].quarantine, quarantine, drop=("origin",))


def first_two_batches(spark, s, model):
    """Batch 0 runs whole; batch 1's rows are appended, not yet streamed."""
    imps, clicks = edge_cases()
    append(spark, f"{s.ods}.imps", imps[:7], IMP_SCHEMA)
    append(spark, f"{s.ods}.clicks", clicks[:3], CLICK_SCHEMA)
    assert [b.batch_id for b in run_stream(s.stream, s.stream_plans[model]).batches if b.kind == "batch"] == [0]
    append(spark, f"{s.ods}.imps", imps[7:], IMP_SCHEMA)
    append(spark, f"{s.ods}.clicks", clicks[3:], CLICK_SCHEMA)


@pytest.mark.parametrize("model,point", [("attributed", "sink"), ("attributed", "state")])
def test_a_crash_with_the_journal_lost_writes_nothing_twice(spark, setup, model, point):
    s, plan = setup, setup.stream_plans[model]
    first_two_batches(spark, s, model)

    def crash(batch_id):
        raise RuntimeError(f"simulated crash after the {point} write of batch {batch_id}")

    with pytest.raises(SqlflowError, match="simulated crash"):
        run_stream(s.stream, plan, **{f"after_{point}": crash})
    shutil.rmtree(checkpoint_of(s, model) / once.FOLDER)  # a partial restore, a clean-up script
    replay = run_stream(s.stream, plan).batches
    assert [(b.batch_id, b.replayed) for b in replay if b.kind == "batch"] == [(1, True)]
    # a later batch joins against what the replayed batch wrote (state rows included)
    append(spark, f"{s.ods}.clicks", [click("lower", at(1, 10, 5)), click("dup", at(1, 15, 2))], CLICK_SCHEMA)
    assert [b.batch_id for b in run_stream(s.stream, plan).batches if b.kind == "batch"] == [2]
    assert_equals_the_batch_plan(spark, s, model)


def test_an_older_checkpoint_restored_over_a_newer_one_is_refused(spark, setup, tmp_path):
    s, plan = setup, setup.stream_plans["attributed"]
    first_two_batches(spark, s, "attributed")
    checkpoint, backup = checkpoint_of(s, "attributed"), tmp_path / "backup"
    shutil.copytree(checkpoint, backup)  # the backup holds batch 0 only
    assert [b.batch_id for b in run_stream(s.stream, plan).batches] == [1]
    newer = tmp_path / "newer"
    shutil.copytree(checkpoint, newer)
    shutil.rmtree(checkpoint)
    shutil.copytree(backup, checkpoint)  # a backup restore
    with pytest.raises(SqlflowError) as err:
        run_stream(s.stream, plan)
    (diag,) = err.value.diagnostics
    assert f"checkpoint `{checkpoint}` is older than table `{plan.sink.table}`" in diag.message
    assert "holds micro-batch 1" in diag.message and "offsets end at batch 0" in diag.message
    assert "--full-refresh" in diag.hint and "restore the checkpoint copy" in diag.hint
    assert_equals_the_batch_plan(spark, s, "attributed")  # nothing was written twice
    shutil.rmtree(checkpoint)
    shutil.copytree(newer, checkpoint)  # the matching checkpoint resumes
    append(spark, f"{s.ods}.clicks", [click("lower", at(1, 10, 5))], CLICK_SCHEMA)
    assert [b.batch_id for b in run_stream(s.stream, plan).batches] == [2]
    assert_equals_the_batch_plan(spark, s, "attributed")


def test_reading_the_markers_at_start_is_cheap(spark, setup):
    s, plan = setup, setup.stream_plans["attributed"]
    first_two_batches(spark, s, "attributed")
    run_stream(s.stream, plan)
    began = time.monotonic()
    found = sink_truth.held(spark, [plan.sink.table, plan.quarantine, "sqlflow.commit_log"],
                            ("attributed@",), -1)
    assert time.monotonic() - began < 2.0
    assert {(h.table, h.batch) for h in found if h.app.endswith("@" + h.app.split("@")[1])} >= {
        (plan.sink.table, 0), (plan.sink.table, 1)}
