"""The demo project through a real Spark Connect server (the `connect` target), started once
per session from pyspark's own jars with Delta's extension and catalog (tests/spark_servers.py).

Batch: the server gets the `local` reference run's sources and commit log (copies of its
Delta folders, registered as tables: `sqlflow demo generate` cannot run over Connect, see
below), `sqlflow --target connect run --mode batch` builds the staging and `dwd` models on the
server, and every model and quarantine table equals the reference's, row for row. Stream:
`run --mode stream --trigger available-now --full-refresh` of the same models rebuilds them
from new queries whose micro-batches the server's Python worker runs
(`runtime/incremental/remote.py`; `dwd_ad_clicks_attributed` on the `stateful` strategy), and
every table equals the reference's again (stream/batch equivalence, over Connect); so does the
routed group's stream run (`routing.RemoteRouteBatch`), its `_SUCCESS` markers created by the
server. A Kafka source's archive query (`archive.Append`, pickled to the worker) archives over
Connect what it archives locally.

The stream service (an interval trigger) runs over Connect, supervised from this process
through the queries' handles: rows appended to a source while it runs reach the sink, SIGTERM
stops it, and the table equals the reference's. An idle input's `idle_timeout` pads while it
runs (an `incremental` outer join, its query stopped around the step), equal to the batch plan. What cannot run over Connect with
pyspark 4.2 is refused before any work, with the reason and the alternative (docs/deploy.md,
"Spark Connect"): here the demo generator.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest
import yaml
from pyspark.sql import functions as F

from cluster.demo_runs import DEMO, SQLFLOW, assert_same_tables, copy_project, sqlflow

pytestmark = pytest.mark.spark
# the demo's routed group, its targets and its quarantine table (a test of their own)
GROUP = "user_events_by_department"
ROUTED = ("ue_ad", "ue_game", "ue_live", "ue_main", "ue_manga", "ue_music", f"{GROUP}__quarantine")

STATEFUL_MODEL = "dwd_ad_clicks_attributed"

REGISTER = r"""
import sys
from pyspark.sql import SparkSession

spark = SparkSession.builder.remote(sys.argv[1]).getOrCreate()
for spec in sys.argv[2:]:
    name, path = spec.split("=", 1)
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {name.split('.')[0]}")
    spark.sql(f"CREATE TABLE {name} USING DELTA LOCATION '{path}'")
spark.stop()
"""


@pytest.fixture(scope="module")
def connect_project(tmp_path_factory, connect_server):
    """The demo project, `dwd_ad_clicks_attributed` on the `stateful` stream strategy (its
    batch plan is the same), so a stream run covers both strategies."""
    project = copy_project(tmp_path_factory.mktemp("connect_run") / "project")
    config = yaml.safe_load((project / "dbt_project.yml").read_text())
    config["models"]["sqlflow_demo"]["dwd"][STATEFUL_MODEL] = {"+stream_strategy": "stateful"}
    (project / "dbt_project.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    env = {**os.environ, "SQLFLOW_SPARK_REMOTE": connect_server.url}
    return project, env


@pytest.fixture(scope="module")
def connect_sources(local_run, connect_server):
    """The reference's sources and commit log (which says which dimension days are ready),
    copied and registered as tables on the Connect server."""
    warehouse = local_run / ".sqlflow" / "warehouse"
    specs = []
    for db, names in (("ods", ("ods_ad_impressions", "ods_ad_clicks", "ods_user_events")),
                      ("dim", ("dim_user", "dim_ad")), ("sqlflow", ("commit_log",))):
        for name in names:
            copy = connect_server.state / "inputs" / db / name
            shutil.copytree(warehouse / f"{db}.db" / name, copy)
            specs.append(f"{db}.{name}={copy}")
    done = subprocess.run([sys.executable, "-c", REGISTER, connect_server.url, *specs],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


def test_connect_batch_equals_local(spark, local_run, connect_server, connect_sources, connect_project):
    """The staging and `dwd` models. (Every partition check and escaping expression is flat:
    nested ~50 deep, the client could not encode it, see
    tests/runtime/test_connect_expression_depth.py.)"""
    project, env = connect_project
    out = sqlflow(project, env, "--target", "connect", "run", "--mode", "batch",
                  "--select", "path:models/staging", "--select", "path:models/dwd", timeout=1200)
    assert "dwd_user_events_enriched" in out, out[-2000:]
    assert_same_tables(spark, connect_server.state / "warehouse", local_run, databases=("dw",),
                       skip=ROUTED)


def test_connect_stream_equals_local(spark, local_run, connect_server, connect_sources, connect_project):
    """Every model as an `available-now` query over Connect (after the batch test:
    --full-refresh drops its tables), equal to the local backfill: both interval joins (the
    left join's end-of-input flush runs in this process; the inner join on the `stateful`
    strategy, its flush a second query), the dimension join, and the routed group (six
    targets, its UDF, `_SUCCESS` markers on: the default), whose micro-batches the server's
    Python worker runs (`routing.RemoteRouteBatch`) after its parent `stg_user_events` was
    rebuilt by a query of its own. Every routed target has its `_SUCCESS` markers in the same
    partition directories as the reference's (created by the server, `copyFromLocalToFs`: the
    worker's for hours a batch closed, the client's for the end-of-input flush). One run for
    all: each `sqlflow` process over Connect starts the server's Python workers again."""
    project, env = connect_project
    out = sqlflow(project, env, "--target", "connect", "run", "--mode", "stream", "--trigger",
                  "available-now", "--full-refresh", "--select", "path:models/staging",
                  "--select", "path:models/dwd", "--select", "path:models/routed", timeout=1500)
    assert "dwd_ad_click_samples end-of-input flush" in out, out[-2000:]
    assert f"{STATEFUL_MODEL} batch 1" in out, out[-2000:]  # the stateful flush's no-data batch
    assert f"{GROUP} batch 0: in (not counted)" in out, out[-2000:]
    assert f"{GROUP} end of input" in out, out[-2000:]
    warehouse = connect_server.state / "warehouse"
    assert_same_tables(spark, warehouse, local_run, databases=("dw",))
    for target in ROUTED[:-1]:
        want = _markers(local_run / ".sqlflow" / "warehouse" / "dw.db" / target)
        assert want and _markers(warehouse / "dw.db" / target) == want, target


