"""The `incremental` stream runtime on real Spark and Delta, differentially: the same input rows
written into fresh Delta source tables in a random order and random chunks (one commit per
chunk), streamed with available-now runs between chunks (several micro-batches, several query
restarts from the same checkpoint), must leave exactly the batch plan's output in the sink and
the batch run's quarantine rows (all but `origin`) in the quarantine table."""

from __future__ import annotations

import json
import random
import re
import shutil
from collections import Counter
from dataclasses import replace

import pytest
from pyspark.sql import functions as F

from helpers import delta_writers
from runtime.adkit import (
    CLICK_SCHEMA,
    IMP_SCHEMA,
    append,
    assert_same,
    at,
    chunks,
    click,
    edge_cases,
    held_in_spark,
    imp,
    own_file_reads,
    random_rows,
    setup_projects,
)
from sqlflow.errors import SqlflowError
from sqlflow.planning.plan import COMMIT_LOG
from sqlflow.runtime.delta import once
from sqlflow.runtime.dispatch import run_stream
from sqlflow.runtime.incremental import microbatch, watched
from sqlflow.runtime.query import checkpoint_dir

pytestmark = pytest.mark.spark

HEAD = "{{ config(materialized='streaming_table', partition_by=['dt']) }}\n"
MODELS = {
    "filtered.sql": HEAD + """
SELECT i.req_id, i.ad_id, i.imp_ts, to_date(i.imp_ts) AS dt
FROM {{ source('ods', 'imps') }} AS i
WHERE i.ad_id > 0""",
    "attributed.sql": HEAD + """
SELECT c.req_id, c.click_ts, i.ad_id, i.imp_ts, to_date(c.click_ts) AS dt
FROM {{ source('ods', 'clicks') }} AS c
JOIN {{ source('ods', 'imps') }} AS i
  ON i.req_id = c.req_id AND c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 20 MINUTES""",
    "samples.sql": HEAD + """
SELECT i.req_id, i.imp_ts, c.click_ts, to_date(i.imp_ts) AS dt
FROM {{ source('ods', 'imps') }} AS i
LEFT JOIN {{ source('ods', 'clicks') }} AS c
  ON i.req_id = c.req_id AND c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 20 MINUTES""",
}


@pytest.fixture
def setup(spark, tmp_path, request):
    yield from setup_projects(spark, tmp_path, request, "rt_stream_", MODELS)


# --- tests ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", [1])  # more orders and splits: test_interval_contract (verify)
def test_random_order_and_splits_equal_the_batch_plan(spark, setup, seed):
    s, rnd = setup, random.Random(seed)
    imps, clicks = edge_cases()
    more = random_rows(seed)
    imps, clicks = imps + more[0], clicks + more[1]
    todo = chunks(rnd, imps, f"{s.ods}.imps", IMP_SCHEMA) + chunks(rnd, clicks, f"{s.ods}.clicks", CLICK_SCHEMA)
    rnd.shuffle(todo)
    # one micro-batch per source commit within a run: several batches per run, several runs
    plans = {m: replace(s.stream_plans[m], sources=tuple(
        replace(b, max_files_per_trigger=rnd.choice([1, 2])) for b in s.stream_plans[m].sources))
        for m in ("filtered", "attributed")}
    batches = 0
    while todo:
        n = rnd.randint(4, 6)
        group, todo = todo[:n], todo[n:]
        for table, rows, schema in group:
            append(spark, table, rows, schema)
        for plan in plans.values():
            batches += len(run_stream(s.stream, plan, on_batch=lambda r: print(r.line())).batches)
    assert batches >= 4
    for model in ("filtered", "attributed"):
        sink, quarantine = s.truth(model)
        assert_same(spark, s.stream_plans[model].sink.table, sink)
        assert_same(spark, s.stream_plans[model].quarantine, quarantine, drop=("origin",))


@pytest.mark.parametrize("point", ["sink", "state"])
def test_a_crash_inside_a_micro_batch_is_replayed_exactly_once(spark, setup, point):
    """A crash after the sink write (state not yet appended) or after the state append (Spark
    has not committed the batch): the restart replays batch 1, which must neither duplicate
    sink rows nor state rows (a later batch would then match old rows twice)."""
    s = setup
    imps, clicks = edge_cases()
    plan = s.stream_plans["attributed"]
    append(spark, f"{s.ods}.imps", imps[:7], IMP_SCHEMA)
    append(spark, f"{s.ods}.clicks", clicks[:3], CLICK_SCHEMA)
    assert [b.batch_id for b in run_stream(s.stream, plan).batches] == [0]
    append(spark, f"{s.ods}.imps", imps[7:], IMP_SCHEMA)
    append(spark, f"{s.ods}.clicks", clicks[3:], CLICK_SCHEMA)

    def crash(batch_id):
        raise RuntimeError(f"simulated crash after the {point} write of batch {batch_id}")

    with pytest.raises(SqlflowError, match="simulated crash"):
        run_stream(s.stream, plan, **{f"after_{point}": crash})
    replay = run_stream(s.stream, plan).batches
    assert [(b.batch_id, b.replayed) for b in replay] == [(1, True)]
    # batch 1 (few rows, the sink there) was appended from the driver; the replay found it
    assert delta_writers(spark, plan.sink.table)[-1] == "delta-rs"
    # a later batch joins against state written by the replayed batch; its late click goes
    # to the quarantine table batch 1 created, appended from the driver
    append(spark, f"{s.ods}.clicks", [click("lower", at(1, 10, 5)), click("dup", at(1, 15, 2)),
                                      click("late-later", at(1, 10, 6), at(1, 12, 0))], CLICK_SCHEMA)
    assert [b.batch_id for b in run_stream(s.stream, plan).batches] == [2]
    assert delta_writers(spark, plan.quarantine)[-1] == "delta-rs"
    sink, quarantine = s.truth("attributed")
    assert_same(spark, plan.sink.table, sink)
    assert_same(spark, plan.quarantine, quarantine, drop=("origin",))


