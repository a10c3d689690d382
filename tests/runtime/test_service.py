"""The stream service on real Spark and Delta (docs/semantics.md, "The stream service"): three
models, each its own region; one fails on every micro-batch (an ANSI cast of a poisoned
row), is restarted alone and then marked failed while the two healthy ones keep committing;
`sqlflow status --format json` shows it without a JVM; pause and resume of one model; a
SIGTERM inside a micro-batch, then a restart, leaves every sink row equal to the batch plan's."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from runtime.adkit import CLICK_SCHEMA, IMP_SCHEMA, append, assert_same, at, click, imp, setup_projects
from sqlflow.runtime import control, heartbeat
from sqlflow.runtime.metrics import Metrics
from sqlflow.runtime.service import STOP_TIMEOUT, Service

pytestmark = pytest.mark.spark

HEAD = "{{ config(materialized='streaming_table', partition_by=['dt']) }}\n"
MODELS = {
    "filtered.sql": HEAD + """
SELECT i.req_id, i.ad_id, i.imp_ts, to_date(i.imp_ts) AS dt
FROM {{ source('ods', 'imps') }} AS i
WHERE i.ad_id > 0""",
    "clicked.sql": HEAD + """
SELECT c.req_id, c.click_ts, to_date(c.click_ts) AS dt
FROM {{ source('ods', 'clicks') }} AS c""",
    "poisoned.sql": "{{ config(materialized='streaming_table', partition_by=['dt'], "
                    "max_restarts=2, restart_backoff='200 ms') }}\n" + """
SELECT i.req_id, CAST(i.req_id AS INT) AS req_n, to_date(i.imp_ts) AS dt
FROM {{ source('ods', 'imps') }} AS i""",
    # downstream of `filtered`, in the same service: its input table does not exist until
    # filtered's first micro-batch, so it waits (no restart spent), then runs
    "onward.sql": HEAD + """
