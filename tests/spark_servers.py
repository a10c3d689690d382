"""Spark servers started once per test session from the pyspark install (`bin/spark-class`):
a standalone master with two workers (the `cluster` target) and a Spark Connect server with
the Delta jars and extensions (the `connect` target). docs/deploy.md, "What is tested here".

Each is a JVM of its own, small (a worker: 1 core, 1g). A server that cannot start (a busy
port, a missing script, no worker registering) fails the tests that need it with its log's
tail: it never skips them.

Starting is split from waiting (`Launch`): `standalone_launch` / `connect_launch` start the
processes and return at once, `standalone_cluster` / `connect_server` wait until they accept
work. tests/cluster/conftest.py launches both (and the local reference run) at its first
test, so the JVMs come up while other work runs instead of one after the other.
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

from helpers import LONG_JVM
from sqlflow.engine.session import CHECKPOINT_FILES, CODEGEN_CACHE, CODEGEN_IDS, SESSION_DEFAULTS

SPARK_HOME = Path(pyspark.__file__).parent
SPARK_CLASS = SPARK_HOME / "bin" / "spark-class"
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


def _fast_python(folder: Path) -> Path:
    """A PYSPARK_PYTHON for the Connect server: this interpreter, importing pyspark from its
    install (compiled once) instead of from the `pyspark.zip` Spark puts first on a worker's
    PYTHONPATH (compiled again at every start, zip imports keep no bytecode). Spark 4.2 waits
    10 s, hard-coded (`PythonWorkerFactory.createSimpleWorker`), for a `foreachBatch` worker to
    connect back; importing what it needs took 7.5 s from the zip on the loaded test machine,
    2.5 s from the install (docs/deploy.md, "Spark Connect")."""
    script = folder / "python"
    script.write_text("#!/bin/sh\n"
                      "PYTHONPATH=$(printf '%s' \"$PYTHONPATH\" | tr ':' '\\n' | grep -v 'pyspark[.]zip$' | paste -sd: -)\n"
                      f"export PYTHONPATH\nexec '{sys.executable}' \"$@\"\n")
    script.chmod(0o755)
    return script


class _Procs:
    def __init__(self, folder: Path, env: dict[str, str] | None = None):
        self.folder = folder
        self.env = {**_env(), **(env or {})}
        self.procs: list[subprocess.Popen] = []
        self.logs: list[Path] = []

    def start(self, name: str, args: list[str]) -> subprocess.Popen:
        log = self.folder / f"{name}.log"
        self.logs.append(log)
        with open(log, "w") as out:
            proc = subprocess.Popen([str(SPARK_CLASS), *args], env=self.env, stdout=out,
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


class Launch:
    """Servers started in the background: `ready()` waits (once) until they accept work and
    returns the `Server`, or fails the test with the logs' tails."""

    def __init__(self, procs: _Procs, url: str, what: str, ready, seconds: float):
        self.procs, self.url, self.what, self._ready, self.seconds = procs, url, what, ready, seconds
        self.began = time.time()
        self._server: Server | None = None

    def ready(self) -> Server:
        if self._server is None:
            waited = not self._ready()
            self.procs.wait_until(self.what, self._ready, self.seconds)
            self._server = Server(self.url, self.procs.folder, time.time() - self.began, self.procs.logs)
            print(f"\n{self.what}: " + (f"up in {self._server.start_seconds:.1f}s" if waited else
                                         f"up, launched {self._server.start_seconds:.1f}s before it was needed"))
        return self._server


