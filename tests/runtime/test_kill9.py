"""The kill -9 cases of the fault catalogue (docs/semantics.md, "Faults: what is guaranteed,
what is refused, what an operator does"): a separate `sqlflow run` process (`kill_child.py`,
the real command line in its own JVM, over its own warehouse and metastore) stops at a named
point (`sqlflow.runtime.fault_points`) drawn from a seeded RNG, gets SIGKILL (its whole process
group: Python and JVM), and the next process restarts the run. Then every row of every output
(sink, quarantine, each routed target) equals the batch plan's, read from the Delta folders by
this session (EXCEPT ALL both ways).

Each process starts a JVM (20-40 s on a loaded machine), so the cases share processes: the
first seeds the inputs and runs three rounds of bounded stream runs (`--trigger available-now`;
micro-batches 0, 1, 2) of an interval-join model and of a routed group, and is killed inside
one of them (the model's `sink`, `state`, `commit_log` or `spark_commit` point, or the group's
`sink` (between two targets), `commit_log` or `spark_commit` point); the second restarts both
streams, runs the rounds the kill left to their end, then runs the batch plan of a copy of the
model and is killed after its sink write (`batch_sink`); the third runs that backfill again
and the batch plan of a copy of the group. Two kills, three processes.

Each process's JVM compiles with C1 only (`helpers.SHORT_JVM` in its profile): a JVM that
lives a few minutes on small data spends less CPU that way.

Every process has a time budget (`SQLFLOW_KILL_BUDGET`, seconds, default 900): past it the
process group is killed and the test fails naming the step it was in, with its output; the
fixture kills any process group still alive at teardown. `SQLFLOW_KILL_SEED=<n>` replays a
draw (the seed is in every failure message).
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from helpers import FUTURE_TOLERANCE, LATENESS, SHORT_JVM, make_project, ods_sources_yml
from runtime.adkit import CLICK_SCHEMA, DAY1, IMP_SCHEMA, in_ingest_chunks, random_rows
from sqlflow.runtime import fault_points

pytestmark = pytest.mark.spark

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CHILD = HERE / "kill_child.py"
BUDGET_S = float(os.environ.get("SQLFLOW_KILL_BUDGET") or 900)
SQL = """{{ config(materialized='streaming_table', partition_by=['dt']) }}
SELECT c.req_id, c.click_ts, i.ad_id, i.imp_ts, to_date(c.click_ts) AS dt
FROM {{ source('ods', 'clicks') }} AS c
JOIN {{ source('ods', 'imps') }} AS i
  ON i.req_id = c.req_id AND c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 20 MINUTES
"""
DEPTS = ("live", "main", "music")
# seconds from event to ingest time that neither rule of the sources quarantines
ON_TIME_S = (1 - int(FUTURE_TOLERANCE.total_seconds()), int(LATENESS.total_seconds()) - 1)
EVENT_SCHEMA = ("event_id string, spmid string, event_type string, product string, event_ts timestamp, "
                "ingest_ts timestamp")
PROFILE = f"""\
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
        spark.driver.extraJavaOptions: "-Dderby.system.home=.sqlflow {SHORT_JVM}"
        spark.sql.shuffle.partitions: "2"
        spark.sql.session.timeZone: UTC
        spark.ui.enabled: "false"
        spark.ui.showConsoleProgress: "false"
        spark.databricks.delta.snapshotPartitions: "2"
        spark.driver.memory: "1g"
        spark.sql.sources.partitionOverwriteMode: dynamic
