"""Secret environment variables (docs/deploy.md, "Secrets"): profiles only, masked everywhere,
and profile values from env vars off the JVM's command line."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from helpers import make_project
from sqlflow.cli import main
from sqlflow.engine.session import deferred_conf, spark_conf
from sqlflow.errors import SqlflowError
from sqlflow.project.profiles import load_target

SECRET = "s3cr3t-AKIA-9932"
PROFILES = """\
sqlflow:
  target: local
  outputs:
    local:
      type: spark
      method: session
      schema: dw
      server_side_parameters:
        spark.master: "local[1]"
        spark.hadoop.fs.s3a.secret.key: "{{ env_var('DBT_ENV_SECRET_S3KEY') }}"
        spark.sql.shuffle.partitions: "{{ env_var('PARTS', '3') }}"
"""


def _cli(root, *args):
    return CliRunner().invoke(main, ["--project-dir", str(root), *args])


@pytest.mark.parametrize("name, prefixes", [("DBT_ENV_SECRET_S3KEY", ""), ("MYCO_TOKEN", "MYCO_")])
def test_a_model_reading_a_secret_is_an_error_and_the_value_goes_nowhere(
        tmp_path, monkeypatch, name, prefixes):
    monkeypatch.setenv("DBT_ENV_SECRET_S3KEY", "profile-only")
    monkeypatch.setenv(name, SECRET)
    monkeypatch.setenv("SQLFLOW_SECRET_ENV_PREFIXES", prefixes)
    root = make_project(tmp_path, models={"m.sql": f"select 1 as a,\n '{{{{ env_var('{name}') }}}}' as k"},
                        profiles_yml=PROFILES)
    for args in (["check"], ["compile", "--mode", "batch"]):
        res = _cli(root, *args)
        assert res.exit_code == 1, res.output
        assert f"models/m.sql:2: error: env_var('{name}'): secret environment variables" in res.output
        assert SECRET not in res.output
    assert not any(SECRET in p.read_text() for p in tmp_path.rglob("*") if p.is_file())


def test_secret_values_are_masked_in_output_and_artefacts(tmp_path, monkeypatch):
    monkeypatch.setenv("DBT_ENV_SECRET_S3KEY", SECRET)
    root = make_project(tmp_path, models={"m.sql": "select '{{ var(\"k\") }}' as k"},
                        profiles_yml=PROFILES)
    res = _cli(root, "compile", "--mode", "batch", "--vars", f"{{k: {SECRET}}}")
    assert res.exit_code == 0, res.output
    assert "'*****' AS k" in res.output and SECRET not in res.output
    written = [p for p in (root / "target" / "sqlflow").rglob("*") if p.is_file()]
    assert written and not any(SECRET in p.read_text() for p in written)
    bad = _cli(root, "compile", "--mode", "batch", "--vars", f"{{k: {SECRET}}}", "--select", "nosuch_" + SECRET)
    assert bad.exit_code != 0 and SECRET not in bad.output and SECRET not in str(bad.exception or "")


def test_profile_values_from_env_vars_are_set_after_the_jvm_starts(tmp_path, monkeypatch):
    monkeypatch.setenv("DBT_ENV_SECRET_S3KEY", SECRET)
    root = make_project(tmp_path, profiles_yml=PROFILES)
    target = load_target(root, "sqlflow")
    conf = spark_conf(target, root)
    later = deferred_conf(target, conf)
    assert later == {"spark.hadoop.fs.s3a.secret.key": SECRET, "spark.sql.shuffle.partitions": "3"}
    assert "spark.master" not in later  # launch-only, from no env var: on the command line


def test_a_launch_only_setting_from_a_secret_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("DBT_ENV_SECRET_MASTER", SECRET)
    monkeypatch.setenv("DBT_ENV_SECRET_S3KEY", "x")
    root = make_project(tmp_path, profiles_yml=PROFILES.replace('"local[1]"', "\"{{ env_var('DBT_ENV_SECRET_MASTER') }}\""))
    target = load_target(root, "sqlflow")
    with pytest.raises(SqlflowError) as err:
        deferred_conf(target, spark_conf(target, root))
    assert "`spark.master` reads the secret `DBT_ENV_SECRET_MASTER`" in str(err.value)
    assert SECRET not in str(err.value)


@pytest.mark.spark
def test_deferred_settings_reach_the_running_session(spark, tmp_path, monkeypatch):
    from sqlflow.engine.session import set_after_start

    monkeypatch.setenv("DBT_ENV_SECRET_S3KEY", SECRET)
    target = load_target(make_project(tmp_path, profiles_yml=PROFILES), "sqlflow")
    set_after_start(spark, target, {"spark.hadoop.fs.sqlflowtest.key": "v1"})
    assert spark.sparkContext._jsc.hadoopConfiguration().get("fs.sqlflowtest.key") == "v1"
    assert spark.conf.get("spark.hadoop.fs.sqlflowtest.key") == "v1"


def test_sqlflow_log_records_are_masked(monkeypatch, caplog):
    import logging

    from sqlflow.secrets import install_log_masking

    monkeypatch.setenv("DBT_ENV_SECRET_S3KEY", SECRET)
    install_log_masking()
    with caplog.at_level(logging.INFO, logger="sqlflow.rendering.render"):
        logging.getLogger("sqlflow.rendering.render").info("model said %s", SECRET)
    assert caplog.messages == ["model said *****"]
