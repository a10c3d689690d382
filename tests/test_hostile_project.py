"""A hostile project run through every command (docs/semantics.md, "What the Jinja sandbox
guarantees" and "Table ownership"): template injection, a secret, configs naming another
table, identifier injection, a bad file name and a duplicate yml key. Each case is refused
with its message by `check`, `compile`, `run --mode batch` and `run --mode stream
--full-refresh` (or, for a table sqlflow cannot see at compile time, by the runs), and after
every command nothing outside the project has changed and every source and model table still
holds exactly its rows."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from helpers import make_project, ods_sources_yml, table_names
from runtime.adkit import CLICK_SCHEMA, at, click
from sqlflow.cli import main

pytestmark = pytest.mark.spark

ODS, DW, OTHER = "hx_ods", "hx_dw", "hx_other"
SECRET = "hx-s3cr3t-77"
PROFILES = f"""\
sqlflow:
  target: local
  outputs:
    local: {{type: spark, method: session, host: NA, schema: {DW}}}
"""
SOURCES = ods_sources_yml(ODS, clicks="click_ts")
STREAM = "{{ config(materialized='streaming_table', partition_by=['dt']) }}\n"
SELECT = "SELECT c.req_id, c.click_ts, to_date(c.click_ts) AS dt FROM {{ source('ods', 'clicks') }} AS c\n"
BASE = {"stg_clicks.sql": STREAM + SELECT,
        "victim.sql": "{{ config(materialized='table') }}\nSELECT req_id FROM {{ ref('stg_clicks') }}\n"}


def evil(config: str, body: str = SELECT) -> dict[str, str]:
    """A stream model `evil` with `config` on line 1."""
    return {"evil.sql": "{{ config(materialized='streaming_table', partition_by=['dt']" + config
            + ") }}\n" + body}


# case: (files to add, yml override, message, does compile refuse it?)
CASES = {
    "shell": (evil("", "SELECT '{{ modules.datetime.sys.modules['os'].system('touch CANARY') }}' AS x,\n"
                   + SELECT.replace("SELECT ", "")), None, "models/evil.sql:2: error: ", True),
    "globals": (evil("", "{{ cycler.__init__.__globals__.os.popen('touch CANARY').read() }}\n" + SELECT),
                None, "the Jinja sandbox refused this", True),
    "read_file": (evil("", "{% include '/etc/passwd' %}\n" + SELECT), None,
                  "`include`, `import` and `extends` cannot load", True),
    "secret": (evil("", "SELECT '{{ env_var(\"DBT_ENV_SECRET_HX\") }}' AS k, c.req_id, c.click_ts, "
                    "to_date(c.click_ts) AS dt FROM {{ source('ods', 'clicks') }} AS c\n"), None,
               "secret environment variables", True),
    "quarantine_is_source": (evil(", quarantine='" + ODS + ".clicks'"), None,
                             f"models/evil.sql:1: error: model `evil`: its quarantine table `{ODS}.clicks` "
                             "is the declared source `ods.clicks`", True),
    "two_models_one_relation": (evil(", alias='stg_clicks'"), None,
                                "models/evil.sql:1: error: model `evil`: its sink table", True),
    "undeclared_table": (evil(", quarantine='" + OTHER + ".foreign'"), None,
                         "model `evil` would", False),
    "alias_injection": (evil(", alias=\"v` AS SELECT 1 AS a; -- \""), None,
                        "models/evil.sql:1: error: model `evil`'s table", True),
    "schema_location": (evil(", schema=\"x` LOCATION 'OUTSIDE' --\""), None,
                        "models/evil.sql:1: error: model `evil`'s database", True),
    "file_name": ({"my model.sql": SELECT}, None, "model file `models/my model.sql`", True),
    "duplicate_key": ({}, SOURCES.replace("future_tolerance: 5 minutes}",
                                          "future_tolerance: 5 minutes}\n        meta: {}"),
                      "key `meta` is written twice", True),
}


def _rows(spark, table):
    return sorted(tuple(r) for r in spark.table(table).collect())


def _tables(spark):
    return {f"{db}.{t}": _rows(spark, f"{db}.{t}") for db in (ODS, DW, OTHER) for t in table_names(spark, db)}


def _files(folder: Path):
    return {str(p.relative_to(folder)): p.stat().st_size for p in folder.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def base(spark, tmp_path_factory):
    for db in (ODS, DW, OTHER):
        spark.sql(f"DROP DATABASE IF EXISTS {db} CASCADE")
        spark.sql(f"CREATE DATABASE {db}")
    rows = [click(f"r{i}", at(1, 10, i)) for i in range(6)] + [click("late", at(1, 8, 0), at(1, 9, 0))]
    spark.createDataFrame(rows, CLICK_SCHEMA).write.format("delta").saveAsTable(f"{ODS}.clicks")
    spark.createDataFrame([(1, "theirs")], "k int, v string").write.format("delta") \
        .saveAsTable(f"{OTHER}.foreign")
    root = make_project(tmp_path_factory.mktemp("hostile_base") / "project", models=BASE,
                        yml={"sources.yml": SOURCES}, profiles_yml=PROFILES)
    res = CliRunner().invoke(main, ["--project-dir", str(root), "run", "--mode", "batch"])
    assert res.exit_code == 0, res.output
    before = _tables(spark)
    assert before[f"{DW}.stg_clicks__quarantine"] and before[f"{DW}.victim"]  # something to lose
    yield root, before
    for db in (ODS, DW, OTHER):
        spark.sql(f"DROP DATABASE IF EXISTS {db} CASCADE")


COMMANDS = {
    "check": ["check"],
    "compile": ["compile", "--mode", "stream", "--select", "victim"],
    "batch": ["run", "--mode", "batch"],
    "stream": ["run", "--mode", "stream", "--trigger", "available-now", "--full-refresh", "--select", "SELECTED"],
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_hostile_case_is_refused_and_changes_nothing(spark, base, tmp_path, monkeypatch, case):
    root0, before = base
    files, sources, message, at_compile = CASES[case]
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "project"
    shutil.copytree(root0, root, ignore=shutil.ignore_patterns("target", ".sqlflow"))
    for name, text in files.items():
        (root / "models" / name).write_text(text.replace("CANARY", str(outside / "canary"))
                                            .replace("OUTSIDE", str(outside / "db")))
    if sources:
        (root / "models" / "sources.yml").write_text(sources)
    monkeypatch.setenv("DBT_ENV_SECRET_HX", SECRET)
    warehouse = Path(spark.conf.get("spark.sql.warehouse.dir").removeprefix("file:"))
    stored = _files(warehouse)
    selected = "evil" if "evil.sql" in files else "victim"
    for command, args in COMMANDS.items():
        args = [a.replace("SELECTED", selected) for a in args]
        res = CliRunner().invoke(main, ["--project-dir", str(root), *args])
        refused = at_compile or command in ("batch", "stream")
        assert (res.exit_code == 1) == refused, f"{command}: {res.output}"
        if refused:
            assert message in res.output, f"{command}: {res.output}"
        assert SECRET not in res.output
        assert not list(outside.iterdir()), f"{command} wrote outside the project"
        assert _tables(spark) == before, f"{command} changed a table"
        assert _files(warehouse) == stored, f"{command} changed the warehouse"