SELECT f.req_id, f.ad_id * 10 AS ad_x, f.imp_ts, f.dt
FROM {{ ref('filtered') }} AS f""",
}
SQLFLOW = str(Path(sys.executable).with_name("sqlflow"))


@pytest.fixture
def setup(spark, tmp_path, request):
    yield from setup_projects(spark, tmp_path, request, "rt_svc_", MODELS)


def imps(first, n, day=1, hh=9):
    return [imp(str(k), 1 + k % 3, at(day, hh, k % 60)) for k in range(first, first + n)]


def clicks(first, n, day=1, hh=9):
    return [click(str(k), at(day, hh, k % 60, 30)) for k in range(first, first + n)]


def until(what, cond, timeout=180.0):
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.3)


def until_event(events, start, cond, timeout=180.0):
    """The first micro-batch report after `events[start:]` that meets `cond`."""
    end = time.monotonic() + timeout
    while True:
        for e in events[start:]:
            if hasattr(e, "rows_in") and hasattr(e, "kind") and cond(e):
                return e
        assert time.monotonic() < end, "timed out waiting for a micro-batch"
        time.sleep(0.1)


def health(project_dir):
    beat = heartbeat.read(project_dir)
    return (beat or {}).get("models", {})


def status_json(project_dir):
    """`sqlflow status --format json` in a subprocess that cannot start a JVM."""
    env = {**os.environ, "JAVA_HOME": "/nonexistent", "SPARK_HOME": "/nonexistent",
           "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin"}
    began = time.monotonic()
    out = subprocess.run([SQLFLOW, "--project-dir", str(project_dir), "status", "--format", "json"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr + out.stdout
    return json.loads(out.stdout), time.monotonic() - began


def test_one_failing_model_is_restarted_alone_and_marked_failed(spark, setup, ansi_mode):
    s = setup
    root = s.stream.project_dir
    append(spark, f"{s.ods}.imps", imps(0, 6) + [imp("poison", 1, at(1, 9, 30))], IMP_SCHEMA)
    append(spark, f"{s.ods}.clicks", clicks(0, 4), CLICK_SCHEMA)
    plans = [s.stream_plans[m] for m in ("filtered", "clicked", "poisoned", "onward")]
    assert not spark.catalog.tableExists(s.stream_plans["filtered"].sink.table)
    events, stop, metrics = [], threading.Event(), Metrics()
    port = _free_port()
    metrics.serve(port)
    conf_before = spark.conf.getAll.get(STOP_TIMEOUT)
    armed, hiccup = threading.Event(), []

    def on_event(e):
        """Once armed, `clicked` fails once, inside its next micro-batch (after its sink
        write): it is restarted alone, replays that batch, and keeps committing."""
        events.append(e)
        if armed.is_set() and not hiccup and getattr(e, "model", None) == "clicked" \
                and getattr(e, "batch_id", None) is not None:
            hiccup.append(e)
            raise RuntimeError("clicked hiccups once")

    service = Service(s.stream, plans, trigger="1 second", on_event=on_event,
                      stop_timeout_s=20, metrics=metrics, stop=stop, poll_s=0.3)
    worker = threading.Thread(target=service.run)
    worker.start()
    try:
        until("poisoned to fail", lambda: health(root).get("poisoned", {}).get("state") == "failed",
              timeout=300)
        states = [e.state for e in events if getattr(e, "model", None) == "poisoned"
                  and hasattr(e, "delay")]
        assert states == ["running", "restarting", "running", "restarting", "running", "failed"]
        h = health(root)
        assert "poisoned.sql" in h["poisoned"]["last_error"] and h["poisoned"]["restarts"] == 2
        assert h["filtered"]["state"] == h["clicked"]["state"] == "running"
        # the healthy ones keep committing new rows
        before = {m: h[m]["rows_out"] for m in ("filtered", "clicked")}
        append(spark, f"{s.ods}.imps", imps(100, 5), IMP_SCHEMA)
        append(spark, f"{s.ods}.clicks", clicks(100, 3), CLICK_SCHEMA)
        armed.set()  # clicked's micro-batch of these rows fails once
        until("new rows", lambda: all(health(root)[m]["rows_out"] > before[m]
                                      for m in ("filtered", "clicked")))
        until("clicked recovered", lambda: health(root)["clicked"]["restarts"] >= 1
              and health(root)["clicked"]["state"] == "running", timeout=300)
        # one restart for one failure: the service creates the commit log before any query
        # starts, so no query loses a race to create it (Delta ProtocolChangedException)
        assert (health(root)["clicked"]["restarts"], health(root)["filtered"]["restarts"]) == (1, 0)
        assert hiccup and "clicked hiccups once" in health(root)["clicked"]["last_error"]
        assert [e.state for e in events if getattr(e, "model", None) == "clicked"
                and hasattr(e, "delay")][-2:] == ["restarting", "running"]
        doc, seconds = status_json(root)
        by = {m["name"]: m for m in doc["models"]}
        assert doc["service"]["running"] and seconds < 15
        assert (by["poisoned"]["state"], by["poisoned"]["restarts"]) == ("failed", 2)
        assert by["poisoned"]["last_batch_id"] is None and by["poisoned"]["in_flight"]
        assert by["filtered"]["state"] == "running" and by["filtered"]["last_batch_id"] >= 1
        assert by["filtered"]["last_batch_at"] and by["filtered"]["lag_seconds"] is not None
        # pause one model: the other keeps committing; resume: it catches up
        control.pause(root, "clicked")
        until("clicked paused", lambda: health(root)["clicked"]["state"] == "paused")
        paused_out = health(root)["clicked"]["rows_out"]
        f_out = health(root)["filtered"]["rows_out"]
        append(spark, f"{s.ods}.clicks", clicks(200, 3), CLICK_SCHEMA)
        append(spark, f"{s.ods}.imps", imps(200, 4), IMP_SCHEMA)
        until("filtered while clicked is paused", lambda: health(root)["filtered"]["rows_out"] > f_out)
        assert health(root)["clicked"]["rows_out"] == paused_out
        control.resume(root, "clicked")
        until("clicked resumed", lambda: health(root)["clicked"]["rows_out"] > paused_out)
        # `ctl rate` on the running service: after a batch of 6 rows at 0.25 rows/s, the next
        # batch of `filtered` waits until 24 s after that batch began
        control.set_rate(root, "filtered", f"{s.ods}.imps", 0.25)
        seen = len(events)
        append(spark, f"{s.ods}.imps", imps(300, 6), IMP_SCHEMA)
        first = until_event(events, seen, lambda e: e.model == "filtered" and dict(e.rows_in).get(f"{s.ods}.imps") == 6)
        t0 = time.monotonic() - first.seconds  # when that batch began (at the latest)
        append(spark, f"{s.ods}.imps", imps(400, 1), IMP_SCHEMA)
        until_event(events, len(events), lambda e: e.model == "filtered" and e.kind == "batch")
        assert time.monotonic() - t0 >= 24 - 1.0, "the rate did not hold the next batch back"
        control.set_rate(root, "filtered", f"{s.ods}.imps", 0)
        scraped = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
        assert 'sqlflow_restarts_total{model="poisoned"} 2.0' in scraped
        assert 'sqlflow_model_up{model="poisoned"} 0.0' in scraped
        # the service's own count (the heartbeat file is rewritten at the next poll only)
        rows_out = {r.plan.model: r.health.rows_out for r in service.regions}["filtered"]
        assert f'sqlflow_rows_out_total{{model="filtered"}} {rows_out}.0' in scraped
        assert 'sqlflow_microbatch_seconds_count{model="clicked"}' in scraped
    finally:
        stop.set()
        worker.join(60)
    assert not worker.is_alive()
    assert {r.model: r.state for r in service.rows()} == \
        {"filtered": "stopped", "clicked": "stopped", "poisoned": "failed", "onward": "stopped"}
    assert spark.conf.getAll.get(STOP_TIMEOUT) == conf_before  # the shared session as it was
    for m in ("filtered", "clicked"):
        sink, quarantine = s.truth(m)
        assert_same(spark, s.stream_plans[m].sink.table, sink)


def _free_port():
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_sigterm_inside_a_micro_batch_then_a_restart_writes_every_row_once(spark, setup):
    """SIGTERM arrives while `filtered`'s batch 0 runs (its report is sent from inside the
    batch): the service stops every query within its timeout; the restarted service picks up
    where the checkpoints are and the sinks equal the batch plan, row for row."""
    s = setup
    root = s.stream.project_dir
    plans = [s.stream_plans[m] for m in ("filtered", "clicked")]
    late = imp("late", 1, at(1, 9, 0), at(1, 9, 20))  # 20 minutes late: quarantined
    append(spark, f"{s.ods}.imps", imps(0, 8) + [late], IMP_SCHEMA)
    append(spark, f"{s.ods}.clicks", clicks(0, 5), CLICK_SCHEMA)

    def on_event(e):
        if getattr(e, "model", None) == "filtered" and getattr(e, "batch_id", None) == 0:
            os.kill(os.getpid(), signal.SIGTERM)

    service = Service(s.stream, plans, trigger="1 second", on_event=on_event, stop_timeout_s=10,
                      poll_s=0.3)
    began = time.monotonic()
    service.run()  # the main thread: SIGTERM is the service's to handle
    assert time.monotonic() - began < 120
    assert {r.state for r in service.rows()} == {"stopped"}
    assert heartbeat.read(root)["running"] is False
    append(spark, f"{s.ods}.imps", imps(50, 4, hh=10), IMP_SCHEMA)
    append(spark, f"{s.ods}.clicks", clicks(50, 2, hh=10), CLICK_SCHEMA)
    stop = threading.Event()
    again = Service(s.stream, plans, trigger="1 second", on_event=lambda e: None,
                    stop_timeout_s=10, stop=stop, poll_s=0.3)
    worker = threading.Thread(target=again.run)
    worker.start()
    try:
        until("both caught up", lambda: spark.table(plans[0].sink.table).count() >= 12
              and spark.table(plans[1].sink.table).count() >= 7)
        time.sleep(2)  # one more trigger: nothing new, nothing written again
    finally:
        stop.set()
        worker.join(60)
    for m in ("filtered", "clicked"):
        sink, quarantine = s.truth(m)
        assert_same(spark, s.stream_plans[m].sink.table, sink)
    sink, quarantine = s.truth("filtered")
    assert_same(spark, s.stream_plans["filtered"].quarantine, quarantine, drop=("origin",))
