"""yml that would silently change results: a key written twice is an error naming both lines;
properties of a model without a .sql file are a warning, as in dbt."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from helpers import make_project
from sqlflow.cli import main
from sqlflow.errors import SqlflowError
from sqlflow.project.load import load_project
from sqlflow.project.profiles import load_target

SOURCES = """\
version: 2
sources:
  - name: ods
    schema: ods
    tables:
      - name: clicks
        meta:
          sqlflow:
            event_time: click_ts
            ingest_time: ingest_ts
            allowed_lateness: 10 minutes
            future_tolerance: 5 minutes
            allowed_lateness: 2 hours
"""


def test_a_duplicate_key_in_sources_yml_is_an_error_naming_both_lines(tmp_path):
    root = make_project(tmp_path, yml={"sources.yml": SOURCES})
    with pytest.raises(SqlflowError) as err:
        load_project(root)
    (diag,) = err.value.diagnostics
    assert str(diag.location) == "models/sources.yml:13"
    assert diag.message.startswith("key `allowed_lateness` is written twice (lines 11 and 13)")


def test_a_duplicate_key_in_dbt_project_yml_is_an_error(tmp_path):
    root = make_project(tmp_path, project_yml="name: testproj\nprofile: sqlflow\nname: other\n")
    with pytest.raises(SqlflowError) as err:
        load_project(root)
    assert "dbt_project.yml:3: error: key `name` is written twice (lines 1 and 3)" in str(err.value)


def test_a_duplicate_key_in_profiles_is_an_error_but_a_merge_may_be_overridden(tmp_path):
    profiles = """\
        sqlflow:
          target: local
          outputs:
            local: &base
              type: spark
              method: session
              schema: dw
            other:
              <<: *base
              schema: dw2
        """
    root = make_project(tmp_path, profiles_yml=profiles)
    assert load_target(root, "sqlflow", "other").schema_ == "dw2"
    root = make_project(tmp_path / "dup", profiles_yml=profiles + "      schema: dw3\n")
    with pytest.raises(SqlflowError) as err:
        load_target(root, "sqlflow", "other")
    assert "profiles/profiles.yml:11: error: key `schema` is written twice (lines 10 and 11)" in str(err.value)


def test_properties_of_a_model_without_sql_warn(tmp_path):
    yml = {"models.yml": "version: 2\nmodels:\n  - name: ghost\n    config:\n      materialized: table\n"}
    root = make_project(tmp_path, models={"m.sql": "select 1 as a"}, yml=yml)
    res = CliRunner().invoke(main, ["--project-dir", str(root), "check"])
    assert res.exit_code == 0, res.output
    assert "warning: yml properties for model `ghost`, which has no .sql file" in res.output
