"""`sqlflow compile` as a user runs it: output, artifacts, exit codes, error lines. No JVM."""

from __future__ import annotations

import json

from click.testing import CliRunner

from helpers import AD_SOURCES_YML, make_project
from sqlflow.cli.main import main

SOURCES = AD_SOURCES_YML

GOOD = """{{ config(materialized='streaming_table', partition_by=['dt']) }}
SELECT i.req_id, i.imp_ts, to_date(i.imp_ts) AS dt
FROM {{ source('ods', 'imps') }} AS i
WHERE i.ad_id > {{ var('min_ad', 0) }}
"""

BAD = """{{ config(materialized='streaming_table', partition_by=['dt']) }}
SELECT i.req_id, now() AS seen,
       to_date(i.imp_ts) AS dt
FROM {{ source('ods', 'imps') }} AS i
JOIN {{ source('ods', 'clicks') }} AS c ON i.req_id = c.req_id
ORDER BY i.imp_ts
"""


def run(root, *args):
    return CliRunner().invoke(main, ["--project-dir", str(root), "compile", *args])


def project(tmp_path, **models):
    return make_project(tmp_path, models={f"{k}.sql": v for k, v in models.items()},
                        yml={"sources.yml": SOURCES})


def test_compile_prints_sql_and_writes_artifacts(tmp_path):
    root = project(tmp_path, good=GOOD)
    res = run(root, "--mode", "stream")
    assert res.exit_code == 0, res.output
    assert "FROM __sqlflow_delta__ods__imps AS i" in res.stdout
    assert (root / "target/sqlflow/stream/good.sql").read_text().startswith(
        "-- model: good (models/good.sql); mode: stream; strategy: incremental")
    data = json.loads((root / "target/sqlflow/stream/good.json").read_text())
    assert data["kind"] == "StreamPlan" and data["sink"]["write"] == "append_once"


def test_compile_json_format_and_vars(tmp_path):
    root = project(tmp_path, good=GOOD)
    res = run(root, "--mode", "batch", "--format", "json", "--vars", "{min_ad: 7}")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["kind"] == "BatchPlan" and "i.ad_id > 7" in data["sql"]


def test_stream_errors_list_every_problem_with_file_line_col(tmp_path):
    root = project(tmp_path, good=GOOD, bad=BAD)
    res = run(root, "--mode", "stream")
    assert res.exit_code == 1
    lines = [line for line in res.stderr.splitlines() if line.startswith("models/bad.sql:")]
    assert len(lines) == 3, res.stderr
    assert lines[0].startswith("models/bad.sql:2:18: error: model `bad`: `now()` reads the wall clock")
    assert any(line.startswith("models/bad.sql:5:1: error: model `bad`: join of two streams `i` and `c`") for line in lines)
    assert any("ORDER BY" in line and line.startswith("models/bad.sql:6:") for line in lines)
    assert "Traceback" not in res.output


def test_batch_mode_warns_and_succeeds(tmp_path):
    root = project(tmp_path, bad=BAD)
    res = run(root, "--mode", "batch")
    assert res.exit_code == 0, res.output
    assert "warning: model `bad` cannot stream" in res.stderr


def test_unknown_select_suggests(tmp_path):
    root = project(tmp_path, good=GOOD)
    res = run(root, "--mode", "batch", "--select", "godo")
    assert res.exit_code == 1
    assert "did you mean `good`?" in res.stderr


def test_unknown_ref_is_one_line_with_location(tmp_path):
    root = project(tmp_path, m="SELECT * FROM {{ ref('missing_model') }}\n")
    res = run(root, "--mode", "batch")
    assert res.exit_code == 1
    assert res.stderr.startswith("models/m.sql:1")
    assert "missing_model" in res.stderr and "Traceback" not in res.output


def test_stray_commas_sqlglot_would_drop_are_syntax_errors(tmp_path):
    # sqlglot parses `a,, b` and `b, FROM` leniently; Spark (and so dbt) refuses them
    root = project(tmp_path, m="{{ config(materialized='table') }}\nSELECT a,, b\nFROM t\n",
                   n="{{ config(materialized='table') }}\nSELECT a,\n  b,\nFROM t\n")
    res = run(root, "--mode", "batch")
    assert res.exit_code == 1
    lines = res.stderr.splitlines()
    assert lines[0].startswith("models/m.sql:2:9: error: SQL syntax error: stray comma before `,`")
    assert lines[1].startswith("models/n.sql:3:4: error: SQL syntax error: stray comma before `FROM`")


def test_select_folder_and_exclude(tmp_path):
    root = make_project(tmp_path, models={"staging/good.sql": GOOD, "staging/other.sql": GOOD,
                                          "marts/top.sql": "select * from {{ ref('good') }}"},
                        yml={"sources.yml": SOURCES})
    res = run(root, "--mode", "batch", "--select", "staging good+", "--exclude", "other")
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in (root / "target/sqlflow/batch").glob("*.sql")) == [
        "good.sql", "top.sql"]
