"""Snapshots and Python models are left to dbt, and every command that compiles says so once,
with the dbt command that builds them (no JVM)."""

from __future__ import annotations

from click.testing import CliRunner

from helpers import make_project
from sqlflow.cli.main import main

PY_MODEL = "def model(dbt, session):\n    return dbt.ref('base')\n"
SNAPSHOT = """{% snapshot orders_snap %}
{{ config(target_schema='snapshots', unique_key='id', strategy='timestamp', updated_at='ts') }}
select * from {{ ref('base') }}
{% endsnapshot %}
"""
YML_SNAPSHOT = ("snapshots:\n  - name: base_snap\n    relation: ref('base')\n"
                "    config: {unique_key: id, strategy: check, check_cols: all}\n")


def test_python_models_and_snapshots_are_named_once_with_the_dbt_command(tmp_path):
    root = make_project(tmp_path, models={"base.sql": "select 1 as id", "marts/py_top.py": PY_MODEL},
                        files={"snapshots/orders.sql": SNAPSHOT, "snapshots/more.yml": YML_SNAPSHOT})
    res = CliRunner().invoke(main, ["--project-dir", str(root), "compile", "--mode", "batch"])
    assert res.exit_code == 0, res.output
    python = ("models/marts/py_top.py: warning: sqlflow does not run Python models; it leaves "
              "`py_top` (models/marts/py_top.py) to dbt; build them with "
              "`sqlflow dbt run --select py_top` (dbt's own runner)")
    snaps = ("snapshots/orders.sql: warning: sqlflow does not run snapshots; it leaves "
             "`orders_snap` (snapshots/orders.sql), `base_snap` (snapshots/more.yml) to dbt; "
             "build them with `sqlflow dbt snapshot`")
    assert res.stderr.count(python) == 1
    assert res.stderr.count(snaps) == 1
    check = CliRunner().invoke(main, ["--project-dir", str(root), "check"])
    assert check.output.count("sqlflow does not run snapshots") == 1, check.output
    assert check.output.count("sqlflow does not run Python models") == 1


def test_a_plain_project_has_no_such_notice(tmp_path):
    root = make_project(tmp_path, models={"base.sql": "select 1 as id"})
    res = CliRunner().invoke(main, ["--project-dir", str(root), "compile", "--mode", "batch"])
    assert res.exit_code == 0 and "leaves" not in res.stderr


UNIT_TESTS = """version: 2
unit_tests:
  - name: test_base_keeps_ids
    model: base
    given: []
    expect:
      rows:
        - {id: 1}
"""


def test_unit_tests_are_named_once_with_the_dbt_command(tmp_path):
    root = make_project(tmp_path, models={"base.sql": "select 1 as id"},
                        yml={"models/units.yml": UNIT_TESTS})
    res = CliRunner().invoke(main, ["--project-dir", str(root), "compile", "--mode", "batch"])
    assert res.exit_code == 0, res.output
    assert res.stderr.count(
        "models/units.yml: warning: sqlflow does not run dbt unit tests; it leaves "
        "`test_base_keeps_ids` (models/units.yml) to dbt; run them with "
        "`sqlflow dbt test --select test_type:unit`") == 1, res.stderr