def test_a_batch_of_many_rows_appends_few_output_rows_from_the_driver(spark, setup, monkeypatch):
    """A batch of more new rows than `LOCAL_ROWS` counts its output first: at most
    `LOCAL_ROWS` rows are appended from the driver (the sink created empty by Spark first when
    it is new), more are written by Spark; both from the one computation of the join, and the
    sink holds exactly the batch plan's rows. The first batch, each input's whole starting
    snapshot, reads it from the snapshot's own files (`own_files`)."""
    s = setup
    imps, clicks = edge_cases()
    plan = s.stream_plans["attributed"]
    append(spark, f"{s.ods}.imps", imps[:9], IMP_SCHEMA)
    append(spark, f"{s.ods}.clicks", clicks[:6], CLICK_SCHEMA)
    out = spark.table(s.truth("attributed")[0]).count()
    assert 0 < out < 15, "fewer output rows than new rows: the count decides"
    monkeypatch.setattr(microbatch, "LOCAL_ROWS", out)
    own = own_file_reads(monkeypatch)  # (batch, input) read from the input's own files
    assert [b.batch_id for b in run_stream(s.stream, plan).batches] == [0]
    assert sorted(own) == [(0, 0), (0, 1)], "the starting snapshots read from their own files"
    assert delta_writers(spark, plan.sink.table) == ["Apache-Spark", "delta-rs"]  # the create, the rows
    assert_same(spark, plan.sink.table, s.truth("attributed")[0])
    append(spark, f"{s.ods}.imps", imps[9:], IMP_SCHEMA)
    append(spark, f"{s.ods}.clicks", clicks[6:], CLICK_SCHEMA)
    monkeypatch.setattr(microbatch, "LOCAL_ROWS", 0)  # every output row is one too many
    assert [b.batch_id for b in run_stream(s.stream, plan).batches] == [1]
    assert delta_writers(spark, plan.sink.table)[-1] == "Apache-Spark"
    sink, quarantine = s.truth("attributed")
    assert spark.table(sink).count() > out, "batch 1 has output rows"
    assert_same(spark, plan.sink.table, sink)
    assert_same(spark, plan.quarantine, quarantine, drop=("origin",))


def test_a_new_query_asks_the_catalog_once_for_each_table_it_finds_at_its_start(spark, setup, monkeypatch):
    """A query's start locates its inputs and a new query's leftover state tables with one
    catalog statement per database (`deltalog.locate`): no existence check or `DESCRIBE` per
    input, none for state tables that are not there (nothing dropped); the commit log's folder
    is found once a process, and a sink the first batch creates is described once. Both
    queries' sinks hold the batch plan's rows."""
    s = setup
    plan = s.stream_plans["attributed"]
    imps, clicks = edge_cases()
    append(spark, f"{s.ods}.imps", imps, IMP_SCHEMA)
    append(spark, f"{s.ods}.clicks", clicks, CLICK_SCHEMA)
    asked: list[tuple[str, str]] = []  # (what, the statement or the table)
    sql, exists = type(spark).sql, type(spark.catalog).tableExists
    monkeypatch.setattr(type(spark), "sql", lambda self, q, *a, **k: asked.append(("sql", q)) or sql(self, q, *a, **k))
    monkeypatch.setattr(type(spark.catalog), "tableExists",
                        lambda self, t, *a, **k: asked.append(("exists", t)) or exists(self, t, *a, **k))

    def about(name: str) -> list[str]:  # the look-ups of `name` (statements naming it, checks)
        named = re.compile(rf"(?<![\w.]){re.escape(name.replace('`', '').lower())}(?!\w)")
        return [q.split()[0] if what == "sql" else "exists" for what, q in asked
                if named.search(q.replace("`", "").lower()) and not q.lstrip().upper().startswith(("SELECT", "INSERT"))]

    from sqlflow.runtime.incremental import padding
    progress = padding.progress_table(plan.sink.table, plan.model)
    for query in ("first", "new"):
        if query == "new":  # a leftover state table of the model's earlier query: dropped
            spark.sql(f"CREATE TABLE {progress} (x INT) USING delta "
                      f"TBLPROPERTIES ('sqlflow.model' = '{plan.model}', 'sqlflow.role' = 'state')")
        asked.clear()
        assert run_stream(s.stream, plan).batches, query
        assert_same(spark, plan.sink.table, s.truth("attributed")[0])
        for relation in (f"{s.ods}.imps", f"{s.ods}.clicks"):
            assert about(relation) == [], (query, relation, asked)
        dropped = [q for what, q in asked if what == "sql" and q.upper().startswith("DROP")]
        assert len(dropped) == about(progress).count("DROP") == (query == "new"), (query, dropped)
        assert not spark.catalog.tableExists(progress), query
        assert about(plan.sink.table).count("DESCRIBE") == 1, (query, asked)  # after its create
        if query == "new":  # (the first may be this process's first look-up of the log)
            assert about(COMMIT_LOG) == [], asked
        # a new query: the sink, quarantine and checkpoint of the first are gone
        for table in (plan.sink.table, plan.quarantine):
            spark.sql(f"DROP TABLE IF EXISTS {table}")
        shutil.rmtree(checkpoint_dir(s.stream.project_dir, plan))


