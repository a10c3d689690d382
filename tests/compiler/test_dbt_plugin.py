"""The `dbt_sqlflow` dbt plugin decides, without a JVM, when to register the project's UDFs.

`register` (which builds the SparkSession) is replaced by a recorder here; the real thing is
tests/test_dbt_plain_udfs.py, a separate `dbt run` process.
"""

from __future__ import annotations

from types import SimpleNamespace

import click
import pytest

import dbt_sqlflow


def invoke(tmp_path, monkeypatch, *, which="run", method="session", udfs=True, env=None):
    calls = []
    monkeypatch.setattr(dbt_sqlflow, "register", lambda *args: calls.append(args))
    for key, value in (env or {}).items():
        monkeypatch.setenv(key, value)
    if udfs:
        (tmp_path / "udfs").mkdir(exist_ok=True)
        (tmp_path / "udfs" / "f.py").write_text("")
    creds = SimpleNamespace(type="spark", method=SimpleNamespace(value=method),
                            server_side_parameters={"spark.master": "local[1]"})
    obj = {"flags": SimpleNamespace(WHICH=which, PROJECT_DIR=str(tmp_path)),
           "profile": SimpleNamespace(credentials=creds, target_name="local")}
    with click.Context(click.Command("dbt"), obj=obj):
        dbt_sqlflow.SqlflowUdfs(project_name="p")
    return calls


def test_run_on_a_session_target_registers_the_udfs(tmp_path, monkeypatch):
    assert invoke(tmp_path, monkeypatch) == [
        (tmp_path.resolve(), "local", {"spark.master": "local[1]"})]


@pytest.mark.parametrize("kwargs", [
    {"which": "parse"}, {"which": "ls"}, {"which": "deps"},  # no SQL: no Spark start
    {"method": "thrift"},  # not a session in this process
    {"udfs": False},  # nothing to register
    {"env": {"SQLFLOW_DBT_UDFS": "0"}},  # opted out
])
def test_nothing_happens_when_it_is_not_needed(tmp_path, monkeypatch, kwargs):
    assert invoke(tmp_path, monkeypatch, **kwargs) == []


def test_dbt_discovers_the_plugin():
    from dbt.plugins.manager import PluginManager

    modules = PluginManager.get_prefixed_modules()
    assert modules["dbt_sqlflow"].plugins == [dbt_sqlflow.SqlflowUdfs]
