"""`dbt build` and `sqlflow run --mode batch` build the same tables from the same demo data.

A copy of the repo's project (every model, macro, yml and UDF there is at test time) runs
twice on the test's SparkSession over one small generated demo data set: once through
sqlflow's batch runtime into schema `t_parity_sf`, once through real dbt (dbtRunner, dbt-spark
`session` method, the project's `streaming_table` materialization) into `t_parity_dbt`.
Every table of one schema must exist in the other with the same columns and the same rows
(multiset, every column), quarantine tables included. The list of models is discovered by
compiling the copy, so models added to the project are compared without editing this test.
"""

from __future__ import annotations

import os
import shutil
from collections import Counter
from pathlib import Path

import pytest
import yaml

from helpers import table_names
from sqlflow.compiler import compile_project
from sqlflow.demo.generate import generate
from sqlflow.engine.context import Context
from sqlflow.runtime.dispatch import run_models

pytestmark = [pytest.mark.spark, pytest.mark.dbt]

ROOT = Path(__file__).resolve().parents[1]
PREFIX = "t_parity_"
SF, DBT = f"{PREFIX}sf", f"{PREFIX}dbt"
# No server_side_parameters: they would be applied to the shared test session.
PROFILES = f"""\
sqlflow:
  target: sf
  outputs:
    sf: {{type: spark, method: session, host: NA, schema: {SF}}}
    dbt: {{type: spark, method: session, host: NA, schema: {DBT}}}
"""


def copy_project(dest: Path) -> Path:
    """The repo's dbt project under `dest`, every source schema renamed `t_parity_<schema>`."""
    for name in ("dbt_project.yml",):
        shutil.copy(ROOT / name, dest / name)
    for folder in ("models", "macros", "udfs", "tests/dbt", "seeds", "snapshots"):
        if (ROOT / folder).is_dir():
            shutil.copytree(ROOT / folder, dest / folder)
    (dest / "profiles").mkdir()
    (dest / "profiles" / "profiles.yml").write_text(PROFILES)
    for path in (dest / "models").rglob("*.yml"):
        doc = yaml.safe_load(path.read_text()) or {}
        for source in doc.get("sources") or []:
            source["schema"] = PREFIX + source.get("schema", source["name"])
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return dest


def table_rows(spark, table: str) -> tuple[tuple[str, ...], Counter]:
    """Column names (sorted) and the multiset of rows, every column, values by column name.
    A `dim_missing` row's origin is the commit-log version its run pinned (`commit_log@v<n>`;
    sqlflow's run appends to the log before dbt runs): compared without the number."""
    df = spark.table(table)
    cols = tuple(sorted(df.columns))
    out = Counter()
    for row in df.select(*cols).collect():
        values = row.asDict()
        if values.get("reason") == "dim_missing" and str(values.get("origin")).startswith("commit_log@v"):
            values["origin"] = "commit_log@v"
        out[tuple(values[c] for c in cols)] += 1
    return cols, out


def tables_of(spark, schema: str) -> set[str]:
    """Tables and views of `schema`; `__sqlflow*` runtime internals are not model outputs."""
    return {t for t in table_names(spark, schema) if not t.startswith("__sqlflow")}


@pytest.fixture(scope="module")
def built(spark, tmp_path_factory):
    """Generate the demo data once, then build the project with sqlflow and with dbt."""
    os.environ.setdefault("DBT_SEND_ANONYMOUS_USAGE_STATS", "false")
    project = copy_project(tmp_path_factory.mktemp("parity"))
    for schema in (SF, DBT):
        spark.sql(f"DROP DATABASE IF EXISTS {schema} CASCADE")
        spark.sql(f"CREATE DATABASE {schema}")
    generate(spark, rows=300, days=1, seed=11, ods_schema=f"{PREFIX}ods", dim_schema=f"{PREFIX}dim")

    ctx = Context.with_session(spark, project, "sf")
    result = compile_project(project, mode="batch", target=ctx.target)
    result.raise_if_errors()
    plans = [p for p in result.plans.values() if p.materialized != "ephemeral"]
    list(run_models(ctx, plans))

    from dbt.cli.main import dbtRunner

    dbt = dbtRunner().invoke([
        "build", "--project-dir", str(project), "--profiles-dir", str(project / "profiles"),
        "--target", "dbt", "--target-path", str(project / "target"),
        "--log-path", str(project / "logs"), "--vars", "{}"])
    failures = [f"{r.node.name}: {r.status} {r.message}" for r in (dbt.result or [])
                if str(r.status) not in ("success", "pass")]
    assert dbt.success, failures or dbt.exception
    return plans