@pytest.mark.parametrize("observed", [True, False], ids=["observed", "not-observed"])
def test_a_first_batch_of_many_rows_counts_its_stats_in_the_join_job(spark, setup, monkeypatch, observed):
    """A first batch of more new rows than `LOCAL_ROWS` (no older rows yet) counts its stats
    in the job that runs its join (`watched`): no stats job before it, the quarantine written
    once the join ran. Where the observed rows are not the rows the inputs' logs give (here:
    nothing observed) it counts them with a job. Either way the sink, the quarantine and the
    batch's counts are the batch plan's, row for row."""
    s = setup
    imps, clicks = edge_cases()
    plan = s.stream_plans["attributed"]
    append(spark, f"{s.ods}.imps", imps, IMP_SCHEMA)
    append(spark, f"{s.ods}.clicks", clicks, CLICK_SCHEMA)
    sink, quarantine = s.truth("attributed")
    assert spark.table(quarantine).count() > 0, "the rows hold quarantined ones"
    monkeypatch.setattr(microbatch, "LOCAL_ROWS", 2)
    jobs = []  # the batches a stats job counted
    counted = microbatch.MicroBatch._stats
    monkeypatch.setattr(microbatch.MicroBatch, "_stats", lambda mb, sides: jobs.append(1) or counted(mb, sides))
    if not observed:
        monkeypatch.setattr(watched.Watch, "found", lambda w: None)
    held = []  # what each input's held run reads in later batches: its plan
    seed = microbatch.MicroBatch._seed
    monkeypatch.setattr(microbatch.MicroBatch, "_seed", lambda mb, batch_id, k, b, clean: held.append(
        clean._jdf.queryExecution().analyzed().toString()) or seed(mb, batch_id, k, b, clean))
    batches = run_stream(s.stream, plan).batches
    assert [b.batch_id for b in batches] == [0]
    assert jobs == ([] if observed else [1])
    assert len(held) == 2 and not [p for p in held if "CollectMetrics" in p], "held without the observation"
    assert batches[0].quarantined == spark.table(quarantine).count()
    assert dict(batches[0].rows_in) == {f"{s.ods}.clicks": len(clicks), f"{s.ods}.imps": len(imps)}
    assert_same(spark, plan.sink.table, sink)
    assert_same(spark, plan.quarantine, quarantine, drop=("origin",))


def test_a_checkpoint_from_before_the_journal_replays_its_last_batch_by_delta_txn(spark, setup, monkeypatch):
    """A checkpoint without a journal (sqlflow before `runtime.once`: every append decided by
    Delta's txn) crashed after the sink write of batch 1. The restart decides batch 1 by Delta's
    txn, so nothing is written twice, and journals the batches after it."""
    s = setup
    imps, clicks = edge_cases()
    plan = s.stream_plans["attributed"]
    checkpoint = s.stream.project_dir / ".sqlflow" / "checkpoints" / "attributed"

    def crash(batch_id):
        raise RuntimeError(f"simulated crash after the sink write of batch {batch_id}")

    with monkeypatch.context() as before_the_journal:
        before_the_journal.setattr(once.Journal, "open", staticmethod(lambda checkpoint, next_batch: None))
        append(spark, f"{s.ods}.imps", imps[:7], IMP_SCHEMA)
        append(spark, f"{s.ods}.clicks", clicks[:3], CLICK_SCHEMA)
        assert [b.batch_id for b in run_stream(s.stream, plan).batches] == [0]
        append(spark, f"{s.ods}.imps", imps[7:], IMP_SCHEMA)
        append(spark, f"{s.ods}.clicks", clicks[3:], CLICK_SCHEMA)
        with pytest.raises(SqlflowError, match="simulated crash"):
            run_stream(s.stream, plan, after_sink=crash)
    assert not (checkpoint / once.FOLDER).exists()

    replay = run_stream(s.stream, plan).batches
    assert [(b.batch_id, b.replayed) for b in replay] == [(1, True)]
    assert delta_writers(spark, plan.sink.table)[-1] == "Apache-Spark"  # Delta's txn: Spark wrote it
    assert once.Journal.open(checkpoint, 99).start == 2  # batches 0 and 1 stay Delta's
    append(spark, f"{s.ods}.clicks", [click("lower", at(1, 10, 5)), click("dup", at(1, 15, 2))], CLICK_SCHEMA)
    assert [b.batch_id for b in run_stream(s.stream, plan).batches] == [2]
    sink, quarantine = s.truth("attributed")
    assert_same(spark, plan.sink.table, sink)
    assert_same(spark, plan.quarantine, quarantine, drop=("origin",))
    query = json.loads((checkpoint / "metadata").read_text().splitlines()[0])["id"]
    logged = (spark.table(COMMIT_LOG).where(F.col("run_id") == f"attributed@{query}")
              .groupBy("batch_id", "partition", "kind").count().collect())
    assert sorted({r["batch_id"] for r in logged}) == [0, 1, 2]
    assert [tuple(r) for r in logged if r["count"] != 1] == []


