"""An `incremental` model compiles to two SQLs (`is_incremental()` false and true) and dbt-spark's
strategy and `on_schema_change`; a `microbatch` one is left to dbt, a date range refused;
custom generic tests (`{% test %}` blocks) and test configs render like dbt's. No Spark."""

from __future__ import annotations

import pytest

from helpers import make_project, make_target
from sqlflow.compiler import compile_project
from sqlflow.errors import SqlflowError
from sqlflow.project.load import load_project
from sqlflow.rendering.data_tests import data_tests
from sqlflow.runtime.dbt_incremental import merge_sql
from sqlflow.runtime.dispatch import run_models

BASE = {"base.sql": "{{ config(materialized='table') }}\nselect 1 as id, 2 as v"}
NEWER = "{% if is_incremental() %}where id > (select max(id) from {{ this }}){% endif %}"


def compile_one(tmp_path, config: str):
    project = make_project(tmp_path, models={
        **BASE, "inc.sql": f"{{{{ config(materialized='incremental'{config}) }}}}\n"
                           f"select id, v from {{{{ ref('base') }}}}\n{NEWER}\n"})
    return compile_project(project, mode="batch")


def test_the_plan_has_the_full_sql_and_the_incremental_one_reading_this(tmp_path):
    plan = compile_one(tmp_path, ", unique_key=['id'], incremental_strategy='merge', "
                                 "file_format='delta'").plans["inc"]
    assert "dw.inc" not in plan.sql and "WHERE" not in plan.sql
    run = plan.incremental
    assert run is not None and run.strategy == "merge" and run.unique_key == ("id",)
    assert "FROM dw.inc" in run.sql and "WHERE" in run.sql
    assert compile_one(tmp_path / "b", "").plans["inc"].incremental.strategy == "append"


@pytest.mark.parametrize(("config", "says"), [
    (", incremental_strategy='merge'", "needs file_format 'delta'"),
    (", incremental_strategy='upsert'", "expected one of 'append', 'merge', 'insert_overwrite'"),
])
def test_a_strategy_dbt_spark_refuses_is_an_error_at_its_line(tmp_path, config, says):
    result = compile_one(tmp_path, config)
    assert "inc" not in result.plans
    [error] = result.errors
    assert says in error.message and str(error.location) == "models/inc.sql:1"


def test_merge_without_unique_key_inserts_every_row_as_dbt():
    sql = merge_sql("dw.t", ["id"], (), ("DBT_INTERNAL_DEST.id > 0",), [])
    assert "ON DBT_INTERNAL_DEST.id > 0 AND FALSE WHEN MATCHED" in sql


def test_custom_generic_tests_render_with_dbts_names(tmp_path):
    project = make_project(tmp_path, models={
        **BASE, "schema.yml": """\
            models:
              - name: base
                data_tests:
                  - min_rows: {n: 1}
                columns:
                  - name: id
                    data_tests: [positive, unique]
            """}, macros={"checks.sql": """\
            {% test positive(model, column_name) %}
            select * from {{ model }} where {{ column_name }} < 0
            {% endtest %}
            """}, files={"tests/generic/min_rows.sql": """\
            {% test min_rows(model, n) %}select 1 from {{ model }} having count(*) < {{ n }}{% endtest %}
            """})
    from helpers import make_target

    tests, _ = data_tests(load_project(project), make_target())
    sqls = {t.name: " ".join(t.sql.split()) for t in tests}
    assert sqls["positive_base_id"] == "select * from dw.base where id < 0"
    assert sqls["min_rows_base_1"] == "select 1 from dw.base having count(*) < 1"
    assert "unique_base_id" in sqls


def test_an_undefined_generic_test_is_an_error_at_its_yml(tmp_path):
    from helpers import make_target

    project = make_project(tmp_path, models={**BASE, "schema.yml": """\
        models:
          - name: base
            columns:
              - name: id
                data_tests: [positve]
        """})
    with pytest.raises(SqlflowError, match="generic test `positve` is not defined"):
        data_tests(load_project(project), make_target())


def test_on_schema_change_is_carried_and_an_unknown_value_is_ignore_as_in_dbt(tmp_path):
    run = compile_one(tmp_path, ", on_schema_change='sync_all_columns'").plans["inc"].incremental
    assert run.on_schema_change == "sync_all_columns"
    run = compile_one(tmp_path / "b", ", on_schema_change='drop_all'").plans["inc"].incremental
    assert run.on_schema_change == "ignore"


def test_a_microbatch_model_is_left_to_dbt_once_and_its_readers_still_plan(tmp_path):
    project = make_project(tmp_path, models={
        **BASE, "mb.sql": "{{ config(materialized='incremental', incremental_strategy='microbatch', "
                          "event_time='at', batch_size='day', begin='2024-01-01') }}\n"
                          "select id, v, current_timestamp() as at from {{ ref('base') }}",
        "reader.sql": "select id from {{ ref('mb') }}"})
    result = compile_project(project, mode="batch")
    assert "mb" not in result.plans and "dw.mb" in result.plans["reader"].sql
    [notice] = [w for w in result.warnings if "microbatch" in w.message]
    assert "`mb` (models/mb.sql)" in notice.message and "sqlflow dbt run --select mb" in notice.hint
    assert not result.errors


def test_a_date_range_run_of_an_incremental_model_is_refused_before_anything_runs(tmp_path):
    from datetime import date

    plans = list(compile_one(tmp_path, ", partition_by=['v']").plans.values())
    with pytest.raises(SqlflowError, match="a --start/--end range does not apply") as err:
        next(run_models(None, plans, start=date(2024, 1, 1), end=date(2024, 1, 2)))  # type: ignore[arg-type]
    assert "--exclude inc" in (err.value.diagnostics[0].hint or "")


def test_test_configs_render_as_dbt_renders_them(tmp_path):
    project = make_project(tmp_path, models=BASE, project_yml={
        "data_tests": {"testproj": {"+severity": "warn"}}}, yml={"base.yml": """\
        models:
          - name: base
            columns:
              - name: id
                data_tests:
                  - not_null:
                      config: {where: "v > 1", store_failures: true}
                  - unique: {name: id_is_unique, severity: error, limit: 3}
        """}, files={"tests/one.sql": "{{ config(store_failures_as='view') }}\nselect 1 as x"})
    tests = {t.name: t for t in data_tests(load_project(project), make_target())[0]}
    not_null, unique, one = tests["not_null_base_id"], tests["id_is_unique"], tests["one"]
    assert "(select * from dw.base where v > 1) dbt_subquery" in not_null.sql
    assert "select *" in not_null.sql.lower().split("from")[0]  # dbt's not_null stores every column
    assert (not_null.severity, str(not_null.relation)) == ("warn", "dw_dbt_test__audit.not_null_base_id")
    assert (unique.severity, unique.config.limit, unique.relation) == ("error", 3, None)
    assert (one.config.store_as, str(one.relation)) == ("view", "dw_dbt_test__audit.one")
