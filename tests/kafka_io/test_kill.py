"""`kill -9` of a stream run over Kafka at a random point, then a restart: the archive holds
every record once and the model's sink and quarantine equal the batch plan over the archive,
row for row (docs/semantics.md, "Kafka sources"). Real broker, real Spark in a child process."""

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

from helpers import SHORT_JVM, make_project
from kafka_io.kafkakit import SOURCES_YML, STAGING, mixed_records, produce, unique

pytestmark = pytest.mark.spark

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def _profiles(schema: str, state: Path) -> str:
    return f"""\
sqlflow:
  target: local
  outputs:
    local:
      type: spark
      method: session
      host: NA
      schema: {schema}
      server_side_parameters:
        spark.master: "local[1]"
        spark.jars.packages: "io.delta:delta-spark_4.2_2.13:4.4.0,org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0"
        spark.sql.extensions: io.delta.sql.DeltaSparkSessionExtension
        spark.sql.catalog.spark_catalog: org.apache.spark.sql.delta.catalog.DeltaCatalog
        spark.sql.warehouse.dir: {state}/warehouse
        spark.hadoop.javax.jdo.option.ConnectionURL: "jdbc:derby:;databaseName={state}/metastore_db;create=true"
        spark.driver.extraJavaOptions: "-Dderby.system.home={state} {SHORT_JVM}"
        spark.sql.shuffle.partitions: "2"
        spark.sql.session.timeZone: UTC
        spark.ui.enabled: "false"
        spark.databricks.delta.snapshotPartitions: "1"
"""


def _child(args: list[str]) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(HERE)])}
    # its own process group: the kill reaches its JVM too (a JVM left running would go on
    # writing and hold the metastore the restart needs)
    return subprocess.Popen([sys.executable, str(HERE / "killrun.py"), *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


def test_kill_9_midway_and_restart_equals_the_batch(kafka_broker, tmp_path) -> None:
    seed = random.randrange(1_000_000)
    rnd = random.Random(seed)
    schema, topic = unique("kk"), unique("clicks")
    yml = SOURCES_YML.format(schema=schema, topic=topic).replace(
        "max_value_bytes: 200", "max_value_bytes: 200\n              max_offsets_per_trigger: 15")
    state = tmp_path / "state"
    roots = [make_project(tmp_path / m, models={"stg_clicks.sql": STAGING.replace("SCHEMA", schema)},
                          yml={"models/sources.yml": yml}, profiles_yml=_profiles(f"{schema}_{m}", state))
             for m in ("stream", "batch")]
    values, stamps = mixed_records(rnd, 90, 1_764_000_000_000)
    produce(kafka_broker.address, topic, values[:45], partition=0, timestamps_ms=stamps[:45])
    produce(kafka_broker.address, topic, values[45:], partition=1, timestamps_ms=stamps[45:])
    args = [str(roots[0]), str(roots[1]), kafka_broker.address]
    first = _child([*args, "stream"])
    # the kill point: a random moment after the archive query planned its first micro-batch
    offsets = roots[0] / ".sqlflow" / "checkpoints" / f"kafka__{schema}.clicks" / "offsets"
    deadline = time.monotonic() + 600
    while not (offsets.is_dir() and any(offsets.iterdir())) and first.poll() is None:
        assert time.monotonic() < deadline, "the child never started archiving"
        time.sleep(0.2)
    time.sleep(rnd.uniform(0, 6))
    killed = first.poll() is None
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    second = _child([*args, "check"])
    out, _ = second.communicate(timeout=900)
    assert second.returncode == 0, out[-3000:]
    result = json.loads(out.split("RESULT ", 1)[1].splitlines()[0])
    print(f"seed {seed}, killed mid-run: {killed}, {result}")
    assert result["archive"] == {"rows": 90, "distinct": 90}, (seed, result)
    for kind in ("sink", "quarantine"):
        assert (result[kind]["missing"], result[kind]["extra"]) == (0, 0), (seed, kind, result)
        assert result[kind]["rows"] > 0