def test_cli_runs_a_bounded_stream_and_prints_each_micro_batch(spark, setup):
    from click.testing import CliRunner

    from sqlflow.cli.main import main

    imps, _ = edge_cases()
    append(spark, f"{setup.ods}.imps", imps, IMP_SCHEMA)
    args = ["--project-dir", str(setup.stream.project_dir), "run", "--mode", "stream", "--select", "filtered"]
    res = CliRunner().invoke(main, args + ["--trigger", "available-now"])
    assert res.exit_code == 0, res.output
    assert "filtered batch 0: in" in res.output and "+13; out 9; quarantined 3" in res.output
    assert "Stream run" in res.output
    again = CliRunner().invoke(main, args + ["--trigger", "available-now"])  # nothing new: no batch
    assert again.exit_code == 0 and "filtered batch" not in again.output
    assert spark.table(setup.stream_plans["filtered"].sink.table).count() == 9
    plan = setup.stream_plans["filtered"]
    sink_rows = Counter(map(tuple, spark.table(plan.sink.table).collect()))
    shutil.rmtree(setup.stream.project_dir / setup.stream_plans["filtered"].sink.checkpoint)
    lost = CliRunner().invoke(main, args + ["--trigger", "available-now"])
    assert lost.exit_code == 1 and "already has rows but its checkpoint" in lost.output
    assert "--select filtered --full-refresh" in lost.output  # the fix, as a command to run
    assert "Stream run" not in lost.output  # no empty summary above the error
    rebuilt = CliRunner().invoke(main, args + ["--trigger", "available-now", "--full-refresh"])
    assert rebuilt.exit_code == 0, rebuilt.output
    assert f"filtered: full refresh, removed table {plan.sink.table}, table {plan.quarantine}" \
        in rebuilt.output and "filtered batch 0: in" in rebuilt.output
    # the dropped table's commit-log rows no longer count (a `refresh` row): fresh commit state
    refreshed = spark.table(COMMIT_LOG).where((F.col("table") == plan.sink.table.lower())
                                              & (F.col("kind") == "refresh")).count()
    assert refreshed == 1
    # rebuilt from a new query over every input row: each row once, not once per query
    assert (spark.table(plan.sink.table).count(), spark.table(plan.quarantine).count()) == (9, 3)
    assert Counter(map(tuple, spark.table(plan.sink.table).collect())) == sink_rows
    # the input created again (as a --full-refresh of its own model does): Delta refuses the
    # checkpoint, and the message names the fix instead of "run again"
    spark.sql(f"DROP TABLE {setup.ods}.imps")
    append(spark, f"{setup.ods}.imps", imps, IMP_SCHEMA)
    stale = CliRunner().invoke(main, args + ["--trigger", "available-now"])
    assert stale.exit_code == 1 and "an input table was dropped and created again" in stale.output
    assert "--select filtered --full-refresh" in stale.output and "run again" not in stale.output
    again = CliRunner().invoke(main, args + ["--trigger", "available-now", "--full-refresh"])
    assert again.exit_code == 0, again.output
    assert Counter(map(tuple, spark.table(plan.sink.table).collect())) == sink_rows


def test_an_interval_trigger_keeps_running_and_picks_up_new_commits(spark, setup):
    from sqlflow.runtime.dispatch import start_stream as start

    imps, clicks = edge_cases()
    plan = setup.stream_plans["attributed"]
    query, fn = start(setup.stream, plan, trigger="1 second")
    try:
        append(spark, f"{setup.ods}.imps", imps, IMP_SCHEMA)
        query.processAllAvailable()
        append(spark, f"{setup.ods}.clicks", clicks, CLICK_SCHEMA)
        query.processAllAvailable()
        assert query.isActive
    finally:
        query.stop()
    assert fn.error is None and len(fn.reports) >= 2
    sink, quarantine = setup.truth("attributed")
    assert_same(spark, plan.sink.table, sink)
    assert_same(spark, plan.quarantine, quarantine, drop=("origin",))


