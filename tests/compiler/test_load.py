"""Load: dbt_project.yml, models, yml properties, sources, macros, config precedence."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers import make_project, render
from sqlflow.errors import SqlflowError
from sqlflow.project.config import ModelConfig, merge_config, parse_duration, parse_size
from sqlflow.project.load import load_project

SOURCES_YML = """\
version: 2
sources:
  - name: ods
    schema: raw
    meta:
      sqlflow:
        allowed_lateness: 5 minutes
    tables:
      - name: ad_events
        identifier: ad_events_v2
        description: ad events
        meta:
          sqlflow:
            event_time: event_ts
            ingest_time: kafka_ts
            allowed_lateness: 10 minutes
            future_tolerance: 30 seconds
            partition_column: dt
        columns:
          - name: event_ts
            data_type: timestamp
      - name: clicks
        config:
          meta:
            sqlflow:
              event_time: click_ts
              ingest_time: kafka_ts
              future_tolerance: 1 hour
      - name: users
"""


def _error(fn, *args, **kwargs) -> str:
    with pytest.raises(SqlflowError) as err:
        fn(*args, **kwargs)
    return str(err.value)


def test_project_models_and_properties(tmp_path):
    root = make_project(
        tmp_path, models={"staging/stg_a.sql": "select 1 as x", "marts/b.sql": "select 2"},
        yml={"staging/schema.yml": """\
            version: 2
            models:
              - name: stg_a
                description: the a model
                columns:
                  - name: x
                    description: an x
                    data_type: int
            """},
        project_yml={"vars": {"days": 3, "testproj": {"scoped": "yes"}}})
    project = load_project(root)
    assert project.name == "testproj" and project.profile == "sqlflow"
    assert project.vars == {"days": 3, "scoped": "yes"}
    assert sorted(project.models) == ["b", "stg_a"]
    stg = project.models["stg_a"]
    assert stg.path == "models/staging/stg_a.sql"
    assert stg.fqn == ("testproj", "staging", "stg_a")
    assert stg.raw_sql == "select 1 as x"
    assert stg.properties.description == "the a model"
    assert stg.properties.columns[0].name == "x" and stg.properties.columns[0].data_type == "int"
    assert stg.properties.path == "models/staging/schema.yml" and stg.properties.line == 3
    assert project.models["b"].properties is None


def test_config_precedence_project_folder_yml_and_config_call(tmp_path):
    m = render(
        tmp_path, "m",
        project_yml={"models": {
            "+materialized": "view", "+file_format": "parquet", "+tags": ["root"],
            "testproj": {"+file_format": "delta", "+meta": {"owner": "a", "tier": 1},
                         "marts": {"+materialized": "table", "+tags": "marts",
                                   "core": {"+alias": "from_project", "+skew_margin": "5 seconds"}}}}},
        models={"marts/core/m.sql": "{{ config(materialized='streaming_table', tags=['call'], "
                                    "meta={'tier': 3}) }}select 1"},
        yml={"marts/core/m.yml": """\
            version: 2
            models:
              - name: m
                tags: [yml_top]
                config:
                  alias: from_yml
                  stream_strategy: stateful
                  meta: {team: ads}
                  pre-hook: "select 1"
            """})
    c = m.config
    assert c.materialized == "streaming_table"  # config() > folder
    assert c.file_format == "delta"  # project folder > project root
    assert c.alias == "from_yml"  # yml > most specific folder
    assert c.stream_strategy == "stateful"
    assert c.skew_margin == timedelta(seconds=5)
    assert c.tags == ["root", "marts", "yml_top", "call"]  # additive, least specific first
    assert c.meta == {"owner": "a", "tier": 3, "team": "ads"}  # merged, most specific wins
    assert c.pre_hook == ["select 1"]
    assert str(m.relation) == "dw.from_yml"


def test_more_specific_folder_wins(tmp_path):
    root = make_project(
        tmp_path, models={"a/x.sql": "select 1", "a/b/y.sql": "select 1", "z.sql": "select 1"},
        project_yml={"models": {"testproj": {"+materialized": "table",
                                             "a": {"+materialized": "incremental",
                                                   "b": {"+materialized": "ephemeral"}}}}})
    models = load_project(root).models
    assert models["z"].base_config["materialized"] == "table"
    assert models["x"].base_config["materialized"] == "incremental"
    assert models["y"].base_config["materialized"] == "ephemeral"


def test_model_level_key_in_project_tree_and_plain_keys(tmp_path):
    # dbt: a non-dict value without `+` is a config too; the fqn ends with the model name
    root = make_project(tmp_path, models={"a/x.sql": "select 1"},
                        project_yml={"models": {"testproj": {"a": {
                            "materialized": "table", "x": {"+alias": "xx"}}}}})
    cfg = load_project(root).models["x"].base_config
    assert cfg["materialized"] == "table" and cfg["alias"] == "xx"


def test_merge_config_rules():
    base = {"tags": ["a"], "meta": {"x": 1}, "post_hook": ["h1"], "grants": {"select": ["u1"]},
            "alias": "old"}
    out = merge_config(base, {"tags": ["a", "b"], "meta": {"y": 2}, "post-hook": "h2",
                              "grants": {"+select": ["u2"]}, "alias": "new"})
    assert out == {"tags": ["a", "b"], "meta": {"x": 1, "y": 2}, "post_hook": ["h1", "h2"],
                   "grants": {"select": ["u1", "u2"]}, "alias": "new"}
    assert base["tags"] == ["a"]  # inputs are not mutated


def test_unknown_config_key_in_yml_names_file_line_and_suggestion(tmp_path):
    root = make_project(tmp_path, models={"m.sql": "select 1"}, yml={"props.yml": """\
        version: 2
        models:
          - name: m
            config:
              materialized: table
              stream_stratgy: stateful
        """})
    msg = _error(load_project, root)
    assert msg == ("models/props.yml:6: error: unknown config key `stream_stratgy`; "
                   "did you mean `stream_strategy`?")


def test_unknown_config_key_in_project_file(tmp_path):
    root = make_project(tmp_path, models={"m.sql": "select 1"},
                        project_yml={"models": {"testproj": {"+materialised": "table"}}})
    msg = _error(load_project, root)
    assert msg.startswith("dbt_project.yml:")
    assert "unknown config key `materialised`; did you mean `materialized`?" in msg


def test_unknown_config_key_in_config_call(tmp_path):
    msg = _error(render, tmp_path, "m",
                 models={"m.sql": "select 1\n{{ config(skew_marginn='1 second') }}"})
    assert msg == ("models/m.sql:2: error: unknown config key `skew_marginn`; "
                   "did you mean `skew_margin`?")


def test_bad_config_values(tmp_path):
    msg = _error(render, tmp_path, "m",
                 models={"m.sql": "{{ config(materialized='stream_table') }}select 1"})
    assert "models/m.sql:1: error: config `materialized` has an invalid value 'stream_table'" in msg
    assert "'streaming_table'" in msg


def test_restart_config_of_the_stream_service(tmp_path):
    for bad, said in (("max_restarts=-1", "max_restarts"), ("restart_backoff='soon'", "restart_backoff"),
                      ("restart_window=5", "restart_window")):
        msg = _error(render, tmp_path / bad[:5], "m",
                     models={"m.sql": f"{{{{ config({bad}) }}}}select 1"})
        assert msg.startswith("models/m.sql:1: error: config `" + said), msg


def test_every_error_of_a_load_is_reported(tmp_path):
    root = make_project(tmp_path, models={"m.sql": "select 1"}, yml={"p.yml": """\
        version: 2
        models:
          - name: m
            config:
              materalized: table
              stream_strategy: sometimes
        """})
    with pytest.raises(SqlflowError) as err:
        load_project(root)
    assert len(err.value.diagnostics) == 2


def test_sources_semantics_from_meta_and_config_meta(tmp_path):
    project = load_project(make_project(tmp_path, yml={"sources.yml": SOURCES_YML}))
    ad = project.source("ods", "ad_events")
    assert (ad.source_name, ad.name, ad.schema, ad.identifier) == ("ods", "ad_events", "raw",
                                                                    "ad_events_v2")
    assert ad.event_time == "event_ts" and ad.ingest_time == "kafka_ts"
    assert ad.allowed_lateness == timedelta(minutes=10)
    assert ad.future_tolerance == timedelta(seconds=30)
    assert ad.partition_column == "dt"
    assert ad.columns[0].name == "event_ts"
    assert (ad.path, ad.line) == ("models/sources.yml", 9)
    clicks = project.source("ods", "clicks")
    assert clicks.event_time == "click_ts" and clicks.future_tolerance == timedelta(hours=1)
    assert clicks.allowed_lateness == timedelta(minutes=5)  # source-level default
    assert "allowed_lateness" in clicks.declared and "partition_column" not in clicks.declared
    users = project.source("ods", "users")
    assert users.identifier == "users" and users.event_time is None
    assert project.source("ods", "nope") is None


def test_bad_duration_is_an_error_at_its_line(tmp_path):
    yml = SOURCES_YML.replace("future_tolerance: 30 seconds", "future_tolerance: 30 secnds")
    msg = _error(load_project, make_project(tmp_path, yml={"sources.yml": yml}))
    assert msg.startswith("models/sources.yml:17: error: `future_tolerance`: `30 secnds` has an "
                          "unknown time unit")


def test_unknown_source_semantics_key(tmp_path):
    yml = SOURCES_YML.replace("partition_column: dt", "partition_col: dt")
    msg = _error(load_project, make_project(tmp_path, yml={"sources.yml": yml}))
    assert msg == ("models/sources.yml:18: error: unknown sqlflow source key `partition_col`; "
                   "did you mean `partition_column`?")


def test_macros_are_found_with_file_and_line(tmp_path):
    root = make_project(tmp_path, macros={
        "joins.sql": "{# joins #}\n{% macro interval_join(a) %}{{ a }}{% endmacro %}\n\n"
                     "{% macro other() %}x{% endmacro %}",
        "materializations/st.sql": "{% materialization streaming_table, adapter='spark' %}\n"
                                   "{{ return({'relations': []}) }}\n{% endmaterialization %}"})
    macros = load_project(root).macros
    assert sorted(macros) == ["interval_join", "other"]
    assert (macros["interval_join"].path, macros["interval_join"].line) == ("macros/joins.sql", 2)
    assert macros["other"].line == 4


def test_duplicate_macro_and_model_names(tmp_path):
    root = make_project(tmp_path, models={"a/m.sql": "select 1", "b/m.sql": "select 2"},
                        macros={"x.sql": "{% macro f() %}{% endmacro %}",
                                "y.sql": "\n{% macro f() %}{% endmacro %}"})
    with pytest.raises(SqlflowError) as err:
        load_project(root)
    text = str(err.value)
    assert "two models are named `m` (models/a/m.sql and models/b/m.sql)" in text
    assert "macros/y.sql:2: error: macro `f` is defined twice (also macros/x.sql:1)" in text


def test_yaml_syntax_error_has_line(tmp_path):
    root = make_project(tmp_path, yml={"bad.yml": "version: 2\nmodels:\n  - name: [\n"})
    assert _error(load_project, root).startswith("models/bad.yml:4:")


def test_macro_syntax_error_has_line(tmp_path):
    root = make_project(tmp_path, macros={"m.sql": "{% macro f() %}\n{{ x( }}\n{% endmacro %}"})
    assert _error(load_project, root).startswith("macros/m.sql:2: error: Jinja syntax error")


def test_warnings_for_orphan_yml_and_unused_project_path(tmp_path):
    root = make_project(tmp_path, models={"staging/a.sql": "select 1"},
                        yml={"p.yml": "version: 2\nmodels:\n  - name: aa\n"},
                        project_yml={"models": {"testproj": {"stagin": {"+tags": ["x"]}}}})
    warnings = [w.format() for w in load_project(root).warnings]
    assert any("models/p.yml:3: warning: yml properties for model `aa`" in w for w in warnings)
    assert any("`models: testproj.stagin` in dbt_project.yml matches no model" in w
               for w in warnings)


def test_no_project_file(tmp_path):
    assert "no dbt_project.yml" in _error(load_project, tmp_path)


@pytest.mark.parametrize("text, expected", [
    ("10 minutes", timedelta(minutes=10)), ("30 seconds", timedelta(seconds=30)),
    ("1 hour", timedelta(hours=1)), ("2 days", timedelta(days=2)), ("500 ms", timedelta(milliseconds=500)),
    ("1.5 h", timedelta(minutes=90)), ("INTERVAL 20 MINUTES", timedelta(minutes=20)),
    ("0 seconds", timedelta(0)),
])
def test_parse_duration(text, expected):
    assert parse_duration(text) == expected


@pytest.mark.parametrize("bad", ["10", "ten minutes", "10 fortnights", "", 10, None, True])
def test_parse_duration_rejects(bad):
    with pytest.raises(ValueError):
        parse_duration(bad)


@given(st.integers(min_value=0, max_value=10**6),
       st.sampled_from(["seconds", "minutes", "hours", "days", "s", "min", "h", "d"]))
def test_parse_duration_scales_linearly(n, unit):
    assert parse_duration(f"{n} {unit}") == n * parse_duration(f"1 {unit}")


def test_sizes_and_triggers():
    assert parse_size("128MB") == 128 * 1024**2 and parse_size("1 GiB") == 1024**3
    assert ModelConfig(trigger="available-now").trigger == "available-now"
    assert ModelConfig(trigger="30 seconds").trigger == timedelta(seconds=30)
    assert ModelConfig(target_file_size="64mb").target_file_size == 64 * 1024**2
    with pytest.raises(ValueError):
        ModelConfig(trigger="whenever")
