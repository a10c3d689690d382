"""`sqlflow status` reads files only (docs/semantics.md, "The stream service"): it never
starts a JVM, and its JSON shape is stable. `sqlflow ctl` writes the control file. The CLI's
consoles keep every table column whole when output is not a terminal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from helpers import ad_sources_yml, make_project
from sqlflow.runtime import control, heartbeat
from sqlflow.runtime.heartbeat import ModelHealth

SQLFLOW = str(Path(sys.executable).with_name("sqlflow"))
HEAD = "{{ config(materialized='streaming_table', partition_by=['dt']) }}\n"
MODELS = {
    "filtered.sql": HEAD + "SELECT i.req_id, to_date(i.imp_ts) AS dt\n"
                           "FROM {{ source('ods', 'imps') }} AS i WHERE i.ad_id > 0",
    "clicked.sql": HEAD + "SELECT c.req_id, to_date(c.click_ts) AS dt\n"
                          "FROM {{ source('ods', 'clicks') }} AS c",
}


def sqlflow(root, *args):
    """The CLI in a subprocess that cannot start a JVM: no java, a JAVA_HOME that is not one."""
    env = {**os.environ, "JAVA_HOME": "/nonexistent", "SPARK_HOME": "/nonexistent",
           "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin"}
    began = time.monotonic()
    out = subprocess.run([SQLFLOW, "--project-dir", str(root), *args], capture_output=True,
                         text=True, env=env, timeout=60)
    return out, time.monotonic() - began


PROFILES = """\
sqlflow:
  target: local
  outputs:
    local:
      type: spark
      method: session
      host: NA
      schema: dw
      server_side_parameters: {spark.sql.warehouse.dir: .sqlflow/warehouse}
"""


def write_commit_log(folder, rows):
    """A commit log as Delta writes it (one parquet file, commit 0 adding it), without Spark."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True)
    base = datetime(2026, 11, 5, tzinfo=timezone.utc)
    names = ("table", "partition", "kind", "mode", "provisional", "reason", "committed_at")
    cols = list(zip(*[(*r[:6], base + timedelta(minutes=r[6])) for r in rows], strict=True))
    pq.write_table(pa.table(dict(zip(names, cols, strict=True))), folder / "part-0.parquet")
    (folder / "_delta_log").mkdir()
    actions = [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
               {"metaData": {"id": "x", "format": {"provider": "parquet", "options": {}},
                             "schemaString": "{}", "partitionColumns": [], "configuration": {}}},
               {"add": {"path": "part-0.parquet", "partitionValues": {}, "size": 1,
                        "modificationTime": 0, "dataChange": True}}]
    (folder / "_delta_log" / f"{0:020d}.json").write_text("\n".join(map(json.dumps, actions)))