def sinks(plans) -> list:
    """Every table a plan writes: a routed group's plan writes one per target."""
    return [s for p in plans for s in ([t.sink for t in p.targets] if hasattr(p, "targets") else [p.sink])
            if s.write != "view"]


def routed_quarantines(plans) -> dict[str, list[str]]:
    """Group quarantine table (sqlflow: one per routed group) -> the per-model quarantine tables
    dbt writes for the group's members (dbt builds each member as an ordinary model)."""
    return {p.quarantine.split(".")[-1]: [f"{t.sink.table.split('.')[-1]}__quarantine" for t in p.targets]
            for p in plans if hasattr(p, "targets")}


def test_dbt_builds_every_model_sqlflow_builds(spark, built):
    models = {s.table.split(".")[-1] for s in sinks(built)}
    assert models, "the project has no models to compare"
    sf, dbt = tables_of(spark, SF), tables_of(spark, DBT)
    assert models <= sf
    groups = routed_quarantines(built)
    sf_as_dbt = (sf - set(groups)) | {q for qs in groups.values() for q in qs}
    assert sf_as_dbt == dbt, f"only sqlflow: {sorted(sf_as_dbt - dbt)}; only dbt: {sorted(dbt - sf_as_dbt)}"


def test_a_routed_group_quarantines_what_each_dbt_member_quarantines(spark, built):
    """sqlflow reads a routed group's input once and quarantines its bad rows once, into the
    group's table; dbt builds each member on its own, so each member quarantines the same rows
    into its own table. Same rows, every column but the model name."""
    groups = routed_quarantines(built)
    assert groups, "the demo project has a routed group"
    for group, members in groups.items():
        cols, rows = table_rows(spark, f"{SF}.{group}")
        keep = [i for i, c in enumerate(cols) if c != "model"]
        want = Counter(tuple(r[i] for i in keep) for r in rows.elements())
        # (the demo routes a staging model whose rows were already checked: often no rows)
        for member in members:
            _, got = table_rows(spark, f"{DBT}.{member}")
            got = Counter(tuple(r[i] for i in keep) for r in got.elements())
            assert got == want, f"{member} differs from {group}"


def test_every_table_has_the_same_rows(spark, built):
    compared, quarantined = [], 0
    for name in sorted(tables_of(spark, SF) & tables_of(spark, DBT)):
        sf_cols, sf_rows = table_rows(spark, f"{SF}.{name}")
        dbt_cols, dbt_rows = table_rows(spark, f"{DBT}.{name}")
        assert sf_cols == dbt_cols, name
        only_sf, only_dbt = sf_rows - dbt_rows, dbt_rows - sf_rows
        assert not only_sf and not only_dbt, (
            f"{name}: {sum(only_sf.values())} rows only in sqlflow (e.g. {list(only_sf)[:2]}), "
            f"{sum(only_dbt.values())} only in dbt (e.g. {list(only_dbt)[:2]})")
        compared.append(name)
        if name.endswith("__quarantine"):
            quarantined += sum(sf_rows.values())
    assert len(compared) >= len(sinks(built))
    # the demo data injects late, future and null-time rows: the rule must have fired
    assert quarantined > 0


def test_quarantine_reasons_follow_the_rule(spark, built):
    """Every rule fires under dbt (the demo data has each kind of bad row)."""
    reasons = {r.reason for t in tables_of(spark, DBT) if t.endswith("__quarantine")
               for r in spark.sql(f"SELECT DISTINCT reason FROM {DBT}.{t}").collect()}
    assert {"late", "future", "null_event_time"} <= reasons