@pytest.mark.parametrize("named", [True, False], ids=["files named by the log", "state table"])
def test_older_rows_come_from_the_inputs_and_only_a_split_commit_is_copied(spark, setup, monkeypatch, named):
    """Older rows are read from the input tables at the version a batch starts on; a batch
    that ends inside a commit (more files than `maxFilesPerTrigger`) begins a run whose rows the
    batch after it reads as that version plus the run's copies: the input's own data files,
    named by its log in the order the source handed them (`source_files`), or, when the log
    cannot name them, copies in the state table. Whole-commit batches copy nothing; every way
    gives the batch plan's output."""
    from sqlflow.runtime import offsets
    from sqlflow.runtime.incremental import input_logs, older, state

    if not named:
        monkeypatch.setattr(input_logs.InputLogs, "run_files", lambda *a, **k: None)
    s = setup
    plan = s.stream_plans["attributed"]
    k = [b.relation for b in plan.sources if b.read == "stream"].index(f"{s.ods}.imps")
    copies = state.state_table(plan.sink.table, plan.model, f"{s.ods}.imps")
    imps, clicks = edge_cases()
    append(spark, f"{s.ods}.imps", imps, IMP_SCHEMA)
    append(spark, f"{s.ods}.clicks", clicks, CLICK_SCHEMA)
    assert [b.batch_id for b in run_stream(s.stream, plan).batches] == [0]
    assert not spark.catalog.tableExists(copies)
    # one commit of 3 files per input, read 2 files per micro-batch: batch 1 ends inside both
    # commits; batch 2's clicks match batch 1's impressions (and the other way round), which
    # only the run's copies hold
    def three_files(table, rows, schema):
        spark.createDataFrame(rows, schema).repartition(3).write.format("delta") \
            .mode("append").saveAsTable(table)
    three_files(f"{s.ods}.imps", [imp(f"s{j}", 1, at(1, 9, 3 * j)) for j in range(12)], IMP_SCHEMA)
    three_files(f"{s.ods}.clicks", [click(f"s{j}", at(1, 9, 3 * j + 2)) for j in range(12)], CLICK_SCHEMA)
    split = replace(plan, sources=tuple(replace(b, max_files_per_trigger=2) for b in plan.sources))
    checkpoint = s.stream.project_dir / plan.sink.checkpoint
    assert [b.batch_id for b in run_stream(s.stream, split).batches] == [1, 2]
    assert offsets.end_of(checkpoint, 1, k) is None and offsets.end_of(checkpoint, 2, k) is not None
    ledger = older.Ledger(checkpoint, [f"{s.ods}.clicks", f"{s.ods}.imps"], copy_all=False)
    assert ledger.before(2)[f"{s.ods}.imps"].files is named  # the run batch 1 began, as recorded
    if named:
        assert not spark.catalog.tableExists(copies)
    else:
        copied = {r[0] for r in spark.table(copies).select(state.BATCH_COLUMN).distinct().collect()}
        assert copied == {1}
        # created by Spark, the copy of a few rows appended from the driver (`local_append`)
        assert delta_writers(spark, copies) == ["Apache-Spark", "delta-rs"]
    # a later whole commit reads the table again, copies nothing
    append(spark, f"{s.ods}.clicks", [click("s3", at(1, 9, 20)), click("lower", at(1, 10, 5))],
           CLICK_SCHEMA)
    assert [b.batch_id for b in run_stream(s.stream, split).batches] == [3]
    assert spark.catalog.tableExists(copies) is not named
    if not named:
        assert {r[0] for r in spark.table(copies).select(state.BATCH_COLUMN).distinct().collect()} == {1}
    sink, quarantine = s.truth("attributed")
    assert_same(spark, plan.sink.table, sink)
    assert_same(spark, plan.quarantine, quarantine, drop=("origin",))


def edge_cases_in_batch_0(spark, s):
    """The edge cases, one commit per input, read by the `attributed` stream's batch 0; its plan."""
    plan = s.stream_plans["attributed"]
    imps, clicks = edge_cases()
    append(spark, f"{s.ods}.imps", imps, IMP_SCHEMA)
    append(spark, f"{s.ods}.clicks", clicks, CLICK_SCHEMA)
    assert [b.batch_id for b in run_stream(s.stream, plan).batches] == [0]
    return plan


