"""Spark's analysis errors on real Spark: a model whose SQL compiles but names a column or a
function Spark does not know fails with the model file's line and column, in a batch run (API
and CLI) and in a stream run, also when Jinja above the mistake adds lines to the render."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from click.testing import CliRunner

from helpers import ad_sources_yml, make_project
from sqlflow.cli.main import main
from sqlflow.compiler import compile_project
from sqlflow.engine.context import Context
from sqlflow.errors import Location, SqlflowError
from sqlflow.runtime.dispatch import run_models, run_stream

pytestmark = pytest.mark.spark

ODS, DW = "rt_anerr_ods", "rt_anerr_dw"
PROFILES = f"""\
sqlflow:
  target: local
  outputs:
    local: {{type: spark, method: session, host: NA, schema: {DW}}}
"""
MODELS = {
    "plain.sql": """\
{{ config(materialized='table') }}
SELECT i.req_id,
       i.nosuch AS x
FROM {{ source('ods', 'imps') }} AS i
""",
    # the comment and `set` render no lines, the loop three from three: line 11 renders as 7
    "shifted.sql": """\
{{ config(materialized='streaming_table', partition_by=['dt']) }}
{#- which columns to keep,
    decided upstream -#}
{% set keep = ['ad_id', 'imp_ts'] %}
SELECT i.req_id,
{%- for c in keep %}
       i.{{ c }},
{%- endfor %}
       to_date(i.imp_ts) AS dt
FROM {{ source('ods', 'imps') }} AS i
WHERE i.ad_id > 0 AND i.adid IS NOT NULL
""",
    "nofunc.sql": """\
{{ config(materialized='table') }}
SELECT i.req_id, no_such_udf(i.ad_id) AS f
FROM {{ source('ods', 'imps') }} AS i
""",
}
SHIFTED_AT = Location("models/shifted.sql", 11, 23)
T = datetime(2026, 11, 1, 10, tzinfo=timezone.utc)


@pytest.fixture(scope="module")
def ctx(spark, tmp_path_factory):
    for db in (ODS, DW):
        spark.sql(f"DROP DATABASE IF EXISTS {db} CASCADE")
        spark.sql(f"CREATE DATABASE {db}")
    rows = [(f"r{k}", k, T, T, "2026-11-01") for k in range(3)]
    spark.createDataFrame(rows, "req_id string, ad_id bigint, imp_ts timestamp, ingest_ts timestamp, "
                                "dt string").write.format("delta").saveAsTable(f"{ODS}.imps")
    root = make_project(tmp_path_factory.mktemp("analysis_errors"), models=MODELS,
                        yml={"sources.yml": ad_sources_yml(ODS)}, profiles_yml=PROFILES)
    yield Context.with_session(spark, root)
    for db in (ODS, DW):
        spark.sql(f"DROP DATABASE IF EXISTS {db} CASCADE")


def plan(ctx, name: str, mode: str = "batch"):
    result = compile_project(ctx.project_dir, mode=mode, target=ctx.target)
    result.raise_if_errors()
    return result.plans[name]


def test_an_unknown_column_fails_the_batch_run_at_its_line_and_column(ctx):
    with pytest.raises(SqlflowError) as err:
        list(run_models(ctx, [plan(ctx, "plain")]))
    (diag,) = err.value.diagnostics
    assert diag.location == Location("models/plain.sql", 3, 8)
    assert diag.message == "model `plain`: column `i`.`nosuch` does not exist"
    assert "`i`.`req_id`" in diag.hint and "`i`.`ad_id`" in diag.hint  # Spark's suggestions
    assert not ctx.spark.catalog.tableExists(f"{DW}.plain")


def test_jinja_above_the_mistake_does_not_shift_the_reported_line(ctx):
    p = plan(ctx, "shifted")
    rendered = [n for n, line in enumerate(p.source_map.rendered_lines, 1) if "i.adid" in line]
    assert rendered == [7]  # the Jinja above moved it up four lines in the SQL Spark sees
    with pytest.raises(SqlflowError) as err:
        list(run_models(ctx, [p]))
    assert err.value.diagnostics[0].location == SHIFTED_AT


def test_an_unknown_function_is_located(ctx):
    with pytest.raises(SqlflowError) as err:
        list(run_models(ctx, [plan(ctx, "nofunc")]))
    (diag,) = err.value.diagnostics
    assert diag.location == Location("models/nofunc.sql", 2, 18)
    assert diag.message == "model `nofunc`: function `no_such_udf` does not exist"


def test_the_cli_prints_file_line_and_column(ctx):
    res = CliRunner().invoke(main, ["--project-dir", str(ctx.project_dir), "run", "--mode", "batch",
                                    "--select", "shifted"])
    assert res.exit_code == 1, res.output
    assert (f"{SHIFTED_AT}: error: model `shifted`: column `i`.`adid` does not exist; "
            "Spark suggests") in " ".join(res.output.split())


def test_a_stream_run_fails_at_the_same_place(ctx):
    p = plan(ctx, "shifted", mode="stream")
    assert p.mode == "stream" and p.strategy == "incremental"
    with pytest.raises(SqlflowError) as err:
        run_stream(ctx, p)
    (diag,) = err.value.diagnostics
    assert diag.location == SHIFTED_AT
    assert "target/sqlflow/stream/shifted.sql" in diag.hint
