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
    """The catalog and `sql` of a SparkSession, over a set of table names."""

    def __init__(self, tables):
        self.tables, self.statements = set(tables), []
        self.catalog = self

    def tableExists(self, name):  # noqa: N802 (Spark's name)
        return name in self.tables

    def sql(self, statement):
        self.statements.append(statement)
        self.tables.discard(statement.removeprefix("DROP TABLE "))


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
    spark = FakeCatalog({plan.sink.table, plan.quarantine, "dw.dwd_ad_clicks_attributed", "ods.x"})
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
    spark = FakeCatalog(targets | {group.quarantine, "dw.stg_user_events"})
    removed = full_refresh(spark, project, group)
    assert sorted(removed) == sorted([f"table {t}" for t in targets | {group.quarantine}]
                                     + [f"checkpoint {folder}"])
    assert spark.tables == {"dw.stg_user_events"} and not folder.exists()
