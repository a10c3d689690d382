"""sqlflow's rendered batch SQL is the statement `dbt compile` renders (dbt-spark, in-process).

dbt-spark's `session` method takes the SparkSession already running in this process (the
`spark` fixture), so dbt needs no warehouse of its own; `--no-populate-cache` keeps it from
querying the catalog. Statements are compared after sqlglot normalisation (Spark dialect,
identifiers normalised, whitespace and quoting irrelevant).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlglot
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers

from helpers import make_project, make_target
from sqlflow.project.load import load_project
from sqlflow.project.profiles import load_target
from sqlflow.rendering.render import render_project

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.spark, pytest.mark.dbt]


def normalized(sql: str) -> str:
    """One canonical text per statement; falls back to collapsed whitespace if unparsable."""
    try:
        trees = sqlglot.parse(sql, read="spark")
    except sqlglot.errors.ParseError:
        return " ".join(sql.split())
    return ";\n".join(normalize_identifiers(tree, dialect="spark").sql(dialect="spark",
                                                                      normalize=True)
                      for tree in trees if tree is not None)


def dbt_compile(project_dir: Path, out: Path) -> dict[str, str]:
    """`dbt compile` in this process; compiled SQL by project-relative model path."""
    from dbt.cli.main import dbtRunner

    result = dbtRunner().invoke([
        "compile", "--project-dir", str(project_dir),
        "--profiles-dir", str(project_dir / "profiles"),
        "--target-path", str(out), "--log-path", str(out / "logs"), "--no-populate-cache",
        "--no-send-anonymous-usage-stats",  # and no .user.yml written into profiles/
    ])
    assert result.success, f"dbt compile failed: {result.exception}"
    compiled = {}
    for folder in (out / "compiled").iterdir():  # compiled/<project name>/<model path>
        for file in folder.rglob("*.sql"):
            rel = file.relative_to(folder).as_posix()
            if rel.startswith("models/") and not file.parent.name.endswith(".yml"):
                compiled[rel] = file.read_text()
    return compiled


def assert_conforms(project_dir: Path, target, out: Path, exact: bool = False) -> int:
    rendered = render_project(load_project(project_dir), target, mode="batch").models
    compiled = dbt_compile(project_dir, out)
    ours = {m.path: m.sql for m in rendered.values()}
    assert sorted(ours) == sorted(compiled)
    for path, sql in ours.items():
        if exact:
            assert sql == compiled[path], path
        assert normalized(sql) == normalized(compiled[path]), path
    return len(ours)


def test_every_repo_model_renders_as_dbt_compiles_it(spark, tmp_path):
    if not any((ROOT / "models").rglob("*.sql")):
        pytest.skip("the repo has no models yet")
    target = load_target(ROOT, load_project(ROOT).profile or "sqlflow")
    assert assert_conforms(ROOT, target, tmp_path / "dbt") > 0


MACROS = {"sqlflow_test.sql": """\
    {% macro interval_join(left, right, key, l_ts, r_ts, lower, upper) -%}
    {{ left }} AS l
      JOIN {{ right }} AS r
        ON l.{{ key }} = r.{{ key }}
       AND r.{{ r_ts }} BETWEEN l.{{ l_ts }} + INTERVAL {{ lower }}
                            AND l.{{ l_ts }} + INTERVAL {{ upper }}
    {%- endmacro %}

    {% macro window_minutes() %}{{ return(var('window_minutes', 20)) }}{% endmacro %}

    {% macro partition_cols(ts) -%}
      {%- for part, fmt in [('dt', 'yyyy-MM-dd'), ('hour', 'HH')] %}
      date_format({{ ts }}, '{{ fmt }}') AS {{ part }}{{ ',' if not loop.last }}
      {%- endfor %}
    {%- endmacro %}
    """}

MODELS = {
    "staging/stg_imps.sql": """\
        {{ config(materialized='table', schema='stg') }}
        SELECT imp_id, user_id, imp_ts, {{ partition_cols('imp_ts') }}
        FROM {{ source('ods', 'impressions') }}
        WHERE imp_ts IS NOT NULL
        """,
    "staging/stg_clicks.sql": """\
        SELECT c.click_id, c.user_id, c.imp_id, c.click_ts, u.segment
        FROM {{ source('ods', 'clicks') }} AS c
        LEFT JOIN {{ source('dims', 'users') }} AS u ON u.user_id = c.user_id
        """,
    "marts/ad_samples.sql": """\
        {{ config(alias='ad_training_samples', materialized='streaming_table') }}
        -- {{ this }} on {{ target.name }}
        SELECT l.imp_id, l.user_id, r.click_id IS NOT NULL AS clicked
        FROM {{ interval_join(ref('stg_imps'), ref('stg_clicks'), 'imp_id', 'imp_ts', 'click_ts',
                              '0 MINUTES', window_minutes() ~ ' MINUTES') }}
        {% if is_incremental() %}WHERE 1 = 0{% endif %}
        """,
}

SOURCES = {"sources.yml": """\
    version: 2
    sources:
      - name: ods
        schema: ods_raw
        tables:
          - name: impressions
            identifier: ad_impressions
            meta:
              sqlflow: {event_time: imp_ts, ingest_time: kafka_ts, allowed_lateness: 10 minutes}
          - name: clicks
            config:
              meta:
                sqlflow: {event_time: click_ts, ingest_time: kafka_ts}
      - name: dims
        schema: "{{ target.schema }}_dims"
        tables:
          - name: users
            identifier: "users_{{ var('dim_version', 'v1') }}"
    """}


def test_project_macros_render_as_dbt_compiles_them(spark, tmp_path):
    root = make_project(tmp_path / "project", models=MODELS, macros=MACROS, yml=SOURCES,
                        project_yml={"vars": {"window_minutes": 30}})
    assert assert_conforms(root, make_target(), tmp_path / "dbt", exact=True) == 3