"""
# the points of each stream runtime (sqlflow.runtime.fault_points); a routed group has no state
POINTS = {"attributed": ("sink", "state", "commit_log", "spark_commit"),
          "by_dept": ("sink", "commit_log", "spark_commit")}


def routed_models(folder: str, prefix: str) -> dict[str, str]:
    return {f"{folder}/{prefix}{d}.sql": f"{{{{ route_to(source('ods', 'events'), '{d}', "
                                         f"columns=['event_id', 'spmid', 'event_ts']) }}}}" for d in DEPTS}


def routing(group: str) -> dict:
    return {"+materialized": "streaming_table", "+partition_by": ["dt", "hour", "event_type", "product"],
            "+routing": {"group": group, "bytes_per_row": "1kb"}}


def random_events(rnd: random.Random, n: int = 40) -> list[tuple]:
    """Three hours of events over three departments and malformed spmids, ingest up to 6 min
    early (some future) to 12 min late (some late), tags with NULLs (as test_routing's). The
    first row of each department is on time (within the sources' `FUTURE_TOLERANCE` and
    `LATENESS`: ingest 5 min early to 10 min late), so no routed
    target's batch plan is empty whatever the seed (seed 893802963 drew two `live` rows, both
    quarantined, and the test's "not vacuous" check failed)."""
    rows = []
    for k in range(n):
        ts = DAY1 + timedelta(hours=10, microseconds=rnd.randrange(3 * 3_600_000_000))
        on_time = k < len(DEPTS)
        ingest = ts + timedelta(seconds=rnd.randint(*ON_TIME_S) if on_time else rnd.randint(-360, 720))
        dept = DEPTS[k] if on_time else rnd.choice((*DEPTS, None))
        rows.append((f"e{k}", f"{dept}.page.mod.{k % 3}" if dept else "broken",
                     rnd.choice(["pv", "show", None]), rnd.choice(["app", "web"]), ts, ingest))
    return rows


def rows_json(rows):
    """Rows as text (the child casts each column to its type); None stays NULL."""
    return [[None if v is None else v.isoformat() if hasattr(v, "isoformat") else str(v) for v in r]
            for r in rows]


class Children:
    """The child processes of one test: each in its own process group, with a time budget."""

    def __init__(self, project: Path, why: str):
        self.project, self.why, self.procs = project, why, []

    def run(self, steps: list[dict], *, kill: bool = False) -> tuple[float, int]:
        """Run `steps` in a new process; with `kill`, SIGKILL its process group at the fault
        point. Returns the process's wall time and the index of the step it was in."""
        n = len(self.procs)
        script, progress = self.project / f"steps{n}.json", self.project / f"progress{n}"
        reached, log = self.project / f"fault{n}.pid", self.project / f"child{n}.log"
        script.write_text(json.dumps(steps))
        env = {**os.environ, fault_points.FILE_ENV: str(reached),
               "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
        env.pop(fault_points.ENV, None)
        began = time.monotonic()
        with open(log, "w") as out:  # a file, not a pipe: a full pipe would stop the child
            proc = subprocess.Popen([sys.executable, str(CHILD), str(self.project), str(script), str(progress)],
                                    env=env, stdout=out, stderr=subprocess.STDOUT, text=True,
                                    start_new_session=True)
        self.procs.append(proc)
        while proc.poll() is None and not (kill and reached.exists()):
            if time.monotonic() - began > BUDGET_S:
                self.kill(proc)
                pytest.fail(f"{self.why}: process {n} still in step {self.step(progress)} "
                            f"({steps[self.step(progress)]!r:.200}) after {BUDGET_S:.0f} s; killed. "
                            f"Its output ends:\n{self.tail(log)}")
            time.sleep(0.2)
        if kill:
            self.kill(proc)  # kill -9 of the process and its JVM
            assert reached.exists(), (f"{self.why}: process {n} ended (exit {proc.returncode}) "
                                      f"without reaching the fault point:\n{self.tail(log)}")
        else:
            assert proc.returncode == 0, f"{self.why}: process {n} failed:\n{self.tail(log)}"
        return time.monotonic() - began, self.step(progress)

    @staticmethod
    def step(progress: Path) -> int:
        return int(progress.read_text() or 0) if progress.exists() else 0

    @staticmethod
    def tail(log: Path) -> str:
        """The end of a process's output without the JVM's stack frames and warnings."""
        lines = [line for line in log.read_text(errors="replace").splitlines()
                 if not re.match(r"\s+at |\S+ \S+ WARN |\s+\.\.\. \d+ more", line)]
        return "\n".join(lines)[-4000:]

    @staticmethod
    def kill(proc: subprocess.Popen) -> None:
        """SIGKILL the process group, then wait until no process of it is left (a JVM still
        dying would hold the metastore the next process opens)."""
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=60)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)

    def close(self) -> None:
        for proc in self.procs:
            self.kill(proc)


@pytest.fixture
def children():
    made: list[Children] = []
    yield lambda project, why: made.append(Children(project, why)) or made[-1]
    for c in made:
        c.close()


# how `--select` names each stream: a routed group by its members' folder
SELECT = {"attributed": "attributed", "by_dept": "path:models/routed"}


def stream(model: str, fault: str | None = None) -> dict:
    step: dict = {"cli": ["run", "--mode", "stream", "--trigger", "available-now", "--select", SELECT[model]]}
    return {**step, "fault": fault} if fault else step


