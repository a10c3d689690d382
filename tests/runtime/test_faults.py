"""The fault catalogue (docs/semantics.md, "Faults: what is guaranteed, what is refused"), on
real Spark and Delta with small data. Each case damages a run the way an operator's accident
does, then compares every row of every output with the batch plan's:

- a crash after the sink write (or after the state append) of a micro-batch, before Spark's
  commit file, with the checkpoint's `sqlflow_once/` journal lost: the replay writes nothing
  twice (the journal is rebuilt from the markers in the tables), for an inner and a left join
  (`incremental`) and a left join of the `stateful` strategy;
- the same for a routed group, crashed between two targets;
- an older copy of the checkpoint restored over a newer one: refused with both named and the
  way out; the matching checkpoint resumes and nothing was written twice;
- a truncated `offsets/N` file: one error naming the file and the fix;
- schema drift of an input between runs: a column added is handled (rows equal), a type
  changed is one clear error that does not say "run again", and no row is wrong;
- two stream runs of one model at once, and a backfill or a full refresh of the model while its
  stream runs: the second is refused naming the lock, nothing is written twice;
- a create killed before its catalog entry: the folder it left is moved aside (never deleted)
  and the run recovers; a folder holding a table sqlflow did not create is refused, untouched.

kill -9 of a separate `sqlflow run` process at the named fault points, stream, routed and
batch runs: `test_kill9.py`.
"""

from __future__ import annotations

import glob
import json
import logging
import os
import shutil

import pytest
from pyspark.sql import functions as F

from runtime.adkit import (
    CLICK_SCHEMA,
    IMP_SCHEMA,
    append,
    assert_same,
    at,
    click,
    edge_cases,
    imp,
    setup_projects,
)
from sqlflow.compiler import compile_project
from sqlflow.errors import SqlflowError
from sqlflow.runtime import refresh
from sqlflow.runtime.delta import interrupted_create, once, sink_truth, sinks
from sqlflow.runtime.dispatch import run_batch, run_stream

pytestmark = pytest.mark.spark