def _markers(table: Path) -> set[str]:
    """The partition directories of `table` that hold a `_SUCCESS` marker."""
    return {str(p.parent.relative_to(table)) for p in table.rglob("_SUCCESS")}


LIVE = "stg_ad_clicks"  # no idle padding: one staging model, the cheapest service


def _batches(log: Path) -> list[int]:
    """The batch ids the service printed for LIVE (read from the query's progress and the
    commit log over Connect)."""
    return [int(n) for n in re.findall(rf"^{LIVE} batch (\d+):", log.read_text(errors="replace"), re.M)]


def _wait(what, log: Path, service: subprocess.Popen, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and service.poll() is None and not what():
        time.sleep(0.5)
    assert what(), f"the service ended or stalled:\n{log.read_text()[-4000:]}"


def test_connect_stream_service_equals_local(spark, local_run, connect_server, connect_sources, tmp_path):
    """`--trigger "2 seconds"` over Connect (the stream service): the clicks source holds the
    reference's rows of the earlier half of ingest times when the service starts, the rest is
    appended while it runs and reaches the sink in a later micro-batch (reported from the
    query's progress and the commit log); SIGTERM exits 0, and the model and its quarantine
    table equal the reference's backfill, EXCEPT ALL both ways. Its own source schema and
    target schema on the server (`ods_live`, `dw_live`): the other tests' tables stay as
    they are."""
    project = copy_project(tmp_path / "project")
    sources = project / "models" / "sources.yml"
    sources.write_text(sources.read_text().replace("    schema: ods\n", "    schema: ods_live\n", 1))
    profiles = yaml.safe_load((project / "profiles" / "profiles.yml").read_text())
    profiles["sqlflow"]["outputs"]["connect"]["schema"] = "dw_live"
    (project / "profiles" / "profiles.yml").write_text(yaml.safe_dump(profiles, sort_keys=False))
    ref = local_run / ".sqlflow" / "warehouse"
    clicks = spark.read.format("delta").load(str(ref / "ods.db" / "ods_ad_clicks"))
    cut = clicks.agg(F.percentile_approx("ingest_ts", 0.5)).collect()[0][0]
    later = F.col("ingest_ts") > F.lit(cut)
    path = str(connect_server.state / "inputs" / "ods_live" / "ods_ad_clicks")
    clicks.where(~F.coalesce(later, F.lit(False))).write.format("delta").save(path)
    rest = clicks.where(later)
    assert rest.count() > 0
    done = subprocess.run([sys.executable, "-c", REGISTER, connect_server.url, f"ods_live.ods_ad_clicks={path}"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    env = {**os.environ, "SQLFLOW_SPARK_REMOTE": connect_server.url, "PYTHONUNBUFFERED": "1"}
    log = tmp_path / "service.log"
    with open(log, "w") as out:
        service = subprocess.Popen([*SQLFLOW, "--project-dir", str(project), "--target", "connect", "run",
                                    "--mode", "stream", "--trigger", "2 seconds", "--select", LIVE,
                                    "--stop-timeout", "60 seconds"],
                                   env=env, cwd=project, stdout=out, stderr=subprocess.STDOUT)
    try:
        # the first half is in (the server starts the query's Python worker first: minutes on a
        # loaded machine)
        _wait(lambda: _batches(log), log, service, seconds=400)
        before = max(_batches(log))
        rest.write.format("delta").mode("append").save(path)
        _wait(lambda: max(_batches(log)) > before, log, service, seconds=240)
        service.send_signal(signal.SIGTERM)
        assert service.wait(timeout=120) == 0, log.read_text()[-4000:]
    finally:
        if service.poll() is None:
            service.kill()
            service.wait()
    text = log.read_text(errors="replace")
    assert f"{LIVE}: running" in text and re.search(rf"{LIVE} +stream .* stopped ", text), text[-4000:]
    assert "failed" not in text, text[-4000:]
    got = connect_server.state / "warehouse" / "dw_live.db"
    for table in (LIVE, f"{LIVE}__quarantine"):
        want = spark.read.format("delta").load(str(ref / "dw.db" / table))
        if table == LIVE:
            assert want.count() > 0
        if not (got / table / "_delta_log").is_dir():  # created lazily: nothing quarantined
            assert want.drop("origin").count() == 0, table
            continue
        mine = spark.read.format("delta").load(str(got / table)).select(*want.columns)
        if "origin" in want.columns:  # where a quarantined row was read differs by mode
            want, mine = want.drop("origin"), mine.drop("origin")
        assert (want.exceptAll(mine).collect(), mine.exceptAll(want).collect()) == ([], []), table


IDLE_JOIN = """
SELECT i.req_id, i.imp_ts, c.click_ts, CASE WHEN c.req_id IS NULL THEN 0 ELSE 1 END AS label,
       to_date(i.imp_ts) AS dt
FROM {{ source('ods', 'imps') }} AS i
LEFT JOIN {{ source('ods', 'clicks') }} AS c
  ON i.req_id = c.req_id AND c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 20 MINUTES"""
IDLE_MODEL = "{{ config(materialized='streaming_table', partition_by=['dt'], " \
    "idle_timeout='3 seconds') }}" + IDLE_JOIN  # a left interval join, idle after 3 s
IDLE_PROFILES = """\
sqlflow:
  target: local
  outputs:
    local: {type: spark, method: session, host: NA, schema: dw_idle}
    connect:
      type: spark
      method: session
      host: NA
      schema: dw_idle
      server_side_parameters: {spark.remote: "{{ env_var('SQLFLOW_SPARK_REMOTE') }}"}
"""


def test_connect_service_pads_an_idle_input_equal_to_batch(spark, connect_server, tmp_path):
    """`idle_timeout` of an `incremental` left interval join under the stream service over
    Connect. The clicks bring rows in the first micro-batch only, then go idle: the service
    stops the query, pads from this process the impressions the impressions' own frontier
    closes (12:00 - 10 min of the clicks' lateness - 20 min of the bound: before 11:30), and
    starts it again from its checkpoint; an impression appended then reaches the restarted
    query, and a second step pads up to 12:10. The sink and its quarantine equal the batch
    plan's output (the local session's backfill of the same inputs), EXCEPT ALL both ways, up
    to the idle cutoff plus every matched row (the later impressions stay pending, as they
    would locally): a row written twice would be left over."""
    from helpers import ad_sources_yml, make_project
    from runtime.adkit import CLICK_SCHEMA, IMP_SCHEMA, at, click, imp
    from sqlflow.compiler import compile_project
    from sqlflow.engine.context import Context
    from sqlflow.runtime.batch import run_batch

    project = make_project(tmp_path / "project", models={"idle_samples.sql": IDLE_MODEL},
                           yml={"sources.yml": ad_sources_yml("ods_idle")}, profiles_yml=IDLE_PROFILES)
    inputs = connect_server.state / "inputs" / "ods_idle"
    imps = [imp("r1", 1, at(1, 10, 0)), imp("r2", 1, at(1, 10, 10)), imp("r3", 1, at(1, 10, 30)),
            imp("r4", 1, at(1, 11, 0)), imp("r5", 1, at(1, 11, 40)), imp("r6", 1, at(1, 12, 0)),
            imp("late", 1, at(1, 10, 0), at(1, 10, 20))]  # 20 min late: quarantined
    clicks = [click("r1", at(1, 10, 5)), click("r2", at(1, 10, 15))]
    for name, rows, schema in (("imps", imps, IMP_SCHEMA), ("clicks", clicks, CLICK_SCHEMA)):
        spark.createDataFrame(rows, schema).coalesce(1).write.format("delta").save(str(inputs / name))
    done = subprocess.run([sys.executable, "-c", REGISTER, connect_server.url,
                           *(f"ods_idle.{n}={inputs / n}" for n in ("imps", "clicks"))],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    env = {**os.environ, "SQLFLOW_SPARK_REMOTE": connect_server.url, "PYTHONUNBUFFERED": "1"}
    log = tmp_path / "service.log"
    steps = re.compile(r"^idle_samples idle timeout after batch (\d+): padded (\d+)", re.M)
    again = re.compile(r"^idle_samples: running again .*start: ([\d.]+)s\)", re.M)
    got = connect_server.state / "warehouse" / "dw_idle.db"
    with open(log, "w") as out:
        service = subprocess.Popen([*SQLFLOW, "--project-dir", str(project), "--target", "connect", "run",
                                    "--mode", "stream", "--trigger", "1 second", "--select", "idle_samples",
                                    "--stop-timeout", "60 seconds"],
                                   env=env, cwd=project, stdout=out, stderr=subprocess.STDOUT)
    try:
        text = lambda: log.read_text(errors="replace")  # noqa: E731
        _wait(lambda: len(again.findall(text())) >= 1, log, service, seconds=600)
        assert [m[0] for m in steps.findall(text())] == ["0"], text()[-4000:]
        spark.createDataFrame([imp("r7", 1, at(1, 12, 40))], IMP_SCHEMA).coalesce(1) \
            .write.format("delta").mode("append").save(str(inputs / "imps"))
        _wait(lambda: len(again.findall(text())) >= 2, log, service, seconds=300)
        service.send_signal(signal.SIGTERM)
        assert service.wait(timeout=120) == 0, text()[-4000:]
    finally:
        if service.poll() is None:
            service.kill()
            service.wait()
    said = text()
    assert "failed" not in said and "restarting" not in said, said[-4000:]
    # the first step pads r3 and r4 (before 11:30), the second r5 and r6 (before 12:10)
    assert [(int(b), int(n)) for b, n in steps.findall(said)] == [(0, 2), (1, 2)], said[-4000:]
    # the batch plan over the same inputs, in the local session
    spark.sql("CREATE DATABASE IF NOT EXISTS ods_idle")
    for name in ("imps", "clicks"):
        spark.sql(f"CREATE TABLE IF NOT EXISTS ods_idle.{name} USING DELTA LOCATION '{inputs / name}'")
    ctx = Context.with_session(spark, project)
    try:
        plans = compile_project(project, mode="batch", target=ctx.target)
        plans.raise_if_errors()
        run_batch(ctx, plans.plans["idle_samples"])
        closed = (F.col("label") == 1) | (F.col("imp_ts") < F.lit(at(1, 12, 10)))
        for table, where in (("idle_samples", closed), ("idle_samples__quarantine", F.lit(True))):
            want = spark.table(f"dw_idle.{table}").where(where).drop("origin")
            mine = spark.read.format("delta").load(str(got / table)).select(*want.columns)
            assert want.count() > 0, table
            assert (want.exceptAll(mine).collect(), mine.exceptAll(want).collect()) == ([], []), table
    finally:
        for db in ("ods_idle", "dw_idle"):
            spark.sql(f"DROP DATABASE IF EXISTS {db} CASCADE")


def test_what_cannot_run_over_connect_says_why_and_what_instead(connect_server, tmp_path):
    """The demo generator: refused before any work, with the reason and the alternative."""
    project = copy_project(tmp_path / "project")
    env = {**os.environ, "SQLFLOW_SPARK_REMOTE": connect_server.url}
    done = subprocess.run([*SQLFLOW, "--project-dir", str(project), "--target", "connect", "demo",
                           "generate", *DEMO], env=env, cwd=project, capture_output=True, text=True,
                          timeout=120)
    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 1, said[-2000:]
    assert "over Spark Connect (target `connect`)" in said and "cannot run" in said, said[-2000:]
    assert "`cluster` target" in said and "docs/deploy.md" in said, said[-2000:]


@pytest.mark.dbt
def test_dbt_run_over_connect_calls_the_udfs(spark, local_run, connect_server, connect_sources, tmp_path):
    """Plain `dbt run --target connect` (dbt-spark's session method with `spark.remote`): the
    dbt plugin registers `udfs/*.py` in the Connect session, so the routed `ue_live` model
    (`spmid_department(spmid)`) builds on the server, into a schema of its own, with the
    reference's rows."""
    project = copy_project(tmp_path / "project")
    env = {**os.environ, "SQLFLOW_SPARK_REMOTE": connect_server.url}
    profiles = yaml.safe_load((project / "profiles" / "profiles.yml").read_text())
    profiles["sqlflow"]["outputs"]["connect"]["schema"] = "dbt_connect"
    (project / "profiles" / "profiles.yml").write_text(yaml.safe_dump(profiles, sort_keys=False))
    dbt = str(Path(sys.executable).with_name("dbt"))
    done = subprocess.run([dbt, "run", "--target", "connect", "--profiles-dir", "profiles",
                           "--select", "stg_user_events", "ue_live"],
                          env=env, cwd=project, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:]
    built = connect_server.state / "warehouse" / "dbt_connect.db" / "ue_live"
    want = spark.read.format("delta").load(str(local_run / ".sqlflow" / "warehouse" / "dw.db" / "ue_live"))
    got = spark.read.format("delta").load(str(built)).select(*want.columns)
    assert (want.exceptAll(got).collect(), got.exceptAll(want).collect()) == ([], [])
    assert want.count() > 0


ARCHIVE = r"""
import sys
from pathlib import Path
from pyspark.sql import SparkSession
from sqlflow.project.load import load_project
from sqlflow.runtime.kafka import archive as A

url, root, schema, records = sys.argv[1:5]
spark = SparkSession.builder.remote(url).getOrCreate()
A.reader = lambda spark, table, servers, starting=None: spark.readStream.format("delta").load(records)
done = A.archive(spark, Path(root), [load_project(Path(root)).source(schema, "clicks")], "unused:9092")
print("ARCHIVED", done[0].batches, done[0].rows, done[0].malformed)
spark.stop()
"""

RECORDS = [
    (b'{"req_id": "r1", "ad_id": 7, "click_ts": "2025-11-24T15:59:58.123456Z"}', 0),
    (b"{not json", 1),
    (b'{"req_id": "r3", "ad_id": "seven", "click_ts": "2025-11-24T15:59:59Z"}', 2),
    (b"\xff\xfe binary", 3),
    (b'{"req_id": "' + b"r5" * 200 + b'", "ad_id": 1, "click_ts": "2025-11-24T15:59:59Z"}', 4),
    (b'{"req_id": "r6", "ad_id": 8}', 5),
]


def test_connect_kafka_archive_equals_local(spark, connect_server, tmp_path, monkeypatch):
    """A Kafka source's archive query over Connect (`archive.archive`, its `Append` pickled to
    the server's Python worker, the counts read from the archive's Delta versions) archives
    what the same function archives in this process, row for row, with the same counts of
    batches, records and malformed records. Smallest setup, no broker: both read the same
    records, with the columns of Spark's Kafka source, from a Delta table (the query's
    source is the only thing replaced; tests/kafka_io covers the connector with a broker)."""
    from kafka_io.kafkakit import kafka_project
    from sqlflow.runtime.kafka import archive as A

    here, table = kafka_project(tmp_path / "local")
    there = shutil.copytree(here, tmp_path / "connect", ignore=shutil.ignore_patterns(".sqlflow"))
    records = str(tmp_path / "records")
    rows = [(None, value, table.kafka.topic, 0, offset, datetime(2025, 11, 24, 16, 0, 0, offset * 1000), 0)
            for value, offset in RECORDS]
    (spark.createDataFrame(rows, "key binary, value binary, topic string, partition int, offset bigint, "
                                 "timestamp timestamp, timestampType int")
     .repartition(2).write.format("delta").save(records))
    monkeypatch.setattr(A, "reader", lambda s, t, servers, starting=None:
                        s.readStream.format("delta").load(records))
    want = A.archive(spark, here, [table], "unused:9092")[0]
    done = subprocess.run([sys.executable, "-c", ARCHIVE, connect_server.url, str(there), table.schema,
                           records], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"ARCHIVED {want.batches} {want.rows} {want.malformed}" in done.stdout, done.stdout[-2000:]
    assert (want.rows, want.malformed) == (6, 4)
    mine = spark.table(A.archive_table(table))
    theirs = spark.read.format("delta").load(
        str(connect_server.state / "warehouse" / f"{table.schema}.db" / table.identifier))
    theirs = theirs.select(*mine.columns)
    assert (mine.exceptAll(theirs).collect(), theirs.exceptAll(mine).collect()) == ([], [])
