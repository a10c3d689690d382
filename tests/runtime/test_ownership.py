"""Table ownership on real Spark and Delta (docs/semantics.md, "Table ownership"): every table
sqlflow creates records its model and role, and a run refuses, before writing anything, to
replace a table another model owns or one sqlflow did not create."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from helpers import make_project
from sqlflow.cli import main

pytestmark = pytest.mark.spark

ODS, DW, OTHER = "own_ods", "own_dw", "own_other"
PROFILES = f"""\
sqlflow:
  target: local
  outputs:
    local: {{type: spark, method: session, host: NA, schema: {DW}}}
"""
SOURCES = f"""\
version: 2
sources:
  - name: ods
    schema: {ODS}
    tables:
      - name: src
"""


def _rows(spark, table):
    return sorted(tuple(r) for r in spark.table(table).collect())


def _props(spark, table):
    return {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES {table}").collect()}


@pytest.fixture
def dbs(spark):
    for db in (ODS, DW, OTHER):
        spark.sql(f"DROP DATABASE IF EXISTS {db} CASCADE")
        spark.sql(f"CREATE DATABASE {db}")
    spark.createDataFrame([(1, "a"), (2, "b")], "k int, v string").write.format("delta") \
        .saveAsTable(f"{ODS}.src")
    spark.createDataFrame([(9, "theirs")], "k int, v string").write.format("delta") \
        .saveAsTable(f"{OTHER}.foreign")
    yield
    for db in (ODS, DW, OTHER):
        spark.sql(f"DROP DATABASE IF EXISTS {db} CASCADE")


def _run(root, *args):
    return CliRunner().invoke(main, ["--project-dir", str(root), "run", "--mode", "batch", *args])


def test_created_tables_record_their_owner_and_a_rerun_may_replace_them(spark, dbs, tmp_path):
    root = make_project(tmp_path, models={"m.sql": "select k, v from {{ source('ods', 'src') }}"},
                        yml={"sources.yml": SOURCES}, profiles_yml=PROFILES)
    for _ in range(2):  # the second run replaces its own table
        res = _run(root)
        assert res.exit_code == 0, res.output
    props = _props(spark, f"{DW}.m")
    assert props["sqlflow.model"] == "m" and props["sqlflow.role"] == "sink"
    assert _rows(spark, f"{DW}.m") == [(1, "a"), (2, "b")]


@pytest.mark.parametrize("owner", [None, "someone_else"])
def test_a_table_the_model_does_not_own_is_refused_untouched(spark, dbs, tmp_path, owner):
    spark.createDataFrame([(7, "kept")], "k int, v string").write.format("delta") \
        .saveAsTable(f"{DW}.m")
    if owner:
        spark.sql(f"ALTER TABLE {DW}.m SET TBLPROPERTIES ('sqlflow.model' = '{owner}', "
                  "'sqlflow.role' = 'sink')")
    root = make_project(tmp_path, models={"m.sql": "select k, v from {{ source('ods', 'src') }}"},
                        yml={"sources.yml": SOURCES}, profiles_yml=PROFILES)
    res = _run(root)
    assert res.exit_code == 1
    assert f"model `m` would replace table `{DW}.m` (as its sink)" in res.output
    assert (f"belongs to model `{owner}`" if owner else "not created by sqlflow") in res.output
    assert _rows(spark, f"{DW}.m") == [(7, "kept")]


def test_a_table_without_owner_at_a_dbt_models_relation_is_adopted_on_the_operators_word(
        spark, dbs, tmp_path):
    """`dbt run` built it (dbt-spark records no owner): with the operator's
    `--adopt-dbt-tables` (never a config) the `table` model takes it over, as dbt would
    replace it, in the format dbt-spark gives it (docs/semantics.md, "Table ownership")."""
    spark.createDataFrame([(7, "dbt's")], "k int, v string").write.format("delta") \
        .saveAsTable(f"{DW}.m")
    root = make_project(tmp_path, models={
        "m.sql": "{{ config(materialized='table') }}\nselect k, v from {{ source('ods', 'src') }}"},
        yml={"sources.yml": SOURCES}, profiles_yml=PROFILES)
    refused = _run(root)
    assert refused.exit_code != 0 and "--adopt-dbt-tables" in refused.output, refused.output
    assert _rows(spark, f"{DW}.m") == [(7, "dbt's")]
    res = _run(root, "--adopt-dbt-tables")
    assert res.exit_code == 0, res.output
    assert _rows(spark, f"{DW}.m") == [(1, "a"), (2, "b")]
    props = _props(spark, f"{DW}.m")
    assert props["sqlflow.model"] == "m" and props["sqlflow.role"] == "sink"
    fmt = spark.sql(f"DESCRIBE TABLE EXTENDED {DW}.m").where("col_name = 'Provider'").first()
    assert fmt is not None and fmt["data_type"].lower() == "parquet"


def test_a_quarantine_naming_an_undeclared_table_is_refused_before_any_write(spark, dbs, tmp_path):
    model = ("{{ config(materialized='table', quarantine='" + OTHER + ".foreign') }}\n"
             "select k, v from {{ source('ods', 'src') }}")
    root = make_project(tmp_path, models={"m.sql": model}, yml={"sources.yml": SOURCES},
                        profiles_yml=PROFILES)
    res = _run(root)
    assert res.exit_code == 1
    assert f"models/m.sql:1: error: model `m` would replace table `{OTHER}.foreign`" in res.output
    assert _rows(spark, f"{OTHER}.foreign") == [(9, "theirs")]
    assert _rows(spark, f"{ODS}.src") == [(1, "a"), (2, "b")]
    assert not spark.catalog.tableExists(f"{DW}.m")  # refused before the sink was written
