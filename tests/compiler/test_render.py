"""Render: the dbt Jinja subset, relation names as dbt-spark prints them, errors, source map."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import make_project, make_target, render, render_sql
from sqlflow.errors import Location, SqlflowError
from sqlflow.project.load import load_project
from sqlflow.rendering.render import Renderer, render_model, render_project

SOURCES = {"sources.yml": """\
    version: 2
    sources:
      - name: ods
        schema: raw
        tables:
          - name: events
            identifier: events_v2
          - name: clicks
      - name: dims
        tables:
          - name: users
    """}

MACROS = {"joins.sql": """\
    {% macro interval_join(left, right, lower, upper) %}
    {{ left }} l
    join {{ right }} r
      on l.k = r.k
     and r.t between l.t + interval {{ lower }} and l.t + interval {{ upper }}
    {% endmacro %}

    {% macro twice(x) %}{{ return(x * 2) }}{% endmacro %}

    {% macro uses_twice(x) %}{{ twice(x) + 1 }}{% endmacro %}

    {% macro boom() %}
      {{ exceptions.raise_compiler_error('boom went the macro') }}
    {% endmacro %}

    {% macro bad_ref() %}
      {{ ref('missing_model') }}
    {% endmacro %}
    """}


def _error(fn, *args, **kwargs) -> str:
    with pytest.raises(SqlflowError) as err:
        fn(*args, **kwargs)
    return str(err.value)


# --- helpers --------------------------------------------------------------------------------------


def test_ref_and_source_render_as_dbt_spark_relations(tmp_path):
    sql = render_sql(tmp_path, "select * from {{ ref('a') }} join {{ ref('testproj', 'b') }} "
                               "join {{ source('ods', 'events') }} join {{ source('dims', 'users') }}",
                     models={"a.sql": "select 1", "b.sql": "select 1"}, yml=SOURCES)
    assert sql == "select * from dw.a join dw.b join raw.events_v2 join dims.users"


def test_custom_schema_and_alias(tmp_path):
    sql = render_sql(tmp_path, "select * from {{ ref('a') }}, {{ ref('b') }}",
                     models={"a.sql": "{{ config(schema='staging') }}select 1",
                             "b.sql": "{{ config(alias='bee') }}select 1"})
    assert sql == "select * from dw_staging.a, dw.bee"


def test_project_generate_schema_name_overrides_the_default(tmp_path):
    macro = ("{% macro generate_schema_name(custom_schema_name, node) -%}"
             "{{ custom_schema_name | trim if custom_schema_name else target.schema }}"
             "{%- endmacro %}")
    sql = render_sql(tmp_path, "select * from {{ ref('a') }}, {{ this }}",
                     models={"a.sql": "{{ config(schema='stg') }}select 1"},
                     macros={"schema.sql": macro})
    assert sql == "select * from stg.a, dw.m"


def test_ref_to_ephemeral_model(tmp_path):
    m = render(tmp_path, "m", models={"m.sql": "select * from {{ ref('e') }}",
                                      "e.sql": "{{ config(materialized='ephemeral') }}select 1"})
    assert m.sql == "select * from __dbt__cte__e"


def test_this_and_target(tmp_path):
    m = render(tmp_path, "m", target=make_target("analytics", "prod"), models={"m.sql": (
        "{{ config(alias='mm') }}select '{{ this }}', '{{ this.schema }}', '{{ this.identifier }}',"
        " '{{ target.name }}', '{{ target.schema }}', '{{ target.type }}', '{{ target.profile_name }}'")})
    assert m.sql == "select 'analytics.mm', 'analytics', 'mm', 'prod', 'analytics', 'spark', 'sqlflow'"
    assert str(m.relation) == "analytics.mm"


def test_var_project_cli_default_and_mode(tmp_path):
    sql = ("select {{ var('a') }}, {{ var('b') }}, {{ var('c', 'dflt') }}, "
           "'{{ var('sqlflow_mode', 'batch') }}'")
    project = {"models": {"m.sql": sql}, "project_yml": {"vars": {"a": 1, "b": 2}}}
    assert render(tmp_path / "1", "m", **project).sql == "select 1, 2, dflt, 'batch'"
    cli = render(tmp_path / "2", "m", vars={"b": 20, "c": "x"}, mode="stream", **project)
    assert cli.sql == "select 1, 20, x, 'stream'"


def test_env_var(tmp_path, monkeypatch):
    monkeypatch.setenv("SQLFLOW_TEST_ENV", "hello")
    sql = render_sql(tmp_path, "select '{{ env_var('SQLFLOW_TEST_ENV') }}', "
                               "'{{ env_var('SQLFLOW_UNSET_ENV', 'dflt') }}'")
    assert sql == "select 'hello', 'dflt'"
    monkeypatch.delenv("SQLFLOW_TEST_ENV")
    msg = _error(render_sql, tmp_path / "b", "select\n '{{ env_var('SQLFLOW_TEST_ENV') }}'")
    assert msg.startswith("models/m.sql:2: error: environment variable `SQLFLOW_TEST_ENV` is not set")


def test_is_incremental_log_modules_and_do(tmp_path):
    sql = render_sql(tmp_path, (
        "{% if is_incremental() %}incremental{% else %}full{% endif %}"
        "{{ log('hi', info=True) }}|{{ modules.datetime.date(2024, 1, 2).isoformat() }}"
        "{% set xs = [] %}{% do xs.append(3) %}|{{ xs[0] }}"
        "{% for i in range(5) %}{% if i == 2 %}{% break %}{% endif %}{{ i }}{% endfor %}"))
    assert sql == "full|2024-01-02|301"


def test_macros_return_and_call_each_other(tmp_path):
    sql = render_sql(tmp_path, "select {{ twice(2) }}, {{ uses_twice(3) }}, {{ testproj.twice(5) }}",
                     macros=MACROS)
    assert sql == "select 4, 7, 10"


def test_multi_line_macro_renders_like_jinja(tmp_path):
    m = render(tmp_path, "m", yml=SOURCES, macros=MACROS, models={"m.sql": (
        "select *\n"
        "from {{ interval_join(source('ods', 'events'),\n"
        "                      source('ods', 'clicks'), '0 minutes', '20 minutes') }}\n"
        "where l.k is not null")})
    assert m.sql == ("select *\nfrom \nraw.events_v2 l\njoin raw.clicks r\n  on l.k = r.k\n"
                     " and r.t between l.t + interval 0 minutes and l.t + interval 20 minutes\n"
                     "\nwhere l.k is not null")
    assert m.sources == (("ods", "events"), ("ods", "clicks"))


def test_config_get_and_recorded_inputs(tmp_path):
    m = render(tmp_path, "m", yml=SOURCES, models={
        "a.sql": "select 1",
        "m.sql": "{{ config(materialized='table', partition_by=['dt']) }}"
                 "select '{{ config.get('materialized') }}', '{{ config.get('nope', 'd') }}' "
                 "from {{ ref('a') }} join {{ ref('a') }} join {{ source('ods', 'clicks') }}"})
    assert m.sql.startswith("select 'table', 'd' from dw.a")
    assert m.refs == ("a",) and m.sources == (("ods", "clicks"),)
    assert m.config.partition_by == ["dt"]
    assert m.input_for("DW.A").kind == "ref"
    assert m.input_for("`raw`.`clicks`").key == "ods.clicks"
    assert m.input_for("dw.zzz") is None


def test_render_project_all_models_in_order(tmp_path):
    root = make_project(tmp_path, models={"a.sql": "select 1", "b.sql": "select * from {{ ref('a') }}",
                                          "c.sql": "{{ config(enabled=false) }}select 1"})
    result = render_project(load_project(root), make_target())
    assert result.order == ("a", "b")
    assert result.models["b"].sql == "select * from dw.a"


def test_sandbox_blocks_python_internals(tmp_path):
    msg = _error(render_sql, tmp_path, "select '{{ ''.__class__.__mro__ }}'")
    assert msg.startswith("models/m.sql:1: error:")


# --- errors a user makes --------------------------------------------------------------------------


def test_undefined_ref(tmp_path):
    msg = _error(render_sql, tmp_path, "select 1\nfrom {{ ref('stg_evnts') }}",
                 models={"stg_events.sql": "select 1"})
    assert msg == ("models/m.sql:2: error: `ref('stg_evnts')`: no model named `stg_evnts`; "
                   "did you mean `stg_events`?")


def test_undefined_source(tmp_path):
    msg = _error(render_sql, tmp_path, "select 1\n\nfrom {{ source('ods', 'event') }}", yml=SOURCES)
    assert msg == ("models/m.sql:3: error: `source('ods', 'event')`: no source table `ods.event`; "
                   "did you mean `ods.events`?")


def test_undefined_macro(tmp_path):
    msg = _error(render_sql, tmp_path, "select 1\nfrom {{ interval_jion(a, b) }}", macros=MACROS)
    assert msg.startswith("models/m.sql:2: error: `interval_jion` is not defined")
    assert msg.endswith("did you mean `interval_join`?")


def test_undefined_var(tmp_path):
    msg = _error(render_sql, tmp_path, "select\n  {{ var('max_fallback_dayz') }}",
                 project_yml={"vars": {"max_fallback_days": 3}})
    assert msg.startswith("models/m.sql:2: error: var `max_fallback_dayz` is not defined; "
                          "did you mean `max_fallback_days`?")


def test_jinja_syntax_error(tmp_path):
    msg = _error(render_sql, tmp_path, "select 1\n{% if x %}\nfrom t")
    assert msg.startswith("models/m.sql:2: error: Jinja syntax error: Unexpected end of template")


def test_error_inside_macro_points_at_macro_and_caller(tmp_path):
    msg = _error(render_sql, tmp_path, "select 1\nfrom {{ bad_ref() }}", macros=MACROS)
    assert msg.startswith("macros/joins.sql:17: error: `ref('missing_model')`: no model named")
    assert msg.endswith("(called from models/m.sql:2)")


def test_raise_compiler_error(tmp_path):
    msg = _error(render_sql, tmp_path, "select 1\n{{ exceptions.raise_compiler_error('no way') }}")
    assert msg == "models/m.sql:2: error: no way; raised by the model's Jinja"
    # a macro rejecting its arguments is reported where the model called it
    msg = _error(render_sql, tmp_path / "2", "select {{ boom() }}", macros=MACROS)
    assert msg.startswith("models/m.sql:1: error: boom went the macro")
    assert msg.endswith("(raised in macros/joins.sql:13)")


def test_ref_errors(tmp_path):
    assert "unknown package `other`" in _error(render_sql, tmp_path, "{{ ref('other', 'a') }}",
                                               models={"a.sql": "select 1"})
    assert "is disabled" in _error(render_sql, tmp_path / "2", "{{ ref('a') }}",
                                   models={"a.sql": "{{ config(enabled=false) }}select 1"})


def test_all_model_errors_are_reported_together(tmp_path):
    root = make_project(tmp_path, models={"a.sql": "{{ ref('x') }}", "b.sql": "{{ var('y') }}",
                                          "c.sql": "select 1"})
    with pytest.raises(SqlflowError) as err:
        render_project(load_project(root), make_target())
    assert [d.location.path for d in err.value.diagnostics] == ["models/a.sql", "models/b.sql"]


# --- source map -----------------------------------------------------------------------------------


def test_source_map_multi_line_macro_maps_to_the_call(tmp_path):
    raw = ("select l.k,\n"
           "       r.t\n"
           "from {{ interval_join(source('ods', 'events'),\n"
           "                      source('ods', 'clicks'), '0 minutes', '20 minutes') }}\n"
           "where l.k > 0")
    m = render(tmp_path, "m", yml=SOURCES, macros=MACROS, models={"m.sql": raw})
    lines = m.sql.split("\n")
    assert lines[0] == "select l.k," and m.locate(1, 8) == Location("models/m.sql", 1, 8)
    assert m.locate(2, 8) == Location("models/m.sql", 2, 8)
    # "from raw.events_v2 l": `from` is the model's text, the relation comes from the call
    assert m.locate(3, 1) == Location("models/m.sql", 3, 1)
    assert m.locate(3, 6) == Location("models/m.sql", 3, 6)  # the `{{` of the call
    for line in range(4, 8):  # lines the macro produced
        assert m.locate(line, 3) == Location("models/m.sql", 3, 6)
    where = lines.index("where l.k > 0") + 1
    assert m.locate(where, 7) == Location("models/m.sql", 5, 7)
    assert m.locate(where) == Location("models/m.sql", 5)


def test_source_map_inline_expression_columns(tmp_path):
    m = render(tmp_path, "m", models={"a.sql": "select 1", "m.sql": (
        "select x,\n  y from {{ ref('a') }} as t where z = {{ var('n', 42) }} and w = 1")})
    assert m.sql == "select x,\n  y from dw.a as t where z = 42 and w = 1"
    line = m.sql.split("\n")[1]
    assert m.locate(2, line.index("dw.a") + 1) == Location("models/m.sql", 2, 10)
    assert m.locate(2, line.index("as t") + 1) == Location("models/m.sql", 2, 25)
    assert m.locate(2, line.index("w = 1") + 1).col == m.source_map.raw_lines[1].index("w = 1") + 1


def test_source_map_loops_conditionals_and_whitespace_control(tmp_path):
    raw = ("select\n"
           "{%- for c in ['a', 'b'] %}\n"
           "  {{ c }},\n"
           "{%- endfor %}\n"
           "{% if false %}\nnever\n{% endif %}\n"
           "  1 as one\n"
           "from t")
    m = render(tmp_path, "m", models={"m.sql": raw})
    assert m.sql == "select\n  a,\n  b,\n\n  1 as one\nfrom t"
    assert [m.locate(i).line for i in range(1, 7)] == [1, 3, 3, 5, 8, 9]


def test_block_set_text_is_not_marked(tmp_path):
    # text captured by {% set %} ... {% endset %} is a value; markers must not leak into it
    sql = render_sql(tmp_path, "{% set q %}\nselect 1\n{% endset %}"
                               "{% if q | trim == 'select 1' %}same{% else %}differs{% endif %}")
    assert sql == "same"


_LINE = st.one_of(
    st.text(alphabet="abcdefxyz ,=()*0123456789", max_size=30),
    st.builds(lambda a, b: f"{a}{{{{ ref('a') }}}}{b}", st.text("abc ", max_size=5),
              st.text("xyz ", max_size=5)),
    st.builds(lambda a: f"{a}{{{{ twice(3) }}}}", st.text("abc ", max_size=5)),
    st.just("{{ interval_join('x', 'y', '0 minutes', '1 minute') }}"),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_LINE, min_size=1, max_size=12))
def test_rendering_is_deterministic_and_the_source_map_is_monotonic(tmp_path_factory, lines):
    root = make_project(tmp_path_factory.mktemp("p"), macros=MACROS, models={
        "a.sql": "select 1", "m.sql": "\n".join(lines)})
    project = load_project(root)
    first = render_model(project, "m", target=make_target())
    second = Renderer(load_project(root), make_target()).render("m")
    assert first.sql == second.sql and first.source_map == second.source_map
    origins = [first.locate(i + 1).line for i in range(len(first.sql.split("\n")))]
    assert origins == sorted(origins) and set(origins) <= set(range(1, len(lines) + 1))
    for i, text in enumerate(first.sql.split("\n")):
        raw = lines[origins[i] - 1]
        if text == raw and "{" not in raw:  # a plain line maps to itself, column for column
            for col in range(1, len(text) + 1):
                assert first.locate(i + 1, col) == Location("models/m.sql", origins[i], col)


# --- speed ----------------------------------------------------------------------------------------


def test_a_thousand_models_render(tmp_path):
    """Scale, not speed (no timed assertion in a test; bench/compile.py times it)."""
    models = {}
    for chain in range(20):
        for step in range(50):
            parent = "{{ source('ods', 'events') }}" if step == 0 else f"{{{{ ref('m_{chain}_{step - 1}') }}}}"
            models[f"c{chain}/m_{chain}_{step}.sql"] = (
                "{{ config(materialized='streaming_table', partition_by=['dt']) }}\n"
                f"select e.*, {{{{ twice({step}) }}}} as k\nfrom {parent} as e\n")
    root = make_project(tmp_path, models=models, yml=SOURCES, macros=MACROS)
    result = render_project(load_project(root), make_target())
    assert len(result.models) == 1000
    assert result.models["m_3_7"].sql.endswith("from dw.m_3_6 as e")


def test_rendered_model_summary_is_json_ready(tmp_path):
    import json

    m = render(tmp_path, "m", models={"a.sql": "select 1", "m.sql": (
        "{{ config(materialized='streaming_table', skew_margin='30 seconds') }}"
        "select * from {{ ref('a') }}")})
    data = json.loads(json.dumps(m.as_dict()))
    assert data["relation"] == "dw.m" and data["refs"] == ["a"]
    assert data["inputs"] == {"dw.a": "a"}
    assert data["config"] == {"materialized": "streaming_table", "skew_margin": "PT30S"}


def test_source_schema_and_identifier_may_use_jinja(tmp_path):
    sql = render_sql(tmp_path, "select * from {{ source('dims', 'users') }}",
                     project_yml={"vars": {"v": "v2"}}, yml={"s.yml": """\
        version: 2
        sources:
          - name: dims
            schema: "{{ target.schema }}_dims"
            tables:
              - name: users
                identifier: "users_{{ var('v') }}"
        """})
    assert sql == "select * from dw_dims.users_v2"
