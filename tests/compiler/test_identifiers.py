"""Names sqlflow writes into SQL (docs/semantics.md, "Names"): validated at compile time with a
clear error at the config line, quoted with embedded backticks doubled so no name becomes DDL."""

from __future__ import annotations

import pytest
import sqlglot
from hypothesis import given
from hypothesis import strategies as st
from sqlglot import exp

from helpers import make_project, make_target
from sqlflow.errors import SqlflowError
from sqlflow.identifiers import quote, quote_table
from sqlflow.project.load import load_project
from sqlflow.rendering.render import render_project

READ = "select 1 as a, current_date() as dt\n"


def _error(tmp_path, models) -> str:
    root = make_project(tmp_path, models=models)
    with pytest.raises(SqlflowError) as err:
        render_project(load_project(root), make_target())
    return str(err.value)


@pytest.mark.parametrize("config, what", [
    ('alias="v` AS SELECT 1 AS a; -- "', "model `m`'s table `v` AS SELECT 1 AS a; --`"),
    ("schema=\"x` LOCATION '/some/dir' --\"", "model `m`'s database `dw_x` LOCATION '/some/dir' --`"),
    ("schema='x/../../..'", "model `m`'s database `dw_x/../../..`"),
    ("alias='ünïcode'", "model `m`'s table `ünïcode`"),
    ("quarantine='q; DROP TABLE ods.x'", "model `m`'s quarantine table part `q; DROP TABLE ods`"),
    ("partition_by=['dt`) LOCATION (`x']", "model `m`'s partition column"),
])
def test_a_name_spark_cannot_hold_is_an_error_at_its_config_line(tmp_path, config, what):
    out = _error(tmp_path, {"m.sql": "-- a model\n{{ config(" + config + ") }}\n" + READ})
    assert f"models/m.sql:2: error: {what}" in out
    assert "letters, digits and underscores only" in out


@pytest.mark.parametrize("filename", ["...sql", "my model.sql", "stg_\U0001f600.sql", "a-b.sql"])
def test_a_model_file_whose_name_is_not_a_model_name_is_an_error_naming_it(tmp_path, filename):
    root = make_project(tmp_path, models={filename: READ, "ok.sql": READ})
    with pytest.raises(SqlflowError) as err:
        load_project(root)
    (diag,) = err.value.diagnostics
    assert str(diag.location) == f"models/{filename}"
    assert diag.message.startswith(f"model file `models/{filename}`: its name")
    assert "rename the file" in diag.hint


def test_a_source_whose_name_is_not_plain_is_an_error_at_its_yml(tmp_path):
    yml = {"sources.yml": """\
        version: 2
        sources:
          - name: ods
            schema: "ods` LOCATION '/tmp/x"
            tables:
              - name: t
        """}
    root = make_project(tmp_path, models={"m.sql": "select * from {{ source('ods', 't') }}"}, yml=yml)
    with pytest.raises(SqlflowError) as err:
        render_project(load_project(root), make_target())
    assert "models/sources.yml:6: error: source `ods.t`'s schema" in str(err.value)


@given(st.text(min_size=1, max_size=20))
def test_a_quoted_name_is_one_identifier_whatever_it_holds(name):
    tree = sqlglot.parse_one(f"SELECT {quote(name)} FROM x", read="spark")
    (column,) = tree.expressions
    assert isinstance(column, exp.Column) and column.name == name


@given(st.text(alphabet=st.characters(blacklist_characters="."), min_size=1, max_size=12))
def test_a_quoted_table_is_one_table_whatever_its_name_holds(name):
    tree = sqlglot.parse_one(f"DROP TABLE {quote_table('db.' + name)}", read="spark")
    table = tree.find(exp.Table)
    assert table.db == "db" and table.name == name
