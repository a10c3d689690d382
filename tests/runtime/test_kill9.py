"""The kill -9 cases of the fault catalogue (docs/semantics.md, "Faults: what is guaranteed,
what is refused, what an operator does"): a separate `sqlflow run` process (`kill_child.py`,
the real command line in its own JVM, over its own warehouse and metastore) stops at a named
point (`sqlflow.runtime.fault_points`) drawn from a seeded RNG, gets SIGKILL (its whole process
group: Python and JVM), and the next process restarts the run. Then every row of every output
(sink, quarantine) equals the batch plan's, read from the Delta folders by this session.

Each process starts a JVM (20-40 s on a loaded machine), so the cases share processes: the
first process seeds the inputs and runs three bounded stream runs (micro-batches 0, 1, 2) and
is killed inside one of them; the second restarts the stream run to its end, then runs the
batch plan of a copy of the model and is killed after its sink write; the third runs that
backfill again. Two kills, three processes. `SQLFLOW_KILL_SEED=<n>` replays a failing draw.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import ad_sources_yml, make_project
from runtime.adkit import CLICK_SCHEMA, IMP_SCHEMA, in_ingest_chunks, random_rows
from sqlflow.runtime import fault_points

pytestmark = pytest.mark.spark

CHILD = Path(__file__).with_name("kill_child.py")
SQL = """{{ config(materialized='streaming_table', partition_by=['dt']) }}
SELECT c.req_id, c.click_ts, i.ad_id, i.imp_ts, to_date(c.click_ts) AS dt
FROM {{ source('ods', 'clicks') }} AS c
JOIN {{ source('ods', 'imps') }} AS i
  ON i.req_id = c.req_id AND c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 20 MINUTES
"""
PROFILE = """\
sqlflow:
  target: local
  outputs:
    local:
      type: spark
      method: session
      host: NA
      schema: dw
      server_side_parameters:
        spark.master: "local[2]"
        spark.jars.packages: "io.delta:delta-spark_4.2_2.13:4.4.0"
        spark.sql.extensions: io.delta.sql.DeltaSparkSessionExtension
        spark.sql.catalog.spark_catalog: org.apache.spark.sql.delta.catalog.DeltaCatalog
        spark.sql.warehouse.dir: .sqlflow/warehouse
        spark.hadoop.javax.jdo.option.ConnectionURL: "jdbc:derby:;databaseName=.sqlflow/metastore_db;create=true"
        spark.driver.extraJavaOptions: "-Dderby.system.home=.sqlflow"
        spark.sql.shuffle.partitions: "2"
        spark.sql.session.timeZone: UTC
        spark.ui.enabled: "false"
        spark.ui.showConsoleProgress: "false"
        spark.databricks.delta.snapshotPartitions: "2"
        spark.driver.memory: "1g"
        spark.sql.sources.partitionOverwriteMode: dynamic
"""
STREAM_POINTS = ("sink", "state", "commit_log", "spark_commit")


def rows_json(rows):
    """Rows as text (the child casts each column to its type); None stays NULL."""
    return [[None if v is None else v.isoformat() if hasattr(v, "isoformat") else str(v) for v in r]
            for r in rows]


def child(project: Path, steps: list[dict], why: str, kill: bool = False) -> float:
    """Run `steps` in a new process; with `kill`, SIGKILL its process group at the fault point.
    Returns the process's wall time."""
    script, reached = project / "steps.json", project / "fault.pid"
    script.write_text(json.dumps(steps))
    reached.unlink(missing_ok=True)
    env = {**os.environ, fault_points.FILE_ENV: str(reached)}
    env.pop(fault_points.ENV, None)
    began = time.monotonic()
    proc = subprocess.Popen([sys.executable, str(CHILD), str(project), str(script)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    if kill:
        while not reached.exists() and proc.poll() is None and time.monotonic() - began < 600:
            time.sleep(0.2)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # kill -9 of the process and its JVM
        out = proc.communicate()[0]
        assert reached.exists(), f"{why}: the fault point was never reached:\n{out[-3000:]}"
        assert proc.returncode == -signal.SIGKILL, f"{why}: not killed:\n{out[-3000:]}"
        return time.monotonic() - began
    out = proc.communicate(timeout=900)[0]
    assert proc.returncode == 0, f"{why}: the process failed:\n{out[-3000:]}"
    return time.monotonic() - began


def test_kill_9_at_random_points_of_stream_and_batch_runs_then_a_restart(spark, tmp_path):
    seed = int(os.environ.get("SQLFLOW_KILL_SEED") or random.randrange(1 << 30))
    rnd = random.Random(seed)
    point, batch = rnd.choice(STREAM_POINTS), rnd.randrange(3)
    if point == "spark_commit":  # reached when the next micro-batch begins
        batch = min(batch, 1)
    why = f"seed {seed}: stream killed at `{point}` of micro-batch {batch}, then a backfill at `batch_sink`"
    project = make_project(tmp_path / "p", models={"attributed.sql": SQL, "attributed_copy.sql": SQL},
                           yml={"sources.yml": ad_sources_yml("ods")}, profiles_yml=PROFILE)
    imps, clicks = random_rows(seed, n=40, keys=25)
    parts = [in_ingest_chunks(rnd, imps, "ods.imps", IMP_SCHEMA), in_ingest_chunks(rnd, clicks, "ods.clicks", CLICK_SCHEMA)]
    rounds = [[], [], []]  # three arrivals, one micro-batch each
    for part in parts:
        for k, (table, rows, schema) in enumerate(part):
            rounds[min(k, 2)].append({"append": [table, schema, rows_json(rows)]})
    stream = {"cli": ["run", "--mode", "stream", "--select", "attributed"]}
    steps = []
    for arrival in rounds:
        steps += [*arrival, {**stream, "fault": f"{point}:{batch}"}]
    killed_in = batch + 1 if point == "spark_commit" else batch  # the run the kill stops
    times = [child(project, steps, why, kill=True)]
    rest = [s for arrival in rounds[killed_in + 1:] for s in arrival]
    backfill = {"cli": ["run", "--mode", "batch", "--select", "attributed_copy"]}
    times.append(child(project, [stream, *rest, stream, {**backfill, "fault": "batch_sink:0"}], why, kill=True))
    times.append(child(project, [backfill], why))
    print(f"{why}: process wall times {[round(t, 1) for t in times]} s")

    warehouse = project / ".sqlflow" / "warehouse" / "dw.db"
    for got, want, drop in (("attributed", "attributed_copy", ()),
                            ("attributed__quarantine", "attributed_copy__quarantine", ("model", "origin"))):
        g = spark.read.format("delta").load(str(warehouse / got)).drop(*drop)
        w = spark.read.format("delta").load(str(warehouse / want)).drop(*drop)
        missing, extra = w.exceptAll(g).collect(), g.exceptAll(w).collect()
        assert (missing, extra) == ([], []), f"{why}: {got}: missing {missing}, unexpected {extra}"
        assert w.count() > 0, f"{why}: {want} is empty"