def test_kill_9_at_random_points_of_stream_and_batch_runs_then_a_restart(spark, tmp_path, children):
    seed = int(os.environ.get("SQLFLOW_KILL_SEED") or random.randrange(1 << 30))
    rnd = random.Random(seed)
    killed = rnd.choice(sorted(POINTS))
    point, batch = rnd.choice(POINTS[killed]), rnd.randrange(3)
    if point == "spark_commit":  # reached when the next micro-batch begins
        batch = min(batch, 1)
    why = (f"seed {seed}: stream of `{killed}` killed at `{point}` of micro-batch {batch}, then a "
           "backfill at `batch_sink`")
    project = make_project(
        tmp_path / "p", models={"attributed.sql": SQL, "attributed_copy.sql": SQL,
                                **routed_models("routed", "r_"), **routed_models("copy_routed", "rc_")},
        yml={"sources.yml": ods_sources_yml("ods", imps="imp_ts", clicks="click_ts", events="event_ts")},
        macros={"route.sql": (ROOT / "macros" / "route.sql").read_text()},
        files={"udfs/spmid.py": (ROOT / "udfs" / "spmid.py").read_text()},  # the routing key's UDF
        project_yml={"models": {"testproj": {"routed": routing("by_dept"),
                                             "copy_routed": routing("by_dept_copy")}}},
        profiles_yml=PROFILE)
    imps, clicks = random_rows(seed, n=40, keys=25)
    parts = [in_ingest_chunks(rnd, imps, "ods.imps", IMP_SCHEMA),
             in_ingest_chunks(rnd, clicks, "ods.clicks", CLICK_SCHEMA),
             in_ingest_chunks(rnd, random_events(rnd), "ods.events", EVENT_SCHEMA)]
    rounds: list[list[dict]] = [[], [], []]  # three arrivals, one commit per input, one micro-batch each
    for part in parts:
        for k in range(3):
            chunks = part[k:] if k == 2 else part[k:k + 1]
            table, schema = part[0][0], part[0][2]
            rounds[k].append({"append": [table, schema, rows_json([r for _, rows, _ in chunks for r in rows])]})
    first = []
    for arrival in rounds:
        first += [*arrival, *[stream(m, f"{point}:{batch}" if m == killed else None) for m in sorted(POINTS)]]
    run = children(tmp_path / "p", why)
    times, at = zip(run.run(first, kill=True), strict=True)
    left = [{k: v for k, v in s.items() if k != "fault"} for s in first[at[0] + 1:]]
    restart = [stream(m) for m in sorted(POINTS)]
    backfill = {"cli": ["run", "--mode", "batch", "--select", "attributed_copy"]}
    times += (run.run([*restart, *left, *restart, {**backfill, "fault": "batch_sink:0"}], kill=True)[0],)
    times += (run.run([backfill, {"cli": ["run", "--mode", "batch", "--select", "path:models/copy_routed"]}])[0],)
    print(f"{why}: killed in step {at[0]} of {len(first)}; process wall times "
          f"{[round(t, 1) for t in times]} s")

    warehouse = project / ".sqlflow" / "warehouse" / "dw.db"
    pairs = [("attributed", "attributed_copy", ()),
             ("attributed__quarantine", "attributed_copy__quarantine", ("model", "origin")),
             *[(f"r_{d}", f"rc_{d}", ()) for d in DEPTS],
             ("by_dept__quarantine", "by_dept_copy__quarantine", ("model", "origin"))]
    for got, want, drop in pairs:  # one Spark job a pair: both EXCEPT ALLs and one row of `want`
        g = spark.read.format("delta").load(str(warehouse / got)).drop(*drop)
        w = spark.read.format("delta").load(str(warehouse / want)).drop(*drop)
        tagged = (w.exceptAll(g).withColumn("__diff", F.lit("missing"))
                  .unionByName(g.exceptAll(w).withColumn("__diff", F.lit("unexpected")))
                  .unionByName(w.limit(1).withColumn("__diff", F.lit("want"))))
        rows = tagged.collect()
        missing = [r for r in rows if r["__diff"] == "missing"]
        extra = [r for r in rows if r["__diff"] == "unexpected"]
        assert (missing, extra) == ([], []), f"{why}: {got}: missing {missing}, unexpected {extra}"
        assert any(r["__diff"] == "want" for r in rows), f"{why}: {want} is empty"