@pytest.mark.parametrize("named", [True, False], ids=["files named by the log", "state table"])
def test_copies_are_read_from_memory_in_the_query_that_made_them_and_from_the_table_after_a_restart(
        spark, setup, monkeypatch, named):
    """One commit of 3 files per input read a file per micro-batch: batches 1 and 2 end inside
    it, each batch after reads the run's rows before it. In the query that handled them it reads
    them from memory (`runtime.incremental.copies`: nothing is read); a query started again after
    a crash in batch 2 holds nothing of batch 1's rows, so it reads them: the input's own files
    the log names (`older.files_at`), or the state table's copies where the log cannot name
    them. Every way gives the batch plan's rows."""
    from sqlflow.runtime.incremental import input_logs, older, state

    if not named:
        monkeypatch.setattr(input_logs.InputLogs, "run_files", lambda *a, **k: None)
    s = setup
    plan = edge_cases_in_batch_0(spark, s)
    for table, rows, schema in ((f"{s.ods}.imps", [imp(f"s{j}", 1, at(1, 9, 3 * j)) for j in range(12)], IMP_SCHEMA),
                                (f"{s.ods}.clicks", [click(f"s{j}", at(1, 9, 3 * j + 2)) for j in range(12)],
                                 CLICK_SCHEMA)):
        spark.createDataFrame(rows, schema).repartition(3).write.format("delta").mode("append").saveAsTable(table)
    split = replace(plan, sources=tuple(replace(b, max_files_per_trigger=1) for b in plan.sources))
    reads, from_state, from_files = [], state.older, older.files_at

    def counted(spark_, table, schema, batch_id, keep, after=-1, exists=None):
        reads.append(("state", batch_id))
        return from_state(spark_, table, schema, batch_id, keep, after=after, exists=exists)

    def files(spark_, relation, version, names, schema, partitions=None):
        reads.append(("files", len(names)))
        return from_files(spark_, relation, version, names, schema, partitions=partitions)

    monkeypatch.setattr(state, "older", counted)
    monkeypatch.setattr(older, "files_at", files)

    def crash(batch_id):
        if batch_id == 2:
            raise RuntimeError("simulated crash after the sink write of batch 2")

    with pytest.raises(SqlflowError, match="simulated crash"):
        run_stream(s.stream, split, after_sink=crash)
    assert reads == []  # batch 2 read batch 1's rows from memory
    assert [(b.batch_id, b.replayed) for b in run_stream(s.stream, split).batches] == [(2, True), (3, False)]
    if named:  # batch 1's file, then batches 1 and 2's, per input
        assert sorted(reads) == [("files", 1), ("files", 1), ("files", 2), ("files", 2)]
    else:  # batch 1's copy: in the table only
        assert {kind for kind, _ in reads} == {"state"} and {b for _, b in reads} == {2, 3}
    sink, quarantine = s.truth("attributed")
    assert_same(spark, plan.sink.table, sink)
    assert_same(spark, plan.quarantine, quarantine, drop=("origin",))


def test_a_batch_skips_the_held_copies_its_rows_cannot_match_and_reads_those_they_can(spark, setup, monkeypatch):
    """One commit of 3 files per input, a file per micro-batch: rows at 9:00, at 21:00, and
    at 9:15-9:30 with a click of an impression at 9:00. Whatever order the source hands the
    files in, a batch twelve hours from an earlier one leaves that batch's copies out of its
    union (`held.disjoint`), and the 9:15 click finds its 9:00 impression in whichever batch
    brings the later of the two. The batch plan's rows."""
    from sqlflow.runtime.incremental import held

    s = setup
    plan = edge_cases_in_batch_0(spark, s)
    files = {  # file -> (impressions, clicks): hours 9, 21 and 9 again
        0: ([imp(f"s{j}", 1, at(1, 9, j)) for j in range(4)], [click(f"s{j}", at(1, 9, 5 + j)) for j in range(4)]),
        1: ([imp(f"t{j}", 1, at(1, 21, j)) for j in range(4)], [click(f"t{j}", at(1, 21, 5 + j)) for j in range(4)]),
        2: ([imp(f"u{j}", 1, at(1, 9, 20 + j)) for j in range(4)],
            [click(f"u{j}", at(1, 9, 25 + j)) for j in range(4)] + [click("s0", at(1, 9, 15))]),
    }
    for side, table, schema in ((0, f"{s.ods}.imps", IMP_SCHEMA), (1, f"{s.ods}.clicks", CLICK_SCHEMA)):
        # three slices in order (4, 4 and 4 or 5 rows): a file each
        append(spark, table, [r for pair in files.values() for r in pair[side]], schema, files=3)
    split = replace(plan, sources=tuple(replace(b, max_files_per_trigger=1) for b in plan.sources))
    skipped, disjoint = [], held.disjoint

    def spied(extent, keep):
        out = disjoint(extent, keep)
        if out:
            skipped.append(extent)
        return out

    monkeypatch.setattr(held, "disjoint", spied)
    assert [b.batch_id for b in run_stream(s.stream, split).batches] == [1, 2, 3]
    assert skipped and all(high - low < 3_600_000_000 for e in skipped for low, high in e.values())
    sink, quarantine = s.truth("attributed")
    assert_same(spark, plan.sink.table, sink)
    assert_same(spark, plan.quarantine, quarantine, drop=("origin",))
    assert spark.table(plan.sink.table).where("req_id = 's0'").count() == 2  # its 9:05 and 9:15 clicks


@pytest.mark.parametrize("deleted", [False, True], ids=["appends only", "a delete"])
def test_a_new_query_reads_an_append_only_input_from_its_first_commit(spark, setup, deleted):
    """A new query reads an input whose every commit only added files from its first commit
    (`startingVersion` 0: the Delta source's offsets are commits, not positions in a starting
    snapshot), and an input with a delete from its latest snapshot; split over micro-batches
    either way, both give the batch plan's rows."""
    from sqlflow.runtime import offsets

    s = setup
    plan = s.stream_plans["attributed"]
    imps, clicks = edge_cases()
    for part in (0, 1, 2):  # three commits per input, read two files per micro-batch
        append(spark, f"{s.ods}.imps", imps[part::3], IMP_SCHEMA)
        append(spark, f"{s.ods}.clicks", clicks[part::3], CLICK_SCHEMA)
    if deleted:
        spark.sql(f"DELETE FROM {s.ods}.clicks WHERE req_id = 'lower'")
    split = replace(plan, sources=tuple(replace(b, max_files_per_trigger=2) for b in plan.sources))
    batches = run_stream(s.stream, split).batches
    assert len(batches) >= 2
    checkpoint = s.stream.project_dir / plan.sink.checkpoint
    k = [b.relation for b in plan.sources if b.read == "stream"].index(f"{s.ods}.clicks")
    first = offsets.read(checkpoint, 0)
    assert first[1 - k] is not None and not first[1 - k].starting  # imps: appends only
    assert first[k] is not None and first[k].starting is deleted
    sink, quarantine = s.truth("attributed")
    assert_same(spark, plan.sink.table, sink)
    assert_same(spark, plan.quarantine, quarantine, drop=("origin",))


