"""A dbt project's seeds, ephemeral models, packages and dispatched macros compile unchanged.

No JVM: rendering, plans and lineage. That the tables are dbt's, row for row, is
tests/test_dbt_project_parity.py.
"""

from __future__ import annotations

import pytest

from helpers import AD_SOURCES_YML, make_project, make_target
from sqlflow.compiler import compile_project
from sqlflow.errors import SqlflowError
from sqlflow.project.load import load_project
from sqlflow.rendering.render import render_project
from sqlflow.workflows.lineage import column_lineage

PACKAGE = {
    "dbt_packages/minipkg/dbt_project.yml": "name: minipkg\nversion: '1.0'\nconfig-version: 2\n",
    "dbt_packages/minipkg/macros/cents.sql": """\
        {% macro cents(col) %}{{ return(adapter.dispatch('cents', 'minipkg')(col)) }}{% endmacro %}
        {% macro default__cents(col) %}cast({{ col }} * 100 as bigint){% endmacro %}
        {% macro label(col) %}{{ return(adapter.dispatch('label', 'minipkg')(col)) }}{% endmacro %}
        {% macro default__label(col) %}'default'{% endmacro %}
        {% macro spark__label(col) %}'spark'{% endmacro %}
        {% macro plain() %}{{ helper() }}{% endmacro %}
        {% macro helper() %}'package helper'{% endmacro %}
        """,
}


def _sql(tmp_path, model_sql: str, **project) -> str:
    root = make_project(tmp_path, models={"m.sql": model_sql, **project.pop("models", {})},
                        files={**PACKAGE, **project.pop("files", {})}, **project)
    sql = render_project(load_project(root), make_target()).models["m"].sql
    return " ".join(sql.replace("( ", "(").split()).replace("( ", "(").replace(" )", ")")


def test_dispatch_searches_the_project_then_the_package_spark_before_default(tmp_path):
    sql = _sql(tmp_path, "select {{ minipkg.cents('a') }} as c, {{ minipkg.label('a') }} as l",
               macros={"over.sql": "{% macro spark__cents(col) %}round({{ col }}){% endmacro %}"})
    assert "round(a) as c" in sql  # the project's spark__ wins over the package's default__
    assert "'spark' as l" in sql  # in one package, spark__ before default__


def test_dispatch_config_search_order_and_a_packages_own_names(tmp_path):
    sql = _sql(tmp_path, "select {{ minipkg.cents('a') }} as c, {{ minipkg.plain() }} as p",
               macros={"over.sql": "{% macro spark__cents(col) %}round({{ col }}){% endmacro %}"
                                   "{% macro helper() %}'root helper'{% endmacro %}"},
               project_yml={"dispatch": [{"macro_namespace": "minipkg",
                                          "search_order": ["minipkg"]}]})
    assert "cast(a * 100 as bigint) as c" in sql  # search_order leaves the project out
    assert "'package helper' as p" in sql  # a package macro sees its own package first


def test_dispatch_that_finds_nothing_lists_what_it_searched(tmp_path):
    with pytest.raises(SqlflowError) as err:
        _sql(tmp_path, "select {{ adapter.dispatch('nothing', 'minipkg')() }} as x")
    message = str(err.value)
    assert "models/m.sql:1" in message
    for name in ("testproj.spark__nothing", "testproj.default__nothing",
                 "minipkg.spark__nothing", "minipkg.default__nothing"):
        assert name in message


def test_dbt_namespace_is_dbt_sparks_macros(tmp_path):
    sql = _sql(tmp_path, """\
        select {{ dbt.date_trunc('month', 'd') }} as a, {{ dbt.hash('x') }} as b,
          {{ dbt.concat(['x', "'-'", 'y']) }} as c, {{ dbt.safe_cast('x', dbt.type_int()) }} as e,
          '{{ dbt.type_string() }}/{{ dbt.type_numeric() }}/{{ dbt.type_bigint() }}' as t,
          {{ dbt.datediff('d1', 'd2', 'day') }} as f, {{ type_timestamp() }} as g""")
    assert "date_trunc('month', d) as a" in sql
    assert "md5(cast(x as string)) as b" in sql
    assert "concat(x, '-', y) as c" in sql
    assert "cast(x as integer) as e" in sql
    assert "'string/decimal(28,6)/bigint' as t" in sql
    assert "datediff(coalesce(date(d2)" in sql.replace("( ", "(")  # spark__datediff, through spark__assert_not_null
    assert "timestamp as g" in sql  # dbt's macros by bare name too, as in dbt


def test_dbt_context_names(tmp_path, monkeypatch):
    monkeypatch.setenv("DP_CONTEXT_VAR", "from-env")
    sql = _sql(tmp_path, """\
        {{ log('rendering', info=True) }}
        select '{{ env_var('DP_CONTEXT_VAR') }}' as e, '{{ this.identifier }}' as t,
          '{{ target.type }}' as ty, {{ run_started_at.year > 2000 }} as r,
          {{ is_incremental() }} as i""")
    assert "'from-env' as e" in sql and "'m' as t" in sql and "'spark' as ty" in sql
    assert "True as r" in sql and "False as i" in sql
    with pytest.raises(SqlflowError, match="stop here"):
        _sql(tmp_path / "b", "select {{ exceptions.raise_compiler_error('stop here') }}")


