"""A single-node Kafka broker on this machine, no Docker (`sqlflow kafka up|down`, docs/design.md §4).

The Apache Kafka jars (`org.apache.kafka:kafka_2.13`) are resolved once from Maven Central by
the Ivy jar PySpark ships, into Ivy's cache (the one Spark's `spark.jars.packages` uses), and
retrieved to a folder next to it; later starts run offline. The broker is one JVM running
`kafka.Kafka` in KRaft mode (broker and controller in one process) on 127.0.0.1, its state,
`server.properties`, log and pid file under `<state>/kafka/` (the project's `.sqlflow/kafka/`).
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from sqlflow.engine import jars
from sqlflow.errors import SqlflowError

KAFKA_VERSION = "4.1.1"
DEFAULT_PORT = 9092
HOST = "127.0.0.1"
_MAIN = "kafka.Kafka"
_FORMAT = "kafka.tools.StorageTool"
_LOG4J = """<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="OFF">
  <Appenders><File name="file" fileName="{log}"><PatternLayout pattern="%d %p %c{{1}} %m%n"/></File></Appenders>
  <Loggers><Root level="WARN"><AppenderRef ref="file"/></Root></Loggers>
</Configuration>
"""


def ivy_home() -> Path:
    """Spark's Ivy folder (`spark.jars.ivy`'s default for Spark 4), the one whose cache and
    lock (`jars.resolving`) the Spark starts use; `SQLFLOW_IVY_HOME` names another."""
    folder = os.environ.get("SQLFLOW_IVY_HOME")
    return Path(folder) if folder else jars.ivy_dir({})


def _java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if not java:
        raise SqlflowError("Java was not found; the Kafka broker needs Java 17 or newer",
                           hint="install it (e.g. `apt-get install openjdk-17-jre-headless`) "
                                "or set JAVA_HOME")
    return java


def kafka_jars(version: str = KAFKA_VERSION) -> Path:
    """The folder holding the broker's jars, resolved from Maven Central on first use."""
    folder = ivy_home() / f"sqlflow-kafka_2.13-{version}"
    if (folder / ".complete").is_file():
        return folder
    import pyspark

    ivy = next((Path(pyspark.__file__).parent / "jars").glob("ivy-*.jar"), None)
    if ivy is None:
        raise SqlflowError("PySpark's Ivy jar was not found; it resolves the Kafka jars",
                           hint="reinstall pyspark (pip install -e '.[dev]')")
    folder.mkdir(parents=True, exist_ok=True)
    cmd = [_java(), "-jar", str(ivy), "-dependency", "org.apache.kafka", "kafka_2.13", version,
           "-confs", "default", "-cache", str(ivy_home() / "cache"),
           "-retrieve", str(folder / "[artifact]-[revision](-[classifier]).[ext]")]
    with jars.resolving(ivy_home()):  # never beside another Ivy run in this cache
        if (folder / ".complete").is_file():  # another process resolved them while we waited
            return folder
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
            raise SqlflowError(f"the Kafka {version} jars could not be resolved from Maven Central: "
                               + " / ".join(tail),
                               hint="check the network access to repo1.maven.org (once; then cached)")
        (folder / ".complete").write_text(version)
    return folder


@dataclass(frozen=True)
class Broker:
    """A broker's state folder and port; `address` is what clients bootstrap from."""

    folder: Path
    port: int = DEFAULT_PORT

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def pid_file(self) -> Path:
        return self.folder / "broker.pid"

    @property
    def log_file(self) -> Path:
        return self.folder / "broker.log"

    def pid(self) -> int | None:
        """The running broker's process id, None when none runs from this folder."""
        try:
            pid = int(self.pid_file.read_text().split()[0])
            os.kill(pid, 0)
        except (OSError, ValueError, IndexError):
            return None
        return pid


