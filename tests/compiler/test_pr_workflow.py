"""`sqlflow check`, `sqlflow diff` and `sqlflow lineage` on small projects in tmp_path.

No Spark: every command here compiles only. The diff and --changed-since tests build a real
git repository with two commits.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from helpers import AD_SOURCES_YML, make_project
from sqlflow.cli.main import main
from sqlflow.errors import Diagnostic, Location
from sqlflow.project.load import load_project
from sqlflow.workflows.changes import changed_files, touched_models
from sqlflow.workflows.check import check_project, format_github
from sqlflow.workflows.diff import diff_project
from sqlflow.workflows.lineage import column_lineage

ROOT = Path(__file__).resolve().parents[2]
ST = "{{ config(materialized='streaming_table', partition_by=['dt']) }}\n"

STG_IMPS = ST + """\
select req_id, ad_id, imp_ts, ingest_ts, to_date(imp_ts) as dt
from {{ source('ods', 'imps') }}
"""
STG_CLICKS = ST + """\
select req_id, ad_id, click_ts, ingest_ts, to_date(click_ts) as dt
from {{ source('ods', 'clicks') }}
"""
JOINED = ST + """\
with pairs as (
    select i.req_id, i.imp_ts, c.click_ts, c.req_id as click_req, i.dt
    from {{ ref('stg_imps') }} as i
    {{ interval_join('left', ref('stg_clicks'), 'c', 'i', keys=['req_id'], left_time='imp_ts',
                     right_time='click_ts', lower='0 seconds', upper='20 minutes') }}
)
select req_id, imp_ts, click_ts,
       case when click_req is null then 0 else 1 end as label,
       dt
from pairs
"""
# The same join without a time bound: not streamable.
UNBOUNDED = ST + """\
select i.req_id, i.imp_ts, c.click_ts, i.dt
from {{ ref('stg_imps') }} as i
join {{ ref('stg_clicks') }} as c
  on i.req_id = c.req_id