def test_status_reads_checkpoints_and_the_heartbeat_without_a_jvm(tmp_path):
    root = make_project(tmp_path, models=MODELS, yml={"sources.yml": ad_sources_yml("ods")},
                        profiles_yml=PROFILES)
    cp = root / ".sqlflow" / "checkpoints" / "filtered"
    for d, ids in (("offsets", (0, 1, 2)), ("commits", (0, 1))):
        (cp / d).mkdir(parents=True)
        for i in ids:  # batch 2 delivered ods.imps up to version 4 (offset: version 5)
            offset = {"sourceVersion": 1, "reservoirId": "x", "reservoirVersion": 3 + i,
                      "index": -1, "isStartingVersion": False}
            (cp / d / str(i)).write_text(f"v1\n{{}}\n{json.dumps(offset)}")
    log = root / ".sqlflow" / "warehouse" / "ods.db" / "imps" / "_delta_log"
    log.mkdir(parents=True)
    for v in range(8):  # the table is at version 7: 3 versions behind
        (log / f"{v:020d}.json").write_text("{}")
    clicks = root / ".sqlflow" / "warehouse" / "ods.db" / "clicks" / "_delta_log"
    clicks.mkdir(parents=True)
    for v in range(2):  # versions 0 and 1, none delivered (no checkpoint yet)
        (clicks / f"{v:020d}.json").write_text("{}")
    now = time.time()
    write_commit_log(root / ".sqlflow" / "warehouse" / "sqlflow.db" / "commit_log", [
        ("dw.filtered", "dt=2026-11-02", "write", "stream", True, None, 1),   # provisional
        ("dw.filtered", "dt=2026-11-03", "dirty", "stream", False, "late match", 2),
        ("dw.filtered", "dt=2026-11-03", "repair", "batch", False, None, 3),  # settled
        ("dw.clicked", "dt=2026-11-04", "dirty", "stream", False, "dropped", 4),
        ("dw.clicked", "", "refresh", "stream", False, "full refresh", 5),    # history now
    ])
    heartbeat.write(root, [
        ModelHealth("filtered", "models/filtered.sql", str(cp), state="running", restarts=1,
                    newest_ingest_at=now - 30,
                    rows_in=9, rows_out=7, quarantined={"late": 2}, dirty=["dt=2026-11-01"],
                    batches=[[now - 10, 9, 7, 2], [now - 7200, 100, 100, 0]]),
        ModelHealth("clicked", "models/clicked.sql", "", state="failed", restarts=3,
                    last_error="models/clicked.sql:2: stream query failed: boom"),
    ], running=True, now=now)
    out, _ = sqlflow(root, "status", "--format", "json")
    assert out.returncode == 0, out.stderr + out.stdout
    doc = json.loads(out.stdout)
    assert doc["version"] == 1 and doc["service"]["running"] is True
    by = {m["name"]: m for m in doc["models"]}
    f, c = by["filtered"], by["clicked"]
    assert (f["state"], f["restarts"], f["last_batch_id"], f["in_flight"]) == ("running", 1, 1, True)
    assert f["last_batch_at"].endswith("Z") and 30 <= f["lag_seconds"] < 90  # ingest-time lag
    assert (f["rows_in_1h"], f["rows_out_1h"], f["quarantined_1h"]) == (9, 7, 2)  # the last hour
    assert f["dirty_partitions"] == ["dt=2026-11-01"] and f["quarantined"] == {"late": 2}
    # the commit log, read from its Delta files without a JVM
    assert doc["commit_log"] == "read" and f["provisional_partitions"] == ["dt=2026-11-02"]
    assert [(p["table"], p["partition"], p["dirty"], p["provisional"]) for p in f["open_partitions"]] \
        == [("dw.filtered", "dt=2026-11-02", False, True)]
    assert c["open_partitions"] == [] and c["dirty_partitions"] == []
    assert f["versions_behind"] == {"ods.imps": 3} and c["versions_behind"] == {"ods.clicks": 2}
    assert (c["state"], c["restarts"], c["last_batch_id"], c["lag_seconds"]) == ("failed", 3, None, None)
    assert "clicked.sql:2" in c["last_error"]
    # a service gone without a last heartbeat: its models read stopped (a failed one stays failed)
    heartbeat.write(root, [ModelHealth("clicked", "", "", state="failed"),
                           ModelHealth("filtered", "", "", state="running")],
                    running=True, now=now - 3600)
    out, _ = sqlflow(root, "status", "--format", "json", "--select", "filtered")
    doc = json.loads(out.stdout)
    assert [(m["name"], m["state"]) for m in doc["models"]] == [("filtered", "stopped")]
    assert doc["service"]["running"] is False
    table, _ = sqlflow(root, "status")
    assert table.returncode == 0 and "Stream service: not running" in table.stdout
    # the guard holds: what starts Spark (the commit log's tables) fails in this environment
    spark, _ = sqlflow(root, "status", "--commit-log")
    assert spark.returncode != 0 and "Java" in spark.stderr + spark.stdout


