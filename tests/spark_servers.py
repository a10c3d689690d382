"""Spark servers started once per test session from the pyspark install (`bin/spark-class`):
a standalone master with two workers (the `cluster` target) and a Spark Connect server with
the Delta jars and extensions (the `connect` target). docs/deploy.md, "What is tested here".

Each is a JVM of its own, small (a worker: 1 core, 1g). A server that cannot start (a busy
port, a missing script, no worker registering) fails the tests that need it with its log's
tail: it never skips them.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pyspark
import pytest

SPARK_HOME = Path(pyspark.__file__).parent
SPARK_CLASS = SPARK_HOME / "bin" / "spark-class"
DELTA_PACKAGE = "io.delta:delta-spark_4.2_2.13:4.4.0"  # the version profiles/profiles.yml uses
WORKERS = 2


@dataclass
class Server:
    """A running server: its URL, its state folder, how long it took to accept work."""

    url: str
    state: Path
    start_seconds: float
    logs: list[Path] = field(default_factory=list)

    def log_tail(self, chars: int = 3000) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-chars:]}"
                         for p in self.logs if p.exists())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env() -> dict[str, str]:
    # the servers' Python workers run this interpreter, where sqlflow and the UDFs' imports live
    return {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_NO_DAEMONIZE": "1",
            "PYSPARK_PYTHON": sys.executable, "SPARK_HOME": str(SPARK_HOME)}


class _Procs:
    def __init__(self, folder: Path):
        self.folder = folder
        self.procs: list[subprocess.Popen] = []
        self.logs: list[Path] = []

    def start(self, name: str, args: list[str]) -> subprocess.Popen:
        log = self.folder / f"{name}.log"
        self.logs.append(log)
        with open(log, "w") as out:
            proc = subprocess.Popen([str(SPARK_CLASS), *args], env=_env(), stdout=out,
                                    stderr=subprocess.STDOUT, cwd=self.folder)
        self.procs.append(proc)
        return proc

    def fail(self, what: str) -> None:
        tails = "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-2500:]}" for p in self.logs)
        pytest.fail(f"{what}\n{tails}", pytrace=False)

    def wait_until(self, what: str, ready, seconds: float) -> None:
        deadline = time.time() + seconds
        while time.time() < deadline:
            dead = [p for p in self.procs if p.poll() is not None]
            if dead:
                self.fail(f"{what}: a server exited with code {dead[0].returncode}")
            if ready():
                return
            time.sleep(0.5)
        self.fail(f"{what}: not ready after {seconds:.0f}s")

    def stop(self) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _alive_workers(ui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as r:
            state = json.load(r)
    except OSError:
        return 0
    return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")


@pytest.fixture(scope="session")
def standalone_cluster(tmp_path_factory):
    """A standalone master on 127.0.0.1 with two workers (1 core, 1g each), for every
    `cluster` test of the session; yields a `Server` whose url is `spark://127.0.0.1:<port>`.
    Its state folder is a path the driver and both workers see (one machine)."""
    folder = tmp_path_factory.mktemp("standalone")
    procs = _Procs(folder)
    began = time.time()
    port, ui = free_port(), free_port()
    try:
        procs.start("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                               "--port", str(port), "--webui-port", str(ui)])
        procs.wait_until(f"the standalone master on port {port}", lambda: _listening(ui), 90)
        url = f"spark://127.0.0.1:{port}"
        for i in range(WORKERS):
            procs.start(f"worker{i}", ["org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
                                       "--cores", "1", "--memory", "1g", "--webui-port", str(free_port()),
                                       "--work-dir", str(folder / f"work{i}")])
        procs.wait_until(f"{WORKERS} workers registered with {url}",
                         lambda: _alive_workers(ui) == WORKERS, 90)
        server = Server(url, folder, time.time() - began, procs.logs)
        print(f"\nstandalone master and {WORKERS} workers up in {server.start_seconds:.1f}s")
        yield server
    finally:
        procs.stop()


@pytest.fixture(scope="session")
def connect_server(tmp_path_factory):
    """A Spark Connect server (local[2], 1g) with Delta's extension and catalog and a Hive
    catalog in a Derby metastore, all under its own temp folder; yields a `Server` whose url
    is `sc://127.0.0.1:<port>`. Its Python workers run this interpreter (sqlflow importable)."""
    folder = tmp_path_factory.mktemp("connect")
    procs = _Procs(folder)
    began = time.time()
    port = free_port()
    conf = {
        "spark.master": "local[2]",
        "spark.driver.memory": "1g",
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.jars.packages": DELTA_PACKAGE,
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.sql.catalogImplementation": "hive",
        "spark.sql.warehouse.dir": str(folder / "warehouse"),
        "spark.hadoop.javax.jdo.option.ConnectionURL":
            f"jdbc:derby:;databaseName={folder / 'metastore_db'};create=true",
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={folder}",
        "spark.sql.shuffle.partitions": "2",
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.enabled": "false",
        "spark.databricks.delta.snapshotPartitions": "2",
        "spark.sql.sources.partitionOverwriteMode": "dynamic",
    }
    args = ["org.apache.spark.deploy.SparkSubmit", "--class",
            "org.apache.spark.sql.connect.service.SparkConnectServer", "--name", "sqlflow-connect"]
    for key, value in conf.items():
        args += ["--conf", f"{key}={value}"]
    try:
        procs.start("connect", [*args, "spark-internal"])
        procs.wait_until(f"the Spark Connect server on port {port}", lambda: _listening(port), 120)
        server = Server(f"sc://127.0.0.1:{port}", folder, time.time() - began, procs.logs)
        print(f"\nSpark Connect server up in {server.start_seconds:.1f}s")
        yield server
    finally:
        procs.stop()
