"""`sqlflow run --mode stream --full-refresh` on the repo's own plans, without a JVM: what it
drops and removes for a model and for a routed group (every target). The end-to-end run is in
test_stream_run (`test_cli_runs_a_bounded_stream_and_prints_each_micro_batch`)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from sqlflow.compiler import compile_project
from sqlflow.planning.plan import RoutedPlan, StreamPlan
from sqlflow.runtime.query import checkpoint_dir
from sqlflow.runtime.refresh import full_refresh

ROOT = Path(__file__).resolve().parents[2]


class FakeCatalog:
    """The catalog and `sql` of a SparkSession, over table names and their `sqlflow.model`
    owners (None: a table sqlflow did not create)."""

    def __init__(self, tables: dict[str, str | None]):
        self.owners, self.statements = dict(tables), []
        self.catalog = self

    @property
    def tables(self):
        return set(self.owners)

    def tableExists(self, name):  # noqa: N802 (Spark's name)
        return name in self.owners

    def sql(self, statement):
        self.statements.append(statement)
        if statement.startswith("DESCRIBE TABLE EXTENDED "):
            name = statement.removeprefix("DESCRIBE TABLE EXTENDED ").replace("`", "")
            owner = self.owners[name]
            props = f"[delta.x=1, sqlflow.model={owner}, sqlflow.role=sink]" if owner else "[]"
            return FakeRows([("# Detailed Table Information", ""), ("Provider", "delta"),
                             ("Table Properties", props)])
        self.owners.pop(statement.removeprefix("DROP TABLE ").replace("`", ""), None)


class FakeRows:
    def __init__(self, rows):
        self.rows = [{"col_name": a, "data_type": b} for a, b in rows]

    def collect(self):
        return self.rows


@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    project = tmp_path_factory.mktemp("refresh") / "project"
    shutil.copytree(ROOT, project, ignore=shutil.ignore_patterns(".venv", ".sqlflow", ".git", "target"))
    result = compile_project(project, mode="stream")
    result.raise_if_errors()
    return project, result.plans


def test_a_model_loses_its_sink_quarantine_and_checkpoint_and_nothing_else(plans):
    project, compiled = plans
    plan = compiled["dwd_ad_click_samples"]
    assert isinstance(plan, StreamPlan)
    folder = checkpoint_dir(project, plan)
    assert folder == project / ".sqlflow" / "checkpoints" / "dwd_ad_click_samples"
    (folder / "offsets").mkdir(parents=True)
    other = checkpoint_dir(project, compiled["dwd_ad_clicks_attributed"])
    (other / "offsets").mkdir(parents=True)
    spark = FakeCatalog({plan.sink.table: plan.model, plan.quarantine: plan.model,
                         "dw.dwd_ad_clicks_attributed": "dwd_ad_clicks_attributed", "ods.x": None})
    removed = full_refresh(spark, project, plan)
    assert removed == [f"table {plan.sink.table}", f"table {plan.quarantine}", f"checkpoint {folder}"]
    assert spark.tables == {"dw.dwd_ad_clicks_attributed", "ods.x"}
    assert not folder.exists() and other.exists()
    assert full_refresh(spark, project, plan) == []  # nothing left: nothing to say


def test_a_routed_group_loses_every_target_and_its_one_checkpoint(plans):
    project, compiled = plans
    (group,) = [p for p in compiled.values() if isinstance(p, RoutedPlan)]
    folder = checkpoint_dir(project, group)
    assert folder.name == f"route__{group.model}"
    folder.mkdir(parents=True)
    targets = {t.sink.table for t in group.targets}
    assert len(targets) == 6
    spark = FakeCatalog({**{t.sink.table: t.model for t in group.targets},
                         group.quarantine: group.model, "dw.stg_user_events": "stg_user_events"})
    removed = full_refresh(spark, project, group)
    assert sorted(removed) == sorted([f"table {t}" for t in targets | {group.quarantine}]
                                     + [f"checkpoint {folder}"])
    assert spark.tables == {"dw.stg_user_events"} and not folder.exists()


@pytest.mark.parametrize("owner", [None, "another_model"])
def test_a_table_the_model_does_not_own_is_refused_and_nothing_is_dropped(plans, owner):
    from sqlflow.errors import SqlflowError

    project, compiled = plans
    plan = compiled["dwd_ad_click_samples"]
    folder = checkpoint_dir(project, plan)
    (folder / "offsets").mkdir(parents=True, exist_ok=True)
    spark = FakeCatalog({plan.sink.table: plan.model, plan.quarantine: owner})
    with pytest.raises(SqlflowError) as err:
        full_refresh(spark, project, plan)
    message = str(err.value)
    assert f"would drop table `{plan.quarantine}`" in message
    assert (f"belongs to model `{owner}`" if owner else "not created by sqlflow") in message
    assert not [s for s in spark.statements if s.startswith("DROP")]
    assert spark.tables == {plan.sink.table, plan.quarantine} and folder.exists()
