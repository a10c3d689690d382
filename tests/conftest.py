"""Shared fixtures. One SparkSession per test run: Spark is slow to start on two cores.

Spark tests use a warehouse and Derby metastore under a per-run temp folder, never the
project's own `.sqlflow/` state, so a test run and a demo run can share a checkout.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from helpers import LONG_JVM
from spark_servers import (  # noqa: F401  (session fixtures)
    connect_launch,
    connect_server,
    standalone_cluster,
    standalone_launch,
)

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def project_dir() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def spark_state(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("spark_state")


@pytest.fixture(scope="session")
def spark(spark_state):
    """The one SparkSession of the test run: local target of profiles.yml, state in tmp."""
    from sqlflow.engine.session import build_session
    from sqlflow.project.profiles import load_target

    target = load_target(ROOT, "sqlflow", "local")
    overrides = {
        "spark.master": "local[2]",
        "spark.sql.warehouse.dir": str(spark_state / "warehouse"),
        "spark.hadoop.javax.jdo.option.ConnectionURL":
            f"jdbc:derby:;databaseName={spark_state / 'metastore_db'};create=true",
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={spark_state} {LONG_JVM}",
        "spark.sql.shuffle.partitions": "2",
        "spark.driver.memory": "3g",
        # Expressions interpreted, not compiled to Java (README, "Tests"): the same plans and
        # rows; each of the thousands of small queries here compiled its own classes. So does
        # sqlflow itself for a small backfill or micro-batch (`runtime/small_plan.py`); the
        # `sqlflow` processes of the cluster, Connect and kill -9 tests keep the profile's code
        # generation for the rest (the stateful and dimension-join micro-batches), and
        # tests/runtime/test_batch_run.py runs a backfill compiled.
        "spark.sql.codegen.wholeStage": "false",
        "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    }
    # Under pytest-xdist two workers start their sessions at once (and the cluster tests start
    # `sqlflow` processes and a Connect server beside them): the first resolves the Maven
    # packages with Ivy, the others wait for it and start from the jars it recorded, never
    # two Ivy runs in one cache at a time (sqlflow.engine.jars.resolving).
    session = build_session(target, ROOT, overrides)
    yield session
    session.stop()


# Test folders whose files share a server started once per session (a Kafka broker, a
# standalone cluster and a Connect server): under xdist each folder runs on one worker.
_SHARED_SERVER_GROUPS = {"kafka_io": "kafka", "cluster": "cluster"}
# the slowest groups, started first so no worker is left with one of them at the end
_SLOW_FIRST = ("cluster", "kafka", "test_dbt_parity.py", "test_dbt_project_parity.py", "test_dbt_incremental.py",
               "runtime/test_routing.py", "test_demo_data.py")


def _group(nodeid: str) -> str:
    """The xdist work unit of a test: its file (module-scoped fixtures run once), or the
    shared server's group.

    >>> _group("tests/kafka_io/test_archive.py::test_x"), _group("tests/runtime/test_a.py::t[1]")
    ('kafka', 'runtime/test_a.py')
    """
    parts = nodeid.split("::")[0].split("/")[1:]  # the path below tests/
    for part in parts:
        if part in _SHARED_SERVER_GROUPS:
            return _SHARED_SERVER_GROUPS[part]
    return "/".join(parts)


def pytest_xdist_make_scheduler(config, log):
    """`-n 2 --dist loadscope` (pyproject.toml) with our work units: each unit runs whole on one
    worker, in collection order (`--no-loadscope-reorder`)."""
    from xdist.scheduler import LoadScopeScheduling

    class ByGroup(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _group(nodeid)

    return ByGroup(config, log)


def _order(item) -> tuple[int, int]:
    group = _group(item.nodeid)
    slow = next((i for i, g in enumerate(_SLOW_FIRST) if g == group), len(_SLOW_FIRST))
    return (1 if item.get_closest_marker("spark") else 0, slow)


def _unit_rank(group: str, spark_groups: set[str]) -> int:
    """Under xdist, where a work unit goes in the queue: the cluster unit first (the longest
    by far, one worker for all of it: started last it ends last), then the units without a
    JVM test (a compiler regression still shows first, on the other worker), then the rest.
    A unit is queued where its first test is.

    >>> [_unit_rank(g, {"cluster", "kafka"}) for g in ("kafka", "compiler/test_dag.py", "cluster")]
    [2, 1, 0]
    """
    return 0 if group == "cluster" else 2 if group in spark_groups else 1


def pytest_collection_modifyitems(config, items):
    # A test that uses the shared session, directly or through a fixture, needs a JVM: mark it
    # `spark`, so `-m "not spark"` runs the compiler alone, whether or not its file says so.
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)
    # Run the JVM-free tests first: a compiler regression shows up before Spark starts. Among
    # the Spark tests the slowest groups go first (a stable sort keeps each file's order).
    items.sort(key=_order)
    if os.environ.get("PYTEST_XDIST_WORKER"):  # (a worker's own `dist` option says "no")
        spark_groups = {_group(i.nodeid) for i in items if i.get_closest_marker("spark")}
        items.sort(key=lambda i: _unit_rank(_group(i.nodeid), spark_groups))


@pytest.fixture
def ansi_mode(spark):
    """Spark's ANSI mode on for one test (a cast of a bad string fails): dbt-spark turns it off
    on the shared session (its `server_side_parameters` force `spark.sql.ansi.enabled=false`),
    and the dbt tests run in this process before the runtime's."""
    before = spark.conf.get("spark.sql.ansi.enabled")
    spark.conf.set("spark.sql.ansi.enabled", "true")
    yield
    spark.conf.set("spark.sql.ansi.enabled", before)
