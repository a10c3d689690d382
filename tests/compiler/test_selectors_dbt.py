"""The selector cases of test_selectors.py, asked of real dbt (`dbt ls`): dbt selects the same
models. dbt parses the project once; `dbt ls` then reuses the manifest (no JVM: listing needs
no connection)."""

from __future__ import annotations

import os

import pytest

from helpers import make_project

from .test_selectors import CASES, EXCLUDES, MODELS, SOURCES

pytestmark = pytest.mark.dbt


@pytest.fixture(scope="module")
def dbt_ls(tmp_path_factory):
    from dbt.cli.main import dbtRunner

    os.environ.setdefault("DBT_SEND_ANONYMOUS_USAGE_STATS", "false")
    root = make_project(tmp_path_factory.mktemp("dbtsel"), models=MODELS, yml=SOURCES)
    common = ["--project-dir", str(root), "--profiles-dir", str(root / "profiles"),
              "--target-path", str(root / "target"), "--log-path", str(root / "logs"), "--quiet"]
    parsed = dbtRunner().invoke(["parse", *common])
    assert parsed.success, parsed.exception
    runner = dbtRunner(manifest=parsed.result)

    def ls(select, exclude=None) -> set[str]:
        words = [select] if isinstance(select, str) else list(select or [])
        args = ["--select", *words] if words else []
        args += ["--exclude", *exclude.split()] if exclude else []
        res = runner.invoke(["ls", *common, "--resource-type", "model", "--output", "name", *args])
        assert res.success, res.exception
        return set(res.result or [])

    return ls


@pytest.mark.parametrize("selector, expected", CASES, ids=lambda c: str(c))
def test_dbt_selects_the_same_models(dbt_ls, selector, expected):
    assert dbt_ls(selector) == set(expected)


@pytest.mark.parametrize("select, exclude, expected", EXCLUDES)
def test_dbt_excludes_the_same_models(dbt_ls, select, exclude, expected):
    assert dbt_ls(select, exclude) == set(expected)
