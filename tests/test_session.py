"""Profiles, the SparkSession built from them, and a Delta round trip."""

from __future__ import annotations

import datetime as dt

import pytest

from sqlflow.engine.session import CHECKPOINT_FILES, SESSION_DEFAULTS, spark_conf, with_defaults
from sqlflow.errors import SqlflowError
from sqlflow.project.profiles import load_target


def test_local_target_is_default(project_dir):
    target = load_target(project_dir, "sqlflow")
    assert target.name == "local"
    conf = spark_conf(target, project_dir)
    assert conf["spark.sql.warehouse.dir"] == str(project_dir / ".sqlflow" / "warehouse")
    assert f"databaseName={project_dir}/.sqlflow/metastore_db;" in conf[
        "spark.hadoop.javax.jdo.option.ConnectionURL"]
    assert conf["spark.sql.shuffle.partitions"] == "4"


def test_cluster_target_reads_master_from_env(project_dir, monkeypatch):
    monkeypatch.setenv("SQLFLOW_SPARK_MASTER", "spark://10.0.0.7:7077")
    target = load_target(project_dir, "sqlflow", "cluster")
    assert target.server_side_parameters["spark.master"] == "spark://10.0.0.7:7077"
    # the anchor carries the Delta settings over from `local`
    assert "DeltaCatalog" in target.server_side_parameters["spark.sql.catalog.spark_catalog"]


def test_connect_target(project_dir, monkeypatch):
    monkeypatch.setenv("SQLFLOW_SPARK_REMOTE", "sc://127.0.0.1:15999")
    target = load_target(project_dir, "sqlflow", "connect")
    assert target.is_connect
    assert target.server_side_parameters["spark.remote"] == "sc://127.0.0.1:15999"


DEBUGGING = "spark.python.sql.dataFrameDebugging.enabled"


def test_a_classic_session_records_no_python_call_sites_unless_the_profile_asks(project_dir, monkeypatch):
    local = load_target(project_dir, "sqlflow")
    conf = spark_conf(local, project_dir)
    assert DEBUGGING not in conf and with_defaults(local, conf)[DEBUGGING] == "false"
    assert with_defaults(local, {**conf, DEBUGGING: "true"})[DEBUGGING] == "true"
    monkeypatch.setenv("SQLFLOW_SPARK_REMOTE", "sc://127.0.0.1:15999")
    connect = load_target(project_dir, "sqlflow", "connect")
    assert DEBUGGING not in with_defaults(connect, spark_conf(connect, project_dir))


@pytest.mark.spark
def test_the_session_is_built_with_sqlflows_defaults(spark):
    from pyspark.errors.utils import is_debugging_enabled

    assert all(spark.conf.get(k) == v for k, v in SESSION_DEFAULTS.items())
    assert not is_debugging_enabled()  # what PySpark's column functions ask before each call


@pytest.mark.spark
def test_a_stream_checkpoint_is_written_through_the_file_system_api(spark, tmp_path):
    """Spark's checkpoint files go through Hadoop's FileSystem API (one rename a file), not its
    FileContext (ten `readlink`/`chmod` processes a file without Hadoop's native library):
    the manager Spark builds for a checkpoint folder, from the session's settings."""
    jvm = spark._jvm
    manager = jvm.org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager.create(
        jvm.org.apache.hadoop.fs.Path(str(tmp_path / "checkpoint")),
        spark._jsparkSession.sessionState().newHadoopConf())
    assert manager.getClass().getName() == SESSION_DEFAULTS[CHECKPOINT_FILES]
    assert manager.getClass().getSimpleName() == "FileSystemBasedCheckpointFileManager"


def test_unknown_target_suggests_closest(project_dir):
    with pytest.raises(SqlflowError) as err:
        load_target(project_dir, "sqlflow", "locl")
    msg = str(err.value)
    assert "profiles/profiles.yml" in msg and "unknown target `locl`" in msg
    assert "did you mean `local`?" in msg


def test_bad_profile_is_one_line(tmp_path):
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "profiles.yml").write_text(
        "sqlflow:\n  target: x\n  outputs:\n    x: {type: postgres, method: session, schema: a}\n")
    with pytest.raises(SqlflowError) as err:
        load_target(tmp_path, "sqlflow")
    assert "not a dbt-spark session target" in str(err.value)
    assert "\n" not in str(err.value)


def test_missing_java_is_a_user_error(monkeypatch):
    from sqlflow.engine import session

    monkeypatch.setenv("JAVA_HOME", "/nonexistent/java")
    with pytest.raises(SqlflowError) as err:
        session.check_java()
    assert "Java was not found" in str(err.value) and "JAVA_HOME" in str(err.value)


def test_delta_round_trip(spark, tmp_path):
    rows = [(1, "a", dt.datetime(2026, 11, 1, 0, 0, 0, 1)), (2, None, None)]
    df = spark.createDataFrame(rows, "id int, name string, ts timestamp")
    path = str(tmp_path / "t")
    df.write.format("delta").partitionBy("id").save(path)
    back = spark.read.format("delta").load(path)
    assert sorted(back.select("id", "name", "ts").collect()) == sorted(df.collect())
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()
    assert history[0]["operation"] == "WRITE"


def test_managed_delta_table_in_metastore(spark):
    spark.sql("CREATE DATABASE IF NOT EXISTS t_meta")
    spark.sql("CREATE OR REPLACE TABLE t_meta.x (a INT) USING delta")
    spark.sql("INSERT INTO t_meta.x VALUES (1), (2)")
    assert sorted(r.a for r in spark.table("t_meta.x").collect()) == [1, 2]
    detail = spark.sql("DESCRIBE DETAIL t_meta.x").collect()[0]
    assert detail["format"] == "delta"
