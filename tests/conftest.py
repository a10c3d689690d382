"""Shared fixtures. One SparkSession per test run: Spark is slow to start on two cores.

Spark tests use a warehouse and Derby metastore under a per-run temp folder, never the
project's own `.sqlflow/` state, so a test run and a demo run can share a checkout.
"""

from __future__ import annotations

from pathlib import Path

import pytest

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
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={spark_state}",
        "spark.sql.shuffle.partitions": "2",
        "spark.driver.memory": "2g",
    }
    session = build_session(target, ROOT, overrides)
    yield session
    session.stop()


def pytest_collection_modifyitems(config, items):
    # A test that uses the shared session, directly or through a fixture, needs a JVM: mark it
    # `spark`, so `-m "not spark"` runs the compiler alone, whether or not its file says so.
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)
    # Run the JVM-free tests first: a compiler regression shows up before Spark starts.
    items.sort(key=lambda item: 1 if item.get_closest_marker("spark") else 0)


@pytest.fixture
def ansi_mode(spark):
    """Spark's ANSI mode on for one test (a cast of a bad string fails): dbt-spark turns it off
    on the shared session (its `server_side_parameters` force `spark.sql.ansi.enabled=false`),
    and the dbt tests run in this process before the runtime's."""
    before = spark.conf.get("spark.sql.ansi.enabled")
    spark.conf.set("spark.sql.ansi.enabled", "true")
    yield
    spark.conf.set("spark.sql.ansi.enabled", before)