"""


def project(tmp_path: Path, **models: str) -> Path:
    root = make_project(tmp_path / "p", models={
        "stg_imps.sql": STG_IMPS, "stg_clicks.sql": STG_CLICKS, **models},
        yml={"sources.yml": AD_SOURCES_YML})
    (root / "macros").mkdir(exist_ok=True)
    shutil.copy(ROOT / "macros" / "interval_join.sql", root / "macros" / "interval_join.sql")
    return root


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                          text=True).stdout


def commit_all(root: Path, message: str) -> None:
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", message)


def repo(tmp_path: Path, **models: str) -> Path:
    root = project(tmp_path, **models)
    git(root, "init", "-q")
    commit_all(root, "base")
    return root


def run_cli(root: Path, *args: str):
    return CliRunner().invoke(main, ["--project-dir", str(root), *args])


# --- check -------------------------------------------------------------------------------------


def test_check_passes_a_streamable_project(tmp_path):
    root = project(tmp_path, **{"joined.sql": JOINED})
    result = check_project(root)
    assert result.errors == []
    assert set(result.models) == {"stg_imps", "stg_clicks", "joined"}
    out = run_cli(root, "check")
    assert out.exit_code == 0, out.output
    assert "checked 3 model(s) (all): 0 error(s)" in out.output


def test_check_reports_unbounded_join_with_location_and_exit_1(tmp_path):
    root = project(tmp_path, **{"bad.sql": UNBOUNDED})
    result = check_project(root)
    [err] = result.errors
    assert err.location.path == "models/bad.sql"
    assert (err.location.line, err.location.col) == (4, 1)
    assert "no time bound" in err.message
    out = run_cli(root, "check")
    assert out.exit_code == 1
    assert "models/bad.sql:4:1: error: model `bad`: join of two streams" in out.output
    # the batch-mode warning of the same finding is folded into the error
    assert "warning" not in out.output.split("checked")[0]


def test_check_github_format_prints_annotations(tmp_path):
    root = project(tmp_path, **{"bad.sql": UNBOUNDED})
    out = run_cli(root, "check", "--format", "github")
    assert out.exit_code == 1
    line = next(ln for ln in out.output.splitlines() if ln.startswith("::error"))
    assert line.startswith("::error file=models/bad.sql,line=4,col=1::model `bad`: join of two")


def test_github_annotation_escapes_data_and_properties():
    d = Diagnostic("100% bad\nsecond line", Location("models/a,b:c.sql", 3, 0), severity="warning")
    assert format_github(d) == "::warning file=models/a%2Cb%3Ac.sql,line=3::100%25 bad%0Asecond line"
    assert format_github(Diagnostic("no place")) == "::error::no place"


def test_check_reports_render_errors_as_findings(tmp_path):
    root = project(tmp_path, **{"broken.sql": "select * from {{ ref('nope') }}"})
    out = run_cli(root, "check")
    assert out.exit_code == 1
    assert "`ref('nope')`: no model named `nope`" in out.output


def test_changed_since_checks_touched_models_and_descendants_only(tmp_path):
    root = repo(tmp_path, **{"joined.sql": JOINED, "other.sql": "select 1 as x"})
    (root / "models" / "stg_clicks.sql").write_text(STG_CLICKS + "where ad_id is not null\n")
    files = changed_files(root, "HEAD")
    assert files == {"models/stg_clicks.sql"}
    result = check_project(root, changed_since="HEAD")
    assert set(result.models) == {"stg_clicks", "joined"}  # not stg_imps, not other
    assert result.errors == []


def test_changed_since_follows_macros_and_yml(tmp_path):
    root = repo(tmp_path, **{"joined.sql": JOINED})
    macro = root / "macros" / "interval_join.sql"
    macro.write_text(macro.read_text() + "\n{# touched #}\n")
    assert touched_models(load_project(root), changed_files(root, "HEAD")) == {"joined"}
    git(root, "checkout", "-q", "--", ".")
    (root / "models" / "sources.yml").write_text(AD_SOURCES_YML.replace("10 minutes", "15 minutes"))
    assert touched_models(load_project(root), changed_files(root, "HEAD")) == {"stg_imps", "stg_clicks"}


def test_changed_since_catches_a_new_unsafe_model_and_a_bad_ref(tmp_path):
    root = repo(tmp_path)
    (root / "models" / "bad.sql").write_text(UNBOUNDED)  # untracked: still a change
    out = run_cli(root, "check", "--changed-since", "HEAD", "--format", "github")
    assert out.exit_code == 1
    assert "::error file=models/bad.sql,line=4,col=1::" in out.output
    out = run_cli(root, "check", "--changed-since", "no-such-ref")
    assert out.exit_code == 1
    assert "no-such-ref" in out.output


# --- diff --------------------------------------------------------------------------------------


def test_diff_classifies_changes_between_two_commits(tmp_path):
    root = repo(tmp_path, **{"joined.sql": JOINED})
    # second commit: wider interval, one column more in staging, a comment-only edit, a new model
    (root / "models" / "joined.sql").write_text(JOINED.replace("upper='20 minutes'", "upper='30 minutes'"))
    (root / "models" / "stg_imps.sql").write_text(STG_IMPS.replace("ad_id, imp_ts", "ad_id, ad_id as ad2, imp_ts"))
    (root / "models" / "stg_clicks.sql").write_text("-- a comment\n" + STG_CLICKS)
    (root / "models" / "new_one.sql").write_text("select 1 as x")
    commit_all(root, "change")
    diffs = {d.model: d for d in diff_project(root, "HEAD~1")}
    assert set(diffs) == {"joined", "stg_imps", "new_one"}  # stg_clicks: comment only

    joined = diffs["joined"]
    assert joined.impact == "full_refresh"
    [join] = [c for c in joined.changes if c.term == "joins"]
    assert "INTERVAL 20 MINUTES" in join.before[0] and "INTERVAL 30 MINUTES" in join.after[0]

    stg = diffs["stg_imps"]
    assert stg.impact == "backfill"
    [cols] = stg.changes
    assert cols.term == "columns" and cols.note == "added ad2"
    assert diffs["new_one"].status == "added"

    out = run_cli(root, "diff", "--base", "HEAD~1", "--format", "json")
    assert out.exit_code == 0, out.output
    data = {d["model"]: d for d in json.loads(out.output)}
    assert data["joined"]["impact"] == "full_refresh"
    assert data["stg_imps"]["changes"][0]["after"][2] == "ad2"
    text = run_cli(root, "diff", "--base", "HEAD~1")
    assert "joined: changed — STATE-INCOMPATIBLE" in text.output
    assert "columns: added ad2" in text.output


def test_diff_sees_key_and_join_type_changes_and_removed_columns(tmp_path):
    root = repo(tmp_path, **{"joined.sql": JOINED})
    changed = JOINED.replace("interval_join('left'", "interval_join('inner'").replace(
        "keys=['req_id']", "keys=['req_id', 'ad_id']").replace("       dt\n", "       dt, imp_ts as t2\n")
    (root / "models" / "joined.sql").write_text(changed.replace("select req_id, imp_ts, click_ts,", "select req_id, imp_ts,"))
    diffs = {d.model: d for d in diff_project(root, "HEAD")}  # working tree vs HEAD
    [join] = [c for c in diffs["joined"].changes if c.term == "joins"]
    assert join.before[0].startswith("left interval i~c keys [req_id=req_id]")
    assert join.after[0].startswith("inner interval i~c keys [req_id=req_id, ad_id=ad_id]")
    [cols] = [c for c in diffs["joined"].changes if c.term == "columns"]
    assert cols.note == "added t2; removed click_ts"


def test_diff_of_unknown_base_is_a_clear_error(tmp_path):
    root = repo(tmp_path)
    out = run_cli(root, "diff", "--base", "nope")
    assert out.exit_code == 1
    assert "nope" in out.output and "pass a commit" in out.output


# --- lineage -----------------------------------------------------------------------------------


def test_lineage_follows_ctes_macros_and_refs_to_sources(tmp_path):
    root = project(tmp_path, **{"joined.sql": JOINED})
    tree = column_lineage(root, "joined.label")
    # label reads click_req, a CTE column renamed from stg_clicks.req_id, from the source
    assert tree.sources() == ["ods.clicks.req_id"]
    [step] = tree.upstream
    assert (step.kind, step.relation, step.column) == ("model", "stg_clicks", "req_id")
    assert tree_of(column_lineage(root, "joined.dt")) == ["ods.imps.imp_ts"]


def tree_of(node):
    return node.sources()


def test_lineage_cli_text_json_and_errors(tmp_path):
    root = project(tmp_path, **{"joined.sql": JOINED})
    out = run_cli(root, "lineage", "joined.click_ts")
    assert out.exit_code == 0, out.output
    assert out.output.splitlines()[:3] == [
        "joined.click_ts", "  stg_clicks.click_ts", "    ods.clicks.click_ts  (source)"]
    data = json.loads(run_cli(root, "lineage", "joined.imp_ts", "--format", "json").output)
    assert data["sources"] == ["ods.imps.imp_ts"]
    bad = run_cli(root, "lineage", "joined.labl")
    assert bad.exit_code == 1 and "did you mean `label`?" in bad.output
    assert run_cli(root, "lineage", "joined").exit_code == 1


@pytest.mark.parametrize("column,source", [
    ("dwd_ad_click_samples.label", "ods.ods_ad_clicks.req_id"),
    ("dwd_ad_clicks_attributed.imp_user_id", "ods.ods_ad_impressions.user_id"),
])
def test_lineage_of_the_demo_project(column, source):
    assert column_lineage(ROOT, column).sources() == [source]


def test_diff_describes_each_member_of_a_routed_group():
    """The demo project fuses six `ue_*` models into one routed group: diff describes every
    member as its own model (it once failed on the group's name, which has no IR)."""
    from sqlflow.workflows.diff import facts_of

    facts = facts_of(Path(__file__).resolve().parents[2])
    members = sorted(m for m in facts if m.startswith("ue_"))
    assert members == ["ue_ad", "ue_game", "ue_live", "ue_main", "ue_manga", "ue_music"]
    assert "user_events_by_department" not in facts
    ad = facts["ue_ad"]
    assert ad.sink.startswith("dw.ue_ad ") and ad.partition_by == ("dt", "hour", "event_type", "product")
    assert ad.strategy == "incremental" and ad.watermarks == ()