SEEDS = {"seeds/raw_orders.csv": "id,amount\n1,2.5\n", "seeds/raw_customers.csv": "id\n1\n"}


def test_ref_to_a_seed_resolves_to_its_schema(tmp_path):
    sql = _sql(tmp_path, "select * from {{ ref('raw_orders') }}", files=SEEDS,
               project_yml={"seeds": {"testproj": {"+schema": "raw"}}})
    assert "from dw_raw.raw_orders" in sql


def test_a_wrong_ref_suggests_the_seed(tmp_path):
    with pytest.raises(SqlflowError) as err:
        _sql(tmp_path, "select * from {{ ref('raw_order') }}", files=SEEDS)
    assert "did you mean `raw_orders`?" in str(err.value)


EPHEMERAL = {
    "e1.sql": "{{ config(materialized='ephemeral') }}\n"
              "select imp_id, ad_id, imp_ts from {{ source('ods', 'imps') }} where ad_id > 0",
    "e2.sql": "{{ config(materialized='ephemeral') }}\n"
              "with x as (select * from {{ ref('e1') }}) select imp_id, ad_id * 2 as ad2, imp_ts from x",
    "s.sql": "{{ config(materialized='streaming_table') }}\nselect imp_id, ad2, imp_ts from {{ ref('e2') }}",
}


@pytest.mark.parametrize("mode", ["batch", "stream"])
def test_an_ephemeral_chain_is_inlined_as_ctes(tmp_path, mode):
    root = make_project(tmp_path, models=EPHEMERAL, yml={"sources.yml": AD_SOURCES_YML})
    result = compile_project(root, mode=mode)
    result.raise_if_errors()
    plan = result.plans["s"]
    sql = plan.sql.lower()
    assert sql.index("__dbt__cte__e1 as") < sql.index("__dbt__cte__e2 as")
    # the source the ephemeral reads is bound as the plan binds a source it reads itself
    view = "__sqlflow_delta__ods__imps" if mode == "stream" else "__sqlflow_clean__ods__imps"
    assert "ad_id > 0" in sql and view in sql
    if mode == "stream":
        assert plan.mode == "stream" and result.irs["s"].streaming  # the source streams through


def test_lineage_sees_through_ephemerals_to_seeds(tmp_path):
    root = make_project(tmp_path, files=SEEDS, models={
        "e.sql": "{{ config(materialized='ephemeral') }}\nselect id, amount * 2 as a2 from {{ ref('raw_orders') }}",
        "m.sql": "with y as (select * from {{ ref('e') }}) select id, a2 + 1 as a3 from y"})
    tree = column_lineage(root, "m.a3")
    assert tree.sources() == ["raw_orders.amount"]
    assert tree.upstream[0].kind == "seed"


def test_data_tests_render_through_dbts_test_macros(tmp_path):
    from sqlflow.rendering.data_tests import data_tests

    root = make_project(tmp_path, files={**SEEDS, "tests/few.sql": "select * from {{ ref('m') }} where a > 9",
                                         "tests/generic/custom.sql": "{% test my_custom_test(model, "
                                         "column_name) %}select 1 from {{ model }}{% endtest %}"},
                        models={"m.sql": "select id as a from {{ ref('raw_customers') }}"},
                        yml={"m.yml": """\
                            models:
                              - name: m
                                columns:
                                  - name: a
                                    data_tests:
                                      - unique
                                      - relationships: {to: ref('raw_customers'), field: id}
                                      - accepted_values: {arguments: {values: [1, 2]}, config: {severity: warn}}
                                      - my_custom_test
                            """})
    tests, skipped = data_tests(load_project(root), make_target())
    by_name = {t.name: t for t in tests}  # dbt's node names
    relationships, accepted = "relationships_m_a__id__ref_raw_customers_", "accepted_values_m_a__1__2"
    assert set(by_name) == {"unique_m_a", relationships, accepted, "my_custom_test_m_a", "few"}
    unique = " ".join(by_name["unique_m_a"].sql.split())
    assert "from dw.m where a is not null group by a having count(*) > 1" in unique
    assert by_name[relationships].refs == ("m", "raw_customers")
    assert "'1','2'" in by_name[accepted].sql.replace("\n", "").replace(" ", "")
    assert by_name[accepted].severity == "warn"
    assert by_name["my_custom_test_m_a"].sql.strip() == "select 1 from dw.m"
    assert by_name["few"].refs == ("m",)
    assert skipped == []


def test_seeds_are_selectable_nodes_of_their_own_resource_type(tmp_path):
    root = make_project(tmp_path, files=SEEDS,
                        models={"m.sql": "select id from {{ ref('raw_orders') }}"})
    dag = render_project(load_project(root), make_target()).dag
    seeds = set(dag.select("resource_type:seed"))
    assert seeds and all(n.startswith("raw_") for n in seeds) and "m" not in seeds
    assert dag.select("resource_type:model") == ("m",)
    assert dag.select("+m") == ("raw_orders", "m")
    assert set(dag.select("raw_orders+")) == {"raw_orders", "m"}