def test_ctl_writes_the_control_file_the_service_polls(tmp_path):
    root = make_project(tmp_path, models=MODELS, yml={"sources.yml": ad_sources_yml("ods")})
    heartbeat.write(root, [ModelHealth("filtered", "", ""), ModelHealth("clicked", "", "")],
                    running=True, now=time.time())
    assert sqlflow(root, "ctl", "pause", "clicked")[0].returncode == 0
    assert sqlflow(root, "ctl", "rate", "filtered", "ods.imps", "25")[0].returncode == 0
    got = control.read(root)
    assert got.paused == {"clicked"} and got.rate("filtered", "ods.imps") == 25.0
    assert sqlflow(root, "ctl", "resume", "clicked")[0].returncode == 0
    assert control.read(root).paused == frozenset()
    wrong, _ = sqlflow(root, "ctl", "pause", "nope")
    assert wrong.returncode == 1 and "not a model of the stream service" in wrong.stderr


def test_ctl_rate_is_refused_while_the_service_runs_over_spark_connect(tmp_path):
    """Over Connect the callback that would hold the next batch never runs (docs/deploy.md,
    "The stream service over Connect"): `ctl rate` says so and writes nothing; pause works."""
    root = make_project(tmp_path, models=MODELS, yml={"sources.yml": ad_sources_yml("ods")})
    heartbeat.write(root, [ModelHealth("filtered", "", ""), ModelHealth("clicked", "", "")],
                    running=True, now=time.time(), connect="connect")
    said, _ = sqlflow(root, "ctl", "rate", "filtered", "ods.imps", "25")
    text = " ".join(said.stderr.split())
    assert said.returncode == 1, text
    assert "`rate` cannot run over Spark Connect (target `connect`)" in text, text
    assert "max_files_per_trigger" in text and "`cluster` target" in text, text
    assert control.read(root).rate("filtered", "ods.imps") is None
    assert sqlflow(root, "ctl", "pause", "clicked")[0].returncode == 0
    assert control.read(root).paused == {"clicked"}


def test_tables_are_not_cut_to_80_columns_when_output_is_not_a_terminal():
    from rich.table import Table

    from sqlflow.cli import support

    table = Table()
    for k in range(12):
        table.add_column(f"column number {k}")
    table.add_row(*(f"{19_800 + k:,} rows" for k in range(12)))
    with support.console.capture() as cap:
        support.console.print(table)
    assert all(f"column number {k}" in cap.get() for k in range(12))
    assert "19,811 rows" in cap.get()


def test_the_exit_code_of_a_stream_service_run_is_1_when_a_model_ended_failed(tmp_path, monkeypatch):
    """The CLI's part (a unit test: the service itself runs in tests/runtime/test_service.py):
    the summary lists each model's end state, a failed model's error, and the exit code."""
    from click.testing import CliRunner

    from sqlflow.cli.main import main
    from sqlflow.runtime.results import StreamRow
    from sqlflow.workflows import run as workflow

    root = make_project(tmp_path, models=MODELS, yml={"sources.yml": ad_sources_yml("ods")})
    seen = {}

    def fake_run_streams(ctx, plans, *, rows, stop_timeout_s, **_):
        seen["timeout"] = stop_timeout_s
        rows.extend(ending)
        return rows

    monkeypatch.setattr(workflow, "run_streams", fake_run_streams)
    args = ["--project-dir", str(root), "run", "--mode", "stream", "--trigger", "1 second"]
    ending = [StreamRow("filtered", "stream", 3, 9, 1, 5.0, 0, state="stopped"),
              StreamRow("clicked", "stream", 0, 0, 0, 5.0, 0, state="failed", restarts=3,
                        error="models/clicked.sql: error: stream query failed: boom")]
    res = CliRunner().invoke(main, args + ["--stop-timeout", "5 seconds"])
    assert res.exit_code == 1, res.output
    assert seen["timeout"] == 5.0
    assert "clicked failed: models/clicked.sql: error: stream query failed: boom" in res.output
    line = next(ln for ln in res.output.splitlines() if ln.strip().startswith("clicked"))
    assert line.split()[-2:] == ["failed", "3"]
    ending = [StreamRow("filtered", "stream", 3, 9, 1, 5.0, 0, state="stopped")]
    assert CliRunner().invoke(main, args).exit_code == 0
    bad = CliRunner().invoke(main, args + ["--stop-timeout", "30"])
    assert bad.exit_code == 1 and "--stop-timeout" in bad.output