def test_a_running_query_reads_each_input_table_once_and_holds_the_rows_after(spark, setup, monkeypatch):
    """Micro-batches of one query that start and end on whole versions read each input table
    as of a version once; the later ones read the held run (that table plus each batch's new
    rows, `runtime.incremental.held`) instead of a new Delta snapshot, and the sink still holds
    exactly the batch plan's rows; the write leaves the session's runtime-filter setting as
    it was."""
    from sqlflow.runtime.delta import no_runtime_filter as nrf
    from sqlflow.runtime.incremental import older

    s = setup
    plan = s.one_file_per_batch("attributed")
    _three_parts_after_a_first_batch(spark, s, plan)
    reads, table_at = [], older.table_at

    def counted(spark_, relation, version, schema):
        reads.append((relation, version))
        return table_at(spark_, relation, version, schema)

    monkeypatch.setattr(older, "table_at", counted)
    before = spark.conf.get(nrf.BLOOM_FILTER, None)
    assert [b.batch_id for b in run_stream(s.stream, plan).batches] == [1, 2]
    assert spark.conf.get(nrf.BLOOM_FILTER, None) == before
    # per input: the older rows of batch 1 (a new query reads the table); batch 2 reads the
    # held run (before it: a new snapshot)
    assert Counter(r for r, _ in reads) == {f"{s.ods}.imps": 1, f"{s.ods}.clicks": 1}, reads
    sink, quarantine = s.truth("attributed")
    assert_same(spark, plan.sink.table, sink)
    assert_same(spark, plan.quarantine, quarantine, drop=("origin",))


def test_a_new_query_holds_its_first_batch_as_the_table_the_next_batch_reads(spark, setup, monkeypatch):
    """A query's first micro-batch reads each input's starting snapshot whole as its new rows
    (from the snapshot's own files); the next batch's older rows are that same table: it reads
    them through the first batch's frame (`MicroBatch._seed`), so no input is read again as
    of a version (before: once more, the held run's start, a new Delta snapshot), and the sink
    holds exactly the batch plan's rows."""
    from sqlflow.runtime.dispatch import start_stream as start
    from sqlflow.runtime.incremental import older

    s = setup
    plan = s.stream_plans["attributed"]
    imps, clicks = edge_cases()
    reads, table_at = [], older.table_at

    def counted(spark_, relation, version, schema):
        reads.append((relation, version))
        return table_at(spark_, relation, version, schema)

    monkeypatch.setattr(older, "table_at", counted)
    own = own_file_reads(monkeypatch)  # (batch, input) read from the input's own files
    append(spark, f"{s.ods}.imps", imps[0::3], IMP_SCHEMA)
    append(spark, f"{s.ods}.clicks", clicks[0::3], CLICK_SCHEMA)
    query, fn = start(s.stream, plan, trigger="1 second")
    try:
        query.processAllAvailable()
        for p in (1, 2):
            append(spark, f"{s.ods}.imps", imps[p::3], IMP_SCHEMA)
            append(spark, f"{s.ods}.clicks", clicks[p::3], CLICK_SCHEMA)
            query.processAllAvailable()
    finally:
        query.stop()
    assert fn.error is None
    assert [b.batch_id for b in fn.reports if b.kind == "batch"][:1] == [0]
    assert len([b for b in fn.reports if b.kind == "batch"]) >= 3  # a batch per part at least
    # the first batch read each input's starting snapshot once, from its own files; nothing
    # read any input as of a version after it
    assert reads == [] and own.count((0, 0)) == own.count((0, 1)) == 1, (reads, own)
    sink, quarantine = s.truth("attributed")
    assert_same(spark, plan.sink.table, sink)
    assert_same(spark, plan.quarantine, quarantine, drop=("origin",))