@pytest.fixture(scope="session")
def standalone_launch(tmp_path_factory):
    """Start a standalone master on 127.0.0.1 and two workers (1 core, 1g each) without
    waiting for them; the workers retry until the master listens. Its state folder is a path
    the driver and both workers see (one machine)."""
    folder = tmp_path_factory.mktemp("standalone")
    procs = _Procs(folder)
    port, ui = free_port(), free_port()
    url = f"spark://127.0.0.1:{port}"
    try:
        procs.start("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                               "--port", str(port), "--webui-port", str(ui)])
        for i in range(WORKERS):
            procs.start(f"worker{i}", ["org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
                                       "--cores", "1", "--memory", "1g", "--webui-port", str(free_port()),
                                       "--work-dir", str(folder / f"work{i}")])
        yield Launch(procs, url, f"the standalone master {url} and {WORKERS} workers",
                     lambda: _alive_workers(ui) == WORKERS, 600)
    finally:
        procs.stop()


@pytest.fixture(scope="session")
def standalone_cluster(standalone_launch):
    """The standalone master with two workers, for every `cluster` test of the session,
    once it accepts work; a `Server` whose url is `spark://127.0.0.1:<port>`."""
    return standalone_launch.ready()


CONNECT_CONF = {
    "spark.master": "local[2]",
    "spark.driver.memory": "1g",
    "spark.connect.grpc.binding.address": "127.0.0.1",
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.sql.catalogImplementation": "hive",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.enabled": "false",
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.sql.sources.partitionOverwriteMode": "dynamic",
    # `_SUCCESS` markers over Connect: the server creates them (`copyFromLocalToFs`), on its
    # local file system only when allowed (docs/deploy.md, "Spark Connect")
    "spark.sql.artifact.copyFromLocalToFs.allowDestLocal": "true",
    # checkpoint files without a process per file, as a classic session writes them
    # (`engine/session.SESSION_DEFAULTS`)
    CHECKPOINT_FILES: SESSION_DEFAULTS[CHECKPOINT_FILES],
    # the code generation settings docs/deploy.md tells a Connect server's operator to start
    # it with (`engine/session.SESSION_DEFAULTS`): a classic session sets them itself
    CODEGEN_IDS: SESSION_DEFAULTS[CODEGEN_IDS],
    CODEGEN_CACHE: SESSION_DEFAULTS[CODEGEN_CACHE],
}


def _profile_jars() -> dict[str, str]:
    """The `local` target's packages (Delta, Kafka) as the jars the session fixture resolved
    and recorded (sqlflow.engine.jars): a server started with them runs no Ivy of its own,
    never beside another in one cache."""
    from sqlflow.engine import jars
    from sqlflow.project.profiles import load_target

    root = Path(__file__).resolve().parents[1]
    packages = load_target(root, "sqlflow", "local").server_side_parameters[jars.PACKAGES]
    return jars.resolved({jars.PACKAGES: packages}, pyspark.__version__)


@pytest.fixture(scope="session")
def connect_launch(tmp_path_factory, spark):
    """Start a Spark Connect server (local[2], 1g) with Delta's extension and catalog and a
    Hive catalog in a Derby metastore, all under its own temp folder, without waiting for it.
    Its Python workers run this interpreter (sqlflow importable), pyspark from its install.
    It starts after the session fixture, which resolves the jars it is given."""
    folder = tmp_path_factory.mktemp("connect")
    procs = _Procs(folder, {"PYSPARK_PYTHON": str(_fast_python(folder))})
    port = free_port()
    conf = {
        **CONNECT_CONF,
        **_profile_jars(),
        "spark.connect.grpc.binding.port": str(port),
        "spark.sql.warehouse.dir": str(folder / "warehouse"),
        "spark.hadoop.javax.jdo.option.ConnectionURL":
            f"jdbc:derby:;databaseName={folder / 'metastore_db'};create=true",
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={folder} {LONG_JVM}",
    }
    args = ["org.apache.spark.deploy.SparkSubmit", "--class",
            "org.apache.spark.sql.connect.service.SparkConnectServer", "--name", "sqlflow-connect"]
    for key, value in conf.items():
        args += ["--conf", f"{key}={value}"]
    try:
        procs.start("connect", [*args, "spark-internal"])
        yield Launch(procs, f"sc://127.0.0.1:{port}", f"the Spark Connect server on port {port}",
                     lambda: _listening(port), 600)
    finally:
        procs.stop()


@pytest.fixture(scope="session")
def connect_server(connect_launch):
    """The Spark Connect server once it listens; a `Server` whose url is `sc://127.0.0.1:<port>`."""
    return connect_launch.ready()
