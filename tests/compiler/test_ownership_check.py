"""Compile-time ownership (docs/semantics.md, "Table ownership"): two owners never share a table."""

from __future__ import annotations

import pytest

from helpers import make_project, make_target
from sqlflow.errors import SqlflowError
from sqlflow.project.load import load_project
from sqlflow.rendering.render import render_project

SOURCES = {"sources.yml": """\
    version: 2
    sources:
      - name: ods
        schema: ods
        tables:
          - name: ods_ad_clicks
    """}
READ = "select * from {{ source('ods', 'ods_ad_clicks') }}\n"


def _errors(tmp_path, models) -> str:
    root = make_project(tmp_path, models=models, yml=SOURCES)
    with pytest.raises(SqlflowError) as err:
        render_project(load_project(root), make_target())
    return str(err.value)


def test_quarantine_naming_a_source_is_an_error_at_its_config_line(tmp_path):
    out = _errors(tmp_path, {"stg.sql": "-- staging\n{{ config(quarantine='ods.ods_ad_clicks') }}\n" + READ})
    assert ("models/stg.sql:2: error: model `stg`: its quarantine table `ods.ods_ad_clicks` is the "
            "declared source `ods.ods_ad_clicks`") in out


def test_two_models_with_one_relation_are_an_error(tmp_path):
    out = _errors(tmp_path, {"stg_ad_clicks.sql": READ,
                             "zz_copy.sql": "{{ config(alias='stg_ad_clicks') }}\n" + READ})
    assert ("models/zz_copy.sql:1: error: model `zz_copy`: its sink table `dw.stg_ad_clicks` is "
            "already the sink table of model `stg_ad_clicks`") in out


def test_quarantine_naming_another_models_table_is_an_error(tmp_path):
    out = _errors(tmp_path, {"a.sql": READ, "b.sql": "{{ config(quarantine='a') }}\n" + READ})
    assert "models/b.sql:1: error: model `b`: its quarantine table `dw.a` is already the sink table of model `a`" in out


def test_a_model_whose_relation_is_a_source_is_an_error(tmp_path):
    yml = {"sources.yml": """\
        version: 2
        sources:
          - name: ods
            schema: ods
            tables:
              - name: ods_ad_clicks
          - name: landed
            schema: dw
            tables:
              - name: raw_events
        """}
    root = make_project(tmp_path, models={"raw_events.sql": READ}, yml=yml)
    with pytest.raises(SqlflowError) as err:
        render_project(load_project(root), make_target())
    assert ("models/raw_events.sql: error: model `raw_events`: its sink table `dw.raw_events` is "
            "the declared source `landed.raw_events`") in str(err.value)


@pytest.mark.parametrize("config, what", [
    ("alias='__sqlflow_state__m__ods__x'", "reserved `__sqlflow` namespace"),
    ("quarantine='sqlflow.commit_log'", "sqlflow's commit log"),
])
def test_reserved_tables_are_refused(tmp_path, config, what):
    out = _errors(tmp_path, {"m.sql": "{{ config(" + config + ") }}\n" + READ})
    assert what in out and "models/m.sql:1" in out


def test_distinct_tables_compile(tmp_path):
    root = make_project(tmp_path, models={"a.sql": READ, "b.sql": "{{ config(quarantine='b_bad_rows') }}\n" + READ},
                        yml=SOURCES)
    assert set(render_project(load_project(root), make_target()).models) == {"a", "b"}