def test_held_rows_stay_cached_after_their_micro_batch_drops_its_views(spark, setup, monkeypatch):
    """A micro-batch binds its new rows to the plan's views and drops the views at its end;
    Spark's `dropTempView` uncaches a cached plan equal to the view's. The rows a held run
    keeps for the next micro-batch (`held.compact`) are still cached when that batch has
    read them (`runtime.incremental.views`), and the sink holds the batch plan's rows."""
    from sqlflow.runtime.incremental import held

    s = setup
    held_in_spark(monkeypatch)
    plan = s.one_file_per_batch("attributed")
    _three_parts_after_a_first_batch(spark, s, plan)
    compact, made = held.compact, []

    def recorded(clean):
        frame = compact(clean)
        made.append(frame)
        return frame

    monkeypatch.setattr(held, "compact", recorded)
    seen = []

    def check(batch_id):  # after the sink write: this batch's join has read the held rows
        seen.append((batch_id, [f.storageLevel.useMemory or f.storageLevel.useDisk for f in made]))

    assert [b.batch_id for b in run_stream(s.stream, plan, after_sink=check).batches] == [1, 2]
    assert [b for b, _ in seen] == [1, 2]
    assert seen[1][1] and all(seen[1][1]), seen  # batch 1's held rows, read by batch 2: cached
    sink, quarantine = s.truth("attributed")
    assert_same(spark, plan.sink.table, sink)
    assert_same(spark, plan.quarantine, quarantine, drop=("origin",))


def test_merged_held_batches_are_filled_by_the_next_batch_then_let_go(spark, setup, monkeypatch):
    """Every `MAX_BATCHES` held pieces of a tier are merged into one partition of the tier above
    that the next micro-batch's join fills (`held._merge`): the merged pieces' caches stay until
    that batch has read them, and are let go after it; merges of merges (tier 2 at batch 5)
    keep every row, and the sink holds exactly the batch plan's rows. A pruned input's run goes
    on past `MAX_ROWS` (`extend(bounded=True)`): each input's run starts once."""
    from sqlflow.runtime.incremental import held

    monkeypatch.setattr(held, "MAX_BATCHES", 2)  # tier 1 at batches 3, 5; tier 2 at batch 5
    # the interval join prunes both inputs (`evict` bounds their runs): never dropped for size
    monkeypatch.setattr(held, "MAX_ROWS", 1)
    held_in_spark(monkeypatch)
    s = setup
    plan = s.one_file_per_batch("attributed")
    _three_parts_after_a_first_batch(spark, s, plan, parts=7)
    merge, merges = held._merge, []  # (batch id of the merge, tier, the merged pieces' caches)
    plans, filled = [], {}  # each merged piece's plan; whether its blocks were filled, by merge

    def recorded(run, tier):
        frames = [p.kept for p in run.pieces if p.tier == tier]  # the pieces it merges
        merge(run, tier)
        merges.append((run.batch + 1, tier, frames))
        merged = next(p.kept for p in run.pieces if p.tier == tier + 1)
        plans.append(merged._jdf.queryExecution().logical().nodeName())  # cut from its batches
        filled[id(frames[0])] = merged._jdf.queryExecution().logical().rdd().isCheckpointed

    monkeypatch.setattr(held, "_merge", recorded)
    start, starts = held.Held.start, []
    monkeypatch.setattr(held.Held, "start",
                        lambda h, relation, *a, **kw: starts.append(relation) or start(h, relation, *a, **kw))
    seen = []

    def check(batch_id):  # after this batch's sink write, before it holds its own rows
        for made, _, frames in (m for m in merges if m[1] == 0):  # the batches' caches
            cached = [f.storageLevel.useMemory or f.storageLevel.useDisk for f in frames]
            seen.append((batch_id, made, all(cached), any(cached)))
            # a batch after the merge has read the merged piece: its local checkpoint is filled
            # (before its batches' caches go), not recomputed from them later
            assert batch_id <= made or filled[id(frames[0])](), (batch_id, made)

    assert [b.batch_id for b in run_stream(s.stream, plan, after_sink=check).batches] == [1, 2, 3, 4, 5, 6]
    assert {(m, t) for m, t, _ in merges} == {(3, 0), (5, 0), (5, 1)}  # each input: tiers 0->1, 1->2
    assert {made for _, made, _, _ in seen} == {3, 5}
    assert set(plans) == {"LogicalRDD"}  # local checkpoints: no plan or lineage of their batches
    assert sorted(starts) == sorted(b.relation for b in plan.sources if b.old_view)  # once each, batch 1
    for batch_id, made, every, some in seen:
        if made == batch_id - 1:  # merged by the batch before: read now, still cached
            assert every, seen
        else:  # merged two batches ago or more: let go once read
            assert not some, seen
    sink, quarantine = s.truth("attributed")
    assert_same(spark, plan.sink.table, sink)
    assert_same(spark, plan.quarantine, quarantine, drop=("origin",))


def _three_parts_after_a_first_batch(spark, s, plan, parts=3):
    """The edge cases in `parts` parts, one commit per input each (one micro-batch each of a
    `one_file_per_batch` plan), each part's clicks matching the part before; the first part
    streamed (batch 0), the others appended for the test's own run."""
    imps, clicks = edge_cases()
    for p in range(parts):
        append(spark, f"{s.ods}.imps", imps[p::parts] + [imp(f"h{p}", 1, at(1, 9, 10 * p))], IMP_SCHEMA)
        append(spark, f"{s.ods}.clicks", clicks[p::parts] + [click(f"h{q}", at(1, 9, 10 * q + 5))
                                                             for q in range(p)], CLICK_SCHEMA)
        if p == 0:
            assert [b.batch_id for b in run_stream(s.stream, plan).batches] == [0]
