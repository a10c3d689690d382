"""Models, seeds and tests of a package installed under `dbt_packages/` are part of the project,
as dbt loads them: their fqn starts with the package, the root project's config is applied over
the package's, their templates see the package's macros first. No Spark."""

from __future__ import annotations

import pytest

from helpers import make_project, make_target
from sqlflow.compiler import compile_project
from sqlflow.errors import SqlflowError
from sqlflow.project.load import load_project
from sqlflow.rendering.data_tests import data_tests

PACKAGE = {
    "dbt_packages/minipkg/dbt_project.yml": "name: minipkg\nversion: '1.0'\nconfig-version: 2\n"
                                            "models:\n  minipkg:\n    +materialized: table\n",
    "dbt_packages/minipkg/macros/m.sql": "{% macro twice(x) %}{{ x }} * 2{% endmacro %}"
                                         "{% test small(model, column_name) %}select * from "
                                         "{{ model }} where {{ column_name }} > 100{% endtest %}",
    "dbt_packages/minipkg/models/pkg_model.sql":
        "select id, {{ twice('id') }} as d from {{ ref('pkg_seed') }}",
    "dbt_packages/minipkg/models/pkg.yml": "models:\n  - name: pkg_model\n    columns:\n"
                                           "      - name: d\n        data_tests: [small]\n",
    "dbt_packages/minipkg/seeds/pkg_seed.csv": "id\n1\n2\n",
    "dbt_packages/minipkg/tests/pkg_singular.sql": "select * from {{ ref('pkg_model') }} where d < 0",
}


def project(tmp_path, mine: str):
    return make_project(tmp_path, models={"mine.sql": mine}, files=PACKAGE,
                        project_yml={"models": {"minipkg": {"+schema": "pk"}}})


def test_a_packages_models_seeds_and_tests_join_the_project(tmp_path):
    root = project(tmp_path, "select * from {{ ref('pkg_model') }} "
                             "join {{ ref('minipkg', 'pkg_seed') }} using (id)")
    result = compile_project(root, mode="batch")
    pkg = result.plans["pkg_model"]
    # the package's config (table) with the root project's over it (schema), its own macro
    assert (pkg.materialized, pkg.sink.table) == ("table", "dw_pk.pkg_model")
    assert "id * 2 AS d" in pkg.sql and "FROM dw.pkg_seed" in pkg.sql
    assert "dw_pk.pkg_model" in result.plans["mine"].sql
    assert result.seeds == {"pkg_seed": "dw.pkg_seed"}
    assert set(result.dag.select(["package:minipkg"])) == {"pkg_model", "pkg_seed"}
    tests = {t.name: (t.path, " ".join(t.sql.split())) for t in
             data_tests(load_project(root), make_target())[0]}
    assert tests == {
        "small_pkg_model_d": ("dbt_packages/minipkg/models/pkg.yml",
                              "select * from dw_pk.pkg_model where d > 100"),
        "pkg_singular": ("dbt_packages/minipkg/tests/pkg_singular.sql",
                         "select * from dw_pk.pkg_model where d < 0")}


def test_ref_to_a_package_node_it_does_not_have_names_what_it_has(tmp_path):
    root = project(tmp_path, "select * from {{ ref('minipkg', 'pkg_modle') }}")
    with pytest.raises(SqlflowError, match="package `minipkg` has no model or seed `pkg_modle`"
                                           ".*pkg_model"):
        compile_project(root, mode="batch")


def test_root_project_properties_of_a_package_model_apply_as_in_dbt(tmp_path):
    files = {**PACKAGE, "dbt_packages/minipkg/models/pkg.yml": "models: []\n"}
    root = make_project(tmp_path, models={"mine.sql": "select 1 as id"}, files=files, yml={
        "props.yml": "models:\n  - name: pkg_model\n    description: from the root\n"
                     "    config: {tags: [rooted]}\n"
                     "    columns:\n      - name: id\n        data_tests: [not_null]\n"})
    loaded = load_project(root)
    node = loaded.models["pkg_model"]
    assert node.properties is not None and node.properties.description == "from the root"
    assert "rooted" in node.base_config.get("tags", [])
    assert not [w for w in loaded.warnings if "pkg_model" in w.message]
    names = {t.name for t in data_tests(loaded, make_target())[0]}
    assert "not_null_pkg_model_id" in names


def test_a_package_model_with_properties_in_both_projects_is_an_error_as_in_dbt(tmp_path):
    root = make_project(tmp_path, models={"mine.sql": "select 1 as id"}, files=PACKAGE, yml={
        "props.yml": "models:\n  - name: pkg_model\n    description: twice\n"})
    with pytest.raises(SqlflowError, match="has properties in two places"):
        load_project(root)
