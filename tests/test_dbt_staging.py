"""`dbt run` of the staging models, in-process on the test's SparkSession, against demo data.

dbt-spark's session method calls `SparkSession.builder.getOrCreate()`, which returns the
test session: dbt reads the demo sources this module generates and writes into the same
temporary warehouse.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sqlflow.demo.generate import generate

ROOT = Path(__file__).resolve().parents[1]
MODELS = {
    "stg_ad_impressions": "ods.ods_ad_impressions",
    "stg_ad_clicks": "ods.ods_ad_clicks",
    "stg_user_events": "ods.ods_user_events",
}
pytestmark = pytest.mark.dbt

TARGET_SCHEMA = "dw"  # profiles/profiles.yml, target local


@pytest.fixture(scope="module")
def dbt_run(spark, tmp_path_factory):
    """Generate tiny sources into `ods`/`dim` (sources.yml's schemas), then run dbt once."""
    from dbt.cli.main import dbtRunner

    generate(spark, rows=2_000, seed=3, days=2)
    tmp = tmp_path_factory.mktemp("dbt")
    result = dbtRunner().invoke([
        "run", "--select", "staging",
        "--profiles-dir", str(ROOT / "profiles"), "--project-dir", str(ROOT), "--target", "local",
        "--target-path", str(tmp / "target"), "--log-path", str(tmp / "logs"),
    ])
    return result


def test_dbt_run_succeeds(dbt_run):
    assert dbt_run.exception is None, dbt_run.exception
    assert dbt_run.success
    built = {r.node.name: r.status for r in dbt_run.result.results}
    assert built == {name: "success" for name in MODELS}


@pytest.mark.parametrize("model", MODELS)
def test_model_keeps_every_source_row_but_the_quarantined(spark, dbt_run, model):
    """Staging adds no row, and the source rows it lacks are exactly those in its quarantine
    table (late, future, null event time: the streaming_table materialization's rule)."""
    source, table = MODELS[model], f"{TARGET_SCHEMA}.{model}"
    source_cols = spark.table(source).columns
    shared = [c for c in spark.table(table).columns if c in source_cols]
    assert shared == source_cols  # staging drops no column
    cols = ", ".join(shared)
    added = spark.sql(f"SELECT {cols} FROM {table} EXCEPT ALL SELECT {cols} FROM {source}").count()
    assert added == 0, f"{table} has {added} rows {source} lacks"
    missing = spark.sql(f"SELECT {cols} FROM {source} EXCEPT ALL SELECT {cols} FROM {table}").count()
    quarantined = spark.table(f"{table}__quarantine")
    assert quarantined.count() == missing > 0
    assert {r.input for r in quarantined.select("input").distinct().collect()} == {source}
    assert spark.table(table).count() + missing == spark.table(source).count()


@pytest.mark.parametrize("model", MODELS)
def test_model_is_delta_partitioned_by_ingest_hour(spark, dbt_run, model):
    detail = spark.sql(f"DESCRIBE DETAIL {TARGET_SCHEMA}.{model}").collect()[0]
    assert detail["format"] == "delta"
    assert list(detail["partitionColumns"]) == ["dt", "hour"]


@pytest.mark.parametrize("model", MODELS)
def test_model_types_match_staging_yml(spark, dbt_run, model):
    doc = yaml.safe_load((ROOT / "models" / "staging" / "staging.yml").read_text())
    documented = next(m for m in doc["models"] if m["name"] == model)["columns"]
    actual = [(f.name, f.dataType.simpleString()) for f in spark.table(f"{TARGET_SCHEMA}.{model}").schema]
    assert [(c["name"], c["data_type"]) for c in documented] == actual
