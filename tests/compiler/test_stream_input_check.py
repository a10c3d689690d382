"""A `streaming_table` with no stream input: `check` names it at file:line, and a stream run
with `--full-refresh` stops at compile time, before any table is dropped (no JVM)."""

from __future__ import annotations

from click.testing import CliRunner

from helpers import AD_SOURCES_YML, make_project
from sqlflow.cli.main import main

MODELS = {
    "nostream.sql": "{{ config(materialized='streaming_table') }}\n"
                    "select d.ad_id, d.dt\nfrom {{ source('dim', 'dim_ad') }} d",
    "plain.sql": "{{ config(materialized='table') }}\nselect 1 as x",
    "ok.sql": "{{ config(materialized='streaming_table') }}\n"
              "select i.req_id, i.imp_ts from {{ source('ods', 'imps') }} i",
}
NOSTREAM = ("models/nostream.sql:3:6: error: model `nostream` is a `streaming_table` but reads no "
            "stream input (it reads `dim.dim_ad`): its stream has nothing to read; read an event "
            "source")


def cli(root, *args):
    return CliRunner().invoke(main, ["--project-dir", str(root), *args])


def test_check_reports_a_streaming_table_without_stream_input(tmp_path):
    root = make_project(tmp_path, models=MODELS, yml={"sources.yml": AD_SOURCES_YML})
    res = cli(root, "check")
    assert res.exit_code == 1
    assert NOSTREAM in res.output
    assert "`ok`" not in res.output and "`plain`" not in res.output


def test_full_refresh_stops_before_anything_is_removed(tmp_path):
    root = make_project(tmp_path, models=MODELS, yml={"sources.yml": AD_SOURCES_YML})
    res = cli(root, "run", "--mode", "stream", "--full-refresh", "--select", "nostream",
              "--trigger", "available-now")
    assert res.exit_code == 1
    assert NOSTREAM in res.stderr
    assert "removed" not in res.output  # the refresh prints what it removed


def test_batch_mode_still_backfills_it(tmp_path):
    root = make_project(tmp_path, models=MODELS, yml={"sources.yml": AD_SOURCES_YML})
    res = cli(root, "compile", "--mode", "batch", "--select", "nostream")
    assert res.exit_code == 0, res.output