def running(folder: Path) -> Broker | None:
    """The broker started from `folder` if it still runs."""
    try:
        port = int((folder / "broker.pid").read_text().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    broker = Broker(folder, port)
    return broker if broker.pid() else None


def free_port() -> int:
    """A free port on 127.0.0.1 whose next port is free too (the broker's controller listens
    on port + 1): for a broker of tests and benchmarks."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind((HOST, 0))
            port = s.getsockname()[1]
        with socket.socket() as s:
            try:
                s.bind((HOST, port + 1))
            except OSError:
                continue
        return port
    raise RuntimeError("no two free ports in a row")


def reachable(address: str, timeout: float = 1.0) -> bool:
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


def start(folder: Path, port: int = DEFAULT_PORT, *, wait_s: float = 60.0) -> Broker:
    """Start a broker from `folder` on `port` (a running one there is returned as it is)."""
    folder = folder.resolve()
    already = running(folder)
    if already:
        return already
    broker = Broker(folder, port)
    if reachable(broker.address):
        raise SqlflowError(f"port {port} on {HOST} is taken by another program",
                           hint="stop it, or start the broker on another port "
                                "(`sqlflow kafka up --port 19092`)")
    jars = kafka_jars()
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / "data"
    props = folder / "server.properties"
    props.write_text(_properties(port, data))
    (folder / "log4j2.xml").write_text(_LOG4J.format(log=broker.log_file))
    java = [_java(), "-Xms256m", "-Xmx512m", "-XX:+UseSerialGC",
            f"-Dlog4j2.configurationFile={folder / 'log4j2.xml'}", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-cp", f"{jars}/*"]
    if not (data / "meta.properties").is_file():
        cluster = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        fmt = subprocess.run([*java, _FORMAT, "format", f"--cluster-id={cluster}", "-c", str(props),
                              "--standalone"], capture_output=True, text=True)
        if fmt.returncode != 0:
            raise SqlflowError(f"formatting the broker's storage in {data} failed: "
                               f"{(fmt.stdout + fmt.stderr).strip().splitlines()[-1:]}",
                               hint=f"remove {data} and run `sqlflow kafka up` again")
    with open(folder / "broker.out", "ab") as out:
        proc = subprocess.Popen([*java, _MAIN, str(props)], stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    broker.pid_file.write_text(f"{proc.pid} {port}\n")
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            broker.pid_file.unlink(missing_ok=True)
            raise SqlflowError(f"the Kafka broker exited at start (code {proc.returncode})",
                               hint=f"see {broker.log_file} and {folder / 'broker.out'}")
        if reachable(broker.address, 0.5):
            return broker
        time.sleep(0.3)
    stop(folder)
    raise SqlflowError(f"the Kafka broker did not open {broker.address} within {wait_s:.0f} s",
                       hint=f"see {broker.log_file}")


def stop(folder: Path, *, wait_s: float = 30.0) -> Broker | None:
    """Stop the broker started from `folder` (SIGTERM: a clean shutdown; SIGKILL after
    `wait_s`). Returns it, or None when none ran."""
    broker = running(folder.resolve())
    if broker is None:
        return None
    pid = broker.pid()
    assert pid is not None
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and broker.pid():
        _reap(pid)
        time.sleep(0.2)
    if broker.pid():
        os.kill(pid, signal.SIGKILL)
        _reap(pid)
    broker.pid_file.unlink(missing_ok=True)
    return broker


def _reap(pid: int) -> None:
    """Collect a broker this process started, so it does not linger as a zombie."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def _properties(port: int, data: Path) -> str:
    controller = port + 1
    return "\n".join([
        "process.roles=broker,controller",
        "node.id=1",
        f"controller.quorum.bootstrap.servers={HOST}:{controller}",
        f"listeners=PLAINTEXT://{HOST}:{port},CONTROLLER://{HOST}:{controller}",
        f"advertised.listeners=PLAINTEXT://{HOST}:{port}",
        "controller.listener.names=CONTROLLER",
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "inter.broker.listener.name=PLAINTEXT",
        f"log.dirs={data}",
        "num.partitions=2",
        "offsets.topic.replication.factor=1",
        "offsets.topic.num.partitions=1",
        "transaction.state.log.replication.factor=1",
        "transaction.state.log.min.isr=1",
        "share.coordinator.state.topic.replication.factor=1",
        "group.initial.rebalance.delay.ms=0",
        # a dev broker keeps its records: the archive, not retention, is the history
        "log.retention.hours=-1",
        "",
    ])
