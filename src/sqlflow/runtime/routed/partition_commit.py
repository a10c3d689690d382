"""Partition commit of routed groups (docs/design.md §2.5): commit log rows, `_SUCCESS`, notification.

An hour `(dt, hour)` of a routed group is COMMITTED
- in a stream, when the input's watermark passes `hour_end + allowed_lateness` and every target
  has been written through the micro-batch that saw it pass. The watermark is the INGEST
  FRONTIER: the largest ingest time of any clean row read so far (quarantined rows never move
  it; an input without an ingest column uses its largest event time minus allowed_lateness).
  A row of that hour arriving later would have `event_time < hour_end <= ingest_time -
  allowed_lateness`: it is late and goes to quarantine (docs/design.md §2.1), so nothing can reopen a
  committed hour. Commits run after every target's write of the micro-batch, so an hour is
  never committed while a target's sub-partitions of it may still be missing;
- at the end of a bounded stream run (`available-now`, input exhausted): every hour written
  and not committed yet, as if the watermark had passed (docs/design.md §2.6). A row into such an hour
  in a later run is not late by its own times: it is written, and the hour is marked `dirty`
  (not committed or notified again; `sqlflow repair` rewrites it);
- in a backfill, for every hour the run overwrote, once all targets are written.

A commit appends one `commit` row per target table and hour to the commit log (idempotent: an
hour already committed for a table is not appended twice), writes `<partition dir>/_SUCCESS`
when `success_marker` is on, then fires the notification once per hour and RUN (a stream's run
is its query, which survives restarts; each backfill is a new run), recorded as a `commit` row
of table `route:<group>` with reason `notified`. The log is read before firing, so a restart
never fires twice; only a crash in the instant between the notification returning and its row
being appended would repeat it, and the body carries `run_id` and `partition` to dedupe on.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import urllib.request
from collections.abc import Iterable
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from sqlflow.errors import SqlflowError
from sqlflow.planning.plan import RoutedPlan
from sqlflow.runtime.delta import commitlog, deltalog, markers, partition_path
from sqlflow.runtime.delta.commitlog import Entry
from sqlflow.runtime.delta.sinks import BatchId

NOTIFIED = "notified"


def hour_spec(plan: RoutedPlan, day: str, hour: str) -> str:
    return commitlog.partition_spec({plan.commit.date_column: day, plan.commit.hour_column: hour})


def hour_end_us(spec: str, plan: RoutedPlan, zone: str) -> int:
    """The end of the hour `dt=2026-11-01/hour=10` in microseconds since the epoch, in the
    session time zone (the zone `date_format(event_ts, 'HH')` used)."""
    values = commitlog.parse_partition(spec)
    day, hour = values[plan.commit.date_column], values[plan.commit.hour_column]
    assert day is not None and hour is not None  # a committed hour has both levels
    start = datetime.strptime(f"{day} {int(hour):02d}",
                              "%Y-%m-%d %H").replace(tzinfo=ZoneInfo(zone))
    end = start + timedelta(hours=1)
    return (end - datetime(1970, 1, 1, tzinfo=ZoneInfo("UTC"))) // timedelta(microseconds=1)


def closed(plan: RoutedPlan, hours: Iterable[str], watermark_us: int | None, zone: str) -> list[str]:
    """The hours whose end + allowed_lateness the watermark has reached."""
    if watermark_us is None:
        return []
    return sorted(h for h in hours
                  if hour_end_us(h, plan, zone) + plan.commit.allowed_lateness_us <= watermark_us)


def committed_hours(spark: SparkSession, plan: RoutedPlan, *,
                    before: tuple[str, int] | None = None) -> set[str]:
    """Hours committed for EVERY target of the group. `before=(run_id, batch_id)` leaves out
    commits that run made at that batch or later: a replayed batch (restart after a crash)
    must not take the hours it committed itself the first time for earlier commits."""
    tables = [t.sink.table.lower() for t in plan.targets]
    log = commitlog.read(spark)
    if before is not None:
        log = log.where(~((F.col("run_id") == before[0]) & (F.col("batch_id") >= before[1]))
                        | F.col("run_id").isNull() | F.col("batch_id").isNull())
    rows = (log.where((F.col("kind") == "commit") & F.col("table").isin(tables))
            .groupBy("partition").agg(F.countDistinct("table").alias("n"))
            .where(F.col("n") == len(tables)).collect())
    return {r["partition"] for r in rows}


def commit(spark: SparkSession, plan: RoutedPlan, hours: list[str], *, mode: commitlog.WriteMode, run_id: str,
           batch: BatchId | None = None, inputs: dict | None = None) -> list[str]:
    """Commit `hours` for every target (see the module docstring); returns the hours whose
    notification fired now."""
    if not hours:
        return []
    tables = {t.sink.table.lower(): t for t in plan.targets}
    # the log's own files when local (no Spark job), the same rows a Spark read counts
    ready = commitlog.ready_partitions_of(spark, list(tables))
    have = {(name, h) for name in tables for h in hours if h in ready.get(name, ())}
    entries = [Entry(t.sink.table, h, "commit", mode, t.model, run_id=run_id,
                     batch_id=batch.batch_id if batch else None, inputs=inputs or {},
                     reason="partition commit")
               for h in hours for name, t in tables.items() if (name, h) not in have]
    if entries:
        commitlog.append(spark, entries, batch=dataclasses.replace(batch, app_id=f"{batch.app_id}::commit")
                         if batch else None)  # `replace` keeps the query's journal
    if plan.commit.success_marker:
        for t in plan.targets:
            for h in hours:
                write_marker(spark, t.sink.table, h)
    if not (plan.commit.notify_url or plan.commit.notify_command):
        return []
    log = commitlog.read(spark)
    notified = {r["partition"] for r in log.where(
        (F.col("table") == notify_table(plan)) & (F.col("run_id") == run_id)
        & (F.col("reason") == NOTIFIED)).select("partition").collect()}
    fired = []
    for h in hours:
        if h in notified:
            continue
        notify(plan, h, run_id)
        commitlog.append(spark, [Entry(notify_table(plan), h, "commit", mode, plan.model,
                                       run_id=run_id, reason=NOTIFIED)])
        fired.append(h)
    return fired


def notify_table(plan: RoutedPlan) -> str:
    return f"route:{plan.model}".lower()


def notify(plan: RoutedPlan, spec: str, run_id: str) -> None:
    """POST `{group, partition, tables, run_id}` as JSON and/or run the shell command (with
    SQLFLOW_GROUP, SQLFLOW_PARTITION, SQLFLOW_TABLES, SQLFLOW_RUN_ID in its environment).
    A failing hook stops the run with a SqlflowError; the next run fires it again."""
    tables = [t.sink.table for t in plan.targets]
    body = {"group": plan.model, "partition": spec, "tables": tables, "run_id": run_id}
    if plan.commit.notify_url:
        request = urllib.request.Request(
            plan.commit.notify_url, data=json.dumps(body).encode(), method="POST",
            headers={"Content-Type": "application/json", "X-Sqlflow-Partition": spec})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                response.read()
        except OSError as exc:
            raise SqlflowError(f"routed group `{plan.model}`: notification POST to "
                               f"{plan.commit.notify_url} for {spec} failed: {exc}",
                               hint="fix the receiver and run again: the partition is committed "
                                    "and its notification fires on the next run") from exc
    if plan.commit.notify_command:
        env = dict(os.environ, SQLFLOW_GROUP=plan.model, SQLFLOW_PARTITION=spec,
                   SQLFLOW_TABLES=",".join(tables), SQLFLOW_RUN_ID=run_id)
        done = subprocess.run(plan.commit.notify_command, shell=True, env=env,
                              capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise SqlflowError(f"routed group `{plan.model}`: notify_command exited "
                               f"{done.returncode} for {spec}: {done.stderr.strip()[:300]}",
                               hint="fix the command and run again; it fires on the next run")


_LOCATIONS: dict[str, str] = {}


def write_marker(spark: SparkSession, table: str, spec: str) -> None:
    """An empty `_SUCCESS` file in the partition's directory (created when it has no files);
    `spec` is an escaped partition path, so the file is always inside the table's folder."""
    if table not in _LOCATIONS:
        found = deltalog.describe(spark, table).location
        assert found is not None  # a written Delta table has a location
        _LOCATIONS[table] = found
    markers.touch(spark, f"{partition_path.directory(_LOCATIONS[table], spec)}/_SUCCESS")