HEAD = "{{ config(materialized='streaming_table', partition_by=['dt']) }}\n"
MODELS = {
    "attributed.sql": HEAD + """
SELECT c.req_id, c.click_ts, i.ad_id, i.imp_ts, to_date(c.click_ts) AS dt
FROM {{ source('ods', 'clicks') }} AS c
JOIN {{ source('ods', 'imps') }} AS i
  ON i.req_id = c.req_id AND c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 20 MINUTES""",
    "tagged.sql": "{{ config(materialized='streaming_table', partition_by=['tag']) }}\n" + """
SELECT c.req_id, c.click_ts, i.ad_id, c.req_id AS tag
FROM {{ source('ods', 'clicks') }} AS c
JOIN {{ source('ods', 'imps') }} AS i
  ON i.req_id = c.req_id AND c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 20 MINUTES""",
    "left_samples.sql": HEAD + """
SELECT i.req_id, i.ad_id, i.imp_ts, c.click_ts, CASE WHEN c.req_id IS NULL THEN 0 ELSE 1 END AS label,
       to_date(i.imp_ts) AS dt
FROM {{ source('ods', 'imps') }} AS i
LEFT JOIN {{ source('ods', 'clicks') }} AS c
  ON i.req_id = c.req_id AND c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 20 MINUTES""",
    "stateful_samples.sql": "{{ config(materialized='streaming_table', partition_by=['dt'], "
                            "stream_strategy='stateful', skew_margin='3 days') }}\n" + """
SELECT i.req_id, i.ad_id, i.imp_ts, c.click_ts, CASE WHEN c.req_id IS NULL THEN 0 ELSE 1 END AS label,
       to_date(i.imp_ts) AS dt
FROM {{ source('ods', 'imps') }} AS i
LEFT JOIN {{ source('ods', 'clicks') }} AS c
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


def first_two_batches(spark, s, model, split=(7, 3)):
    """Batch 0 runs whole; batch 1's rows are appended, not yet streamed. `split`: how many
    impressions and clicks of the edge cases batch 0 gets."""
    imps, clicks = edge_cases()
    append(spark, f"{s.ods}.imps", imps[:split[0]], IMP_SCHEMA)
    append(spark, f"{s.ods}.clicks", clicks[:split[1]], CLICK_SCHEMA)
    ran = [b.batch_id for b in run_stream(s.stream, s.stream_plans[model]).batches if b.kind == "batch"]
    assert ran[:1] == [0] and (ran == [0] or s.stream_plans[model].strategy == "stateful")  # + heartbeats
    append(spark, f"{s.ods}.imps", imps[split[0]:], IMP_SCHEMA)
    append(spark, f"{s.ods}.clicks", clicks[split[1]:], CLICK_SCHEMA)


# An outer join's bounded run ends with a flush that pads every unmatched preserved row
# (docs/semantics.md, "Outer interval joins in stream mode"); a later run whose rows match a
# padded row diverges from the batch plan by design (reported dirty, fixed by `sqlflow repair`).
# So the outer cases cut the edge cases where no later row matches a row a flush padded: the
# duplicated `dup` impressions arrive with their clicks in batch 1, not before them.
NO_LATE_MATCH = (5, 3)
# The `stateful` strategy's bounded run ends with a heartbeat at its newest clean event time +
# the flush margin (20 minutes) + 1 s (docs/semantics.md, "Heartbeat flush"): Spark drops a
# later row behind that watermark (reported dirty). Batch 0 ends with the NULL-key click at
# 14:01, so batch 1 (the `dup` impressions at 15:00 and everything after) starts past 14:21:01.
WITHIN_WATERMARK = (5, 5)


# (No right join: the runtime pads the preserved side whichever it is, and the journal is
# rebuilt from the tables' markers whatever the join; a right join's stream equals its batch
# plan in tests/runtime/test_interval_contract.py.)
@pytest.mark.parametrize("model,point", [("attributed", "sink"), ("attributed", "state"),
                                         ("left_samples", "sink"), ("left_samples", "state"),
                                         ("stateful_samples", "sink")])
def test_a_crash_with_the_journal_lost_writes_nothing_twice(spark, setup, model, point):
    s, plan = setup, setup.stream_plans[model]
    stateful = plan.strategy == "stateful"
    first_two_batches(spark, s, model, WITHIN_WATERMARK if stateful else NO_LATE_MATCH)

    def crash(batch_id):
        raise RuntimeError(f"simulated crash after the {point} write of batch {batch_id}")

    with pytest.raises(SqlflowError, match="simulated crash"):
        run_stream(s.stream, plan, **{f"after_{point}": crash})
    shutil.rmtree(checkpoint_of(s, model) / once.FOLDER)  # a partial restore, a clean-up script
    replay = run_stream(s.stream, plan)
    first = [b for b in replay.batches if b.kind == "batch"][0]
    assert first.replayed and (first.batch_id == 1 or stateful)
    # a later batch joins against what the replayed batch wrote (state rows included); the
    # stateful strategy's flushed watermark passed the first day (00:30:01 on day 2, after the
    # `midnight` click): its later rows are on day 2, one matched and one padded
    later = [click("lower", at(1, 10, 5)), click("dup", at(1, 15, 2))] if not stateful else [click("next", at(2, 9, 5))]
    if stateful:
        append(spark, f"{s.ods}.imps", [imp("next", 7, at(2, 9, 0)), imp("lone", 7, at(2, 9, 1))], IMP_SCHEMA)
    append(spark, f"{s.ods}.clicks", later, CLICK_SCHEMA)
    after = run_stream(s.stream, plan)
    assert [b.batch_id for b in after.batches if b.kind == "batch"][:1] == [max(b.batch_id for b in replay.batches) + 1]
    assert replay.dirty == () and after.dirty == ()
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


def test_the_markers_read_at_start_name_the_batches_the_sink_holds(spark, setup):
    s, plan = setup, setup.stream_plans["attributed"]
    first_two_batches(spark, s, "attributed")
    run_stream(s.stream, plan)
    found = sink_truth.held(spark, [plan.sink.table, plan.quarantine, "sqlflow.commit_log"],
                            ("attributed@",), -1)
    assert {(h.table, h.batch) for h in found if h.app.endswith("@" + h.app.split("@")[1])} >= {
        (plan.sink.table, 0), (plan.sink.table, 1)}


def test_a_truncated_offsets_file_is_an_error_naming_it_and_the_fix(spark, setup):
    s, plan = setup, setup.stream_plans["attributed"]
    first_two_batches(spark, s, "attributed")
    run_stream(s.stream, plan)
    damaged = checkpoint_of(s, "attributed") / "offsets" / "1"
    text = damaged.read_bytes()
    damaged.write_bytes(text[: len(text) // 2])  # a crash while Spark wrote it, a copy cut short
    append(spark, f"{s.ods}.clicks", [click("lower", at(1, 10, 5))], CLICK_SCHEMA)
    with pytest.raises(SqlflowError) as err:
        run_stream(s.stream, plan)
    (diag,) = err.value.diagnostics
    assert str(damaged) in diag.message and "offsets" in diag.message
    assert "--full-refresh" in diag.hint and "restore" in diag.hint
    assert "run again" not in diag.hint
    damaged.write_bytes(text)  # the file restored: the query resumes, nothing twice
    assert [b.batch_id for b in run_stream(s.stream, plan).batches] == [2]
    assert_equals_the_batch_plan(spark, s, "attributed")


def test_a_column_added_to_an_input_between_runs_is_handled(spark, setup):
    s, plan = setup, setup.stream_plans["attributed"]
    first_two_batches(spark, s, "attributed")
    run_stream(s.stream, plan)
    spark.sql(f"ALTER TABLE {s.ods}.clicks ADD COLUMNS (campaign string)")
    append(spark, f"{s.ods}.clicks", [(*click("lower", at(1, 10, 5)), "c1"), (*click("dup", at(1, 15, 2)), None)],
           CLICK_SCHEMA + ", campaign string")
    assert [b.batch_id for b in run_stream(s.stream, plan).batches] == [2]
    assert_equals_the_batch_plan(spark, s, "attributed")


def test_a_column_type_changed_between_runs_is_a_clear_error_and_no_row_is_wrong(spark, setup):
    s, plan = setup, setup.stream_plans["attributed"]
    first_two_batches(spark, s, "attributed")
    run_stream(s.stream, plan)
    truth, _ = s.truth("attributed")  # the batch plan over the rows before the change
    before = spark.table(plan.sink.table).collect()
    (spark.table(f"{s.ods}.imps").withColumn("ad_id", F.col("ad_id").cast("string"))
     .write.format("delta").mode("overwrite").option("overwriteSchema", "true")
     .saveAsTable(f"{s.ods}.imps"))
    append(spark, f"{s.ods}.clicks", [click("lower", at(1, 10, 5))], CLICK_SCHEMA)
    with pytest.raises(SqlflowError) as err:
        run_stream(s.stream, plan)
    (diag,) = err.value.diagnostics
    assert f"{s.ods}.imps" in diag.message and "run again" not in diag.hint, diag.format()
    assert "--full-refresh" in diag.hint, diag.format()
    assert_same(spark, plan.sink.table, truth)  # what the sink holds is still right
    assert sorted(map(tuple, spark.table(plan.sink.table).collect())) == sorted(map(tuple, before))


def test_a_second_stream_run_and_a_backfill_while_a_stream_runs_are_refused(spark, setup):
    s, plan = setup, setup.stream_plans["attributed"]
    first_two_batches(spark, s, "attributed")
    (backfill,) = [p for p in compile_project(s.stream.project_dir, mode="batch",
                                              target=s.stream.target).plans.values()
                   if p.model == "attributed"]  # the same model and tables, as a backfill
    refused: list[str] = []

    def meanwhile(batch_id):
        for other in (lambda: run_stream(s.stream, plan), lambda: list(run_batch(s.stream, backfill)),
                      lambda: refresh.full_refresh(spark, s.stream.project_dir, plan)):
            try:
                other()
            except SqlflowError as exc:
                refused.append(exc.diagnostics[0].format())

    assert [b.batch_id for b in run_stream(s.stream, plan, after_sink=meanwhile).batches] == [1]
    lock = f"{checkpoint_of(s, 'attributed')}.lock"
    assert len(refused) == 3, refused
    assert all("already running" in r and lock in r for r in refused), refused
    assert "refused this stream run" in refused[0] and "refused this backfill" in refused[1]
    assert "refused this full refresh" in refused[2]
    assert_equals_the_batch_plan(spark, s, "attributed")  # nothing written twice
    # once the stream run ended, the lock is free: the next run and a backfill go ahead
    append(spark, f"{s.ods}.clicks", [click("lower", at(1, 10, 5))], CLICK_SCHEMA)
    assert [b.batch_id for b in run_stream(s.stream, plan).batches] == [2]
    assert_equals_the_batch_plan(spark, s, "attributed")


def test_an_ordinary_sink_quarantines_a_row_whose_partition_value_cannot_be_a_directory(spark, setup):
    """A NUL or an over-long value of a STRING partition column goes to the model's quarantine
    (`bad_partition`) in both modes; values Spark escapes are written; the query never stops."""
    s, plan = setup, setup.stream_plans["tagged"]
    nul, long = "a\x00b", "x" * 300
    tags = ["ok", nul, long, "a/b=c%d", "../../../../tmp/x", "__HIVE_DEFAULT_PARTITION__"]
    append(spark, f"{s.ods}.imps", [imp(t, 1, at(1, 10, k)) for k, t in enumerate(tags)], IMP_SCHEMA)
    append(spark, f"{s.ods}.clicks", [click(t, at(1, 10, k, 30)) for k, t in enumerate(tags)], CLICK_SCHEMA)
    assert [b.batch_id for b in run_stream(s.stream, plan).batches] == [0]
    sink, quarantine = s.truth("tagged")
    assert_same(spark, plan.sink.table, sink)
    # `input` names the model's own table, which the two projects here keep in two schemas
    assert_same(spark, plan.quarantine, quarantine, drop=("origin", "input"))
    assert {r["input"] for r in spark.table(plan.quarantine).collect()} == {plan.sink.table}
    bad = {r["raw"]: r["reason"] for r in spark.table(plan.quarantine).collect()}
    assert sorted(json.loads(raw)["tag"] for raw in bad) == sorted([nul, long, "__HIVE_DEFAULT_PARTITION__"])
    assert set(bad.values()) == {"bad_partition"}
    written = {r["tag"] for r in spark.table(plan.sink.table).collect()}
    assert written == {"ok", "a/b=c%d", "../../../../tmp/x"}


def test_a_create_killed_before_its_catalog_entry_is_moved_aside_and_the_run_recovers(spark, setup, caplog):
    """A kill -9 inside the first write of a table leaves its folder without a catalog entry:
    either data files with no Delta log, or version 0 of a table sqlflow was creating for this
    model. Delta refuses every later create over such a folder; the next run moves the folder
    aside (nothing deleted, a warning names it) and equals the batch plan. A folder holding a
    table sqlflow did not create for this model is refused, untouched."""
    s, plan = setup, setup.stream_plans["attributed"]
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {plan.sink.table.rsplit('.', 1)[0]}")
    sink_dir = interrupted_create.table_folder(spark, plan.sink.table)
    quarantine_dir = interrupted_create.table_folder(spark, plan.quarantine)
    # the sink: the files of a write killed before its first commit (no `_delta_log`)
    spark.createDataFrame([("x",)], "a string").coalesce(1).write.parquet(sink_dir)
    with pytest.raises(Exception, match="DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION"):  # CI's error
        spark.createDataFrame([], "a string").writeTo(plan.sink.table).using("delta").create()
    # the quarantine: version 0 of the table this model was creating, its catalog entry lost
    spark.sql(f"CREATE TABLE {plan.quarantine} (a string) USING delta TBLPROPERTIES "
              f"('sqlflow.model' = 'attributed', 'sqlflow.role' = 'quarantine')")
    shutil.copytree(quarantine_dir, f"{quarantine_dir}.copy")
    spark.sql(f"DROP TABLE {plan.quarantine}")
    shutil.move(f"{quarantine_dir}.copy", quarantine_dir)
    debris = {d: sorted(os.listdir(d)) for d in (sink_dir, quarantine_dir)}

    imps, clicks = edge_cases()
    append(spark, f"{s.ods}.imps", imps, IMP_SCHEMA)
    append(spark, f"{s.ods}.clicks", clicks, CLICK_SCHEMA)
    with caplog.at_level(logging.WARNING, logger="sqlflow"):
        assert [b.batch_id for b in run_stream(s.stream, plan).batches] == [0]
    notices = [r.getMessage() for r in caplog.records if "interrupted create" in r.getMessage()]
    for folder, files in debris.items():
        (moved,) = glob.glob(f"{folder}.interrupted-*")
        assert sorted(os.listdir(moved)) == files  # moved whole, nothing deleted
        assert any(moved in n for n in notices), notices
    assert_equals_the_batch_plan(spark, s, "attributed")

    other = setup.stream_plans["tagged"].sink  # a Delta table nobody created for `tagged`
    folder = interrupted_create.table_folder(spark, other.table)
    spark.range(3).write.format("delta").save(folder)
    before = sorted(os.listdir(folder))
    with pytest.raises(SqlflowError) as err:
        sinks.write(spark, other, spark.range(0), batch=sinks.BatchId("tagged@x", 0))
    (diag,) = err.value.diagnostics
    assert folder in diag.message and "never adopts" in diag.message and folder in diag.hint
    assert sorted(os.listdir(folder)) == before and not glob.glob(f"{folder}.interrupted-*")


def test_a_create_run_twice_finds_its_own_table_and_the_stream_still_equals_the_batch_plan(
        spark, setup, monkeypatch):
    """Over Spark Connect a create can run twice: the client sends its plan again when the
    response stream broke and the server had already released the finished operation. The
    second run fails with `TABLE_OR_VIEW_ALREADY_EXISTS` on the table the first one made (the
    stream service's idle step failed so, 2026-12-03). Here every create of an outer join's
    runs (sink, quarantine, state tables, the padding progress, with and without rows) is run
    twice: the runs go on, and sink and quarantine equal the batch plan row for row. A table of
    another owner is still refused."""
    from pyspark.errors import AnalysisException
    from pyspark.sql.readwriter import DataFrameWriterV2

    from sqlflow.runtime.delta import retried_create

    s, model = setup, "left_samples"
    real, twice = DataFrameWriterV2.create, []

    def create(writer):
        real(writer)
        twice.append(writer)
        real(writer)

    monkeypatch.setattr(DataFrameWriterV2, "create", create)
    first_two_batches(spark, s, model, NO_LATE_MATCH)
    run_stream(s.stream, s.stream_plans[model])
    monkeypatch.undo()
    assert len(twice) >= 5  # sink, quarantine, two state tables, progress
    assert_equals_the_batch_plan(spark, s, model)

    sink = s.stream_plans[model].sink.table
    with pytest.raises(AnalysisException, match="TABLE_OR_VIEW_ALREADY_EXISTS"):
        retried_create.create(spark, spark.range(1).writeTo(sink).using("delta"), sink, "tagged", "sink")
