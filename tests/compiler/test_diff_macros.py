"""`sqlflow diff` on a macro change lists every model downstream of the macro's callers, and
outside a git repository says so (no JVM; a real git repository in tmp_path)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from click.testing import CliRunner

from helpers import AD_SOURCES_YML, make_project
from sqlflow.cli.main import main
from sqlflow.workflows.diff import diff_project

# cents() -> money() (a macro calling a macro); priced calls money(); two models below it
MACROS = {"money.sql": "{% macro money(col) %}round({{ col }}, 2){% endmacro %}\n"
                       "{% macro cents(col) %}{{ money(col) }} * 100{% endmacro %}\n"}
MODELS = {
    "priced.sql": "select req_id, {{ cents('ad_id') }} as price from {{ source('ods', 'imps') }}",
    "mid.sql": "select req_id, price from {{ ref('priced') }}",
    "top.sql": "select req_id from {{ ref('mid') }}",
    "apart.sql": "select req_id from {{ source('ods', 'clicks') }}",
}


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def test_macro_change_lists_every_model_downstream_of_its_callers(tmp_path):
    root = make_project(tmp_path / "p", models=MODELS, yml={"sources.yml": AD_SOURCES_YML},
                        macros=MACROS)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "base")
    (root / "macros" / "money.sql").write_text(MACROS["money.sql"].replace(", 2)", ", 4)"))
    diffs = {d.model: d for d in diff_project(root, "HEAD")}
    assert set(diffs) == {"priced", "mid", "top"}  # not apart
    assert diffs["priced"].status == "changed"
    assert [(d.status, d.impact) for d in (diffs["mid"], diffs["top"])] == [
        ("downstream", "backfill")] * 2
    [up] = diffs["top"].changes
    # priced calls cents, which calls the edited money: cents changed too
    assert up.note.startswith("reads `priced` (through its refs), which calls the changed macro "
                              "`cents`")
    out = CliRunner().invoke(main, ["--project-dir", str(root), "diff", "--base", "HEAD"])
    assert out.exit_code == 0, out.output
    assert "top: downstream — safe for a running stream; backfill history" in out.output


def test_diff_outside_a_git_repository_says_so(tmp_path):
    root = make_project(tmp_path / "p", models=MODELS, yml={"sources.yml": AD_SOURCES_YML},
                        macros=MACROS)
    env_ceiling = {"GIT_CEILING_DIRECTORIES": str(tmp_path)}
    out = CliRunner(env=env_ceiling).invoke(
        main, ["--project-dir", str(root), "diff", "--base", "HEAD"])
    assert out.exit_code == 1
    assert "is not inside a git repository, so there is no revision to compare with" in out.output
    assert "pass a commit" not in out.output
