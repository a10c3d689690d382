"""The `streaming_table` dbt materialization, run by real dbt on the test's SparkSession.

Each test builds a tiny dbt project in tmp_path with a copy of the repo's materialization
macros, a session-method profile whose schema is unique to the test, and a Delta source
table it owns, then runs `dbt run` in-process (dbt-spark's session method reuses the running
SparkSession through getOrCreate).
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.dbt]

ROOT = Path(__file__).resolve().parents[1]
MACROS = ROOT / "macros" / "materializations"

# The model restricts itself to the backfill range given by vars; the materialization then
# overwrites exactly the partitions that range produces.
MODEL = """\
{{{{ config(materialized='streaming_table', {config}) }}}}
select id, v * 10 as v10, dt
from {source}
where dt between '{{{{ var("start", "0000-00-00") }}}}' and '{{{{ var("end", "9999-99-99") }}}}'
"""
QUERY = "select id, v * 10 as v10, dt from {source}"
ROWS = [(1, 1, "2026-11-01"), (2, 2, "2026-11-01"), (3, 3, "2026-11-02"),
        (3, 3, "2026-11-02"), (4, None, "2026-11-03")]  # a duplicate row and a NULL on purpose


class Project:
    """A throwaway dbt project with one model `m` over a source table `src` of its own."""

    def __init__(self, spark, root: Path):
        self.spark, self.root = spark, root
        tag = uuid.uuid4().hex[:8]
        self.schema, self.src_schema = f"st_{tag}", f"st_src_{tag}"
        self.source = f"{self.src_schema}.events"
        self.table = f"{self.schema}.m"
        shutil.copytree(MACROS, root / "macros" / "materializations")
        (root / "models").mkdir()
        (root / "dbt_project.yml").write_text(
            "name: st_test\nversion: '1.0.0'\nconfig-version: 2\nprofile: st_test\n"
            "model-paths: [models]\nmacro-paths: [macros]\n")
        # No server_side_parameters: they would be applied to the shared test session.
        (root / "profiles.yml").write_text(
            "st_test:\n  target: t\n  outputs:\n    t:\n"
            f"      type: spark\n      method: session\n      host: NA\n      schema: {self.schema}\n")
        spark.sql(f"create database {self.src_schema}")
        spark.sql(f"create table {self.source} (id int, v int, dt string) using delta")
        self.insert(ROWS)
        self.model("partition_by=['dt']")

    def model(self, config: str) -> None:
        (self.root / "models" / "m.sql").write_text(MODEL.format(config=config, source=self.source))

    def insert(self, rows) -> None:
        self.spark.createDataFrame(rows, "id int, v int, dt string").write.format(
            "delta").mode("append").saveAsTable(self.source)

    def replace_source_day(self, dt: str, rows) -> None:
        self.spark.sql(f"delete from {self.source} where dt = '{dt}'")
        self.insert(rows)

    def dbt(self, *args: str):
        from dbt.cli.main import dbtRunner

        return dbtRunner().invoke([*args, "--project-dir", str(self.root),
                                   "--profiles-dir", str(self.root)])

    def run(self, *args: str) -> None:
        result = self.dbt("run", *args)
        assert result.success, _messages(result)

    def assert_equals_query(self, where: str = "true") -> None:
        """The table holds exactly the query's rows (multiset, every column)."""
        query = QUERY.format(source=self.source) + f" where {where}"
        table = f"select id, v10, dt from {self.table} where {where}"
        for a, b in ((table, query), (query, table)):
            extra = self.spark.sql(f"{a} except all {b}").collect()
            assert extra == [], f"rows of ({a}) not in ({b}): {extra}"

    def files(self) -> dict[str, set[str]]:
        """The data files of each partition of the model's table."""
        out: dict[str, set[str]] = {}
        for r in self.spark.sql(f"select dt, _metadata.file_path as f from {self.table}").collect():
            out.setdefault(r.dt, set()).add(r.f)
        return out

    def history(self) -> list:
        return self.spark.sql(f"describe history {self.table}").orderBy("version").collect()


def _messages(result) -> str:
    if result.exception is not None:
        return str(result.exception)
    return "\n".join(str(r.message) for r in (result.result or []))


@pytest.fixture
def project(spark, tmp_path):
    return Project(spark, tmp_path)


def test_first_run_builds_partitioned_delta_table(project, spark):
    project.run()
    detail = spark.sql(f"describe detail {project.table}").collect()[0]
    assert detail.format == "delta"
    assert detail.partitionColumns == ["dt"]
    project.assert_equals_query()
    assert spark.table(project.table).count() == len(ROWS)
    # the owner sqlflow checks before it replaces a table (docs/semantics.md, "Table ownership")
    props = {r["key"]: r["value"] for r in spark.sql(f"show tblproperties {project.table}").collect()}
    assert (props["sqlflow.model"], props["sqlflow.role"]) == (project.table.rsplit(".", 1)[1], "sink")


def test_rerun_of_a_range_overwrites_only_its_partitions(project, spark):
    project.run()
    before = project.files()
    old_day1 = spark.sql(f"select * from {project.table} where dt = '2026-11-01'").collect()
    # Change the source in two days, then re-run the backfill for one of them only.
    project.replace_source_day("2026-11-01", [(1, 100, "2026-11-01")])
    project.replace_source_day("2026-11-02", [(3, 300, "2026-11-02"), (5, 5, "2026-11-02")])
    project.run("--vars", "{start: '2026-11-02', end: '2026-11-02'}")

    after = project.files()
    assert after["2026-11-01"] == before["2026-11-01"]  # the same files: untouched
    assert after["2026-11-03"] == before["2026-11-03"]
    assert after["2026-11-02"].isdisjoint(before["2026-11-02"])  # replaced, not appended to
    project.assert_equals_query("dt = '2026-11-02'")
    assert sorted(spark.sql(f"select * from {project.table} where dt = '2026-11-01'")
                  .collect()) == sorted(old_day1)

    last = project.history()[-1]
    assert last.operation == "WRITE"
    assert last.operationParameters["isDynamicPartitionOverwrite"] == "true"
    assert last.operationMetrics["numRemovedFiles"] == str(len(before["2026-11-02"]))


def test_rerun_is_idempotent(project, spark):
    project.run()
    project.run()
    project.run("--vars", "{start: '2026-11-01', end: '2026-11-02'}")
    project.assert_equals_query()
    assert spark.table(project.table).count() == len(ROWS)  # nothing duplicated


def test_new_partition_is_added_and_others_kept(project, spark):
    project.run()
    before = project.files()
    project.insert([(7, 7, "2026-11-04")])
    project.run("--vars", "{start: '2026-11-04', end: '2026-11-04'}")
    after = project.files()
    assert {k: after[k] for k in before} == before
    project.assert_equals_query()


def test_overwrite_is_dynamic_even_if_the_session_says_static(project, spark):
    """In `static` mode INSERT OVERWRITE would truncate the table; the session's own value
    must come back afterwards (dbt shares the session with sqlflow)."""
    project.run()
    key = "spark.sql.sources.partitionOverwriteMode"
    before = spark.conf.get(key)
    spark.conf.set(key, "static")
    try:
        project.run("--vars", "{start: '2026-11-02', end: '2026-11-02'}")
        assert spark.conf.get(key) == "static"
    finally:
        spark.conf.set(key, before)
    project.assert_equals_query()


def test_replace_where_also_clears_emptied_partitions(project, spark):
    project.model("partition_by='dt', "
                  "replace_where=\"dt between '\" ~ var('start', '0000-00-00') ~ \"' and '\" "
                  "~ var('end', '9999-99-99') ~ \"'\"")
    project.run()
    spark.sql(f"delete from {project.source} where dt = '2026-11-02'")
    project.run("--vars", "{start: '2026-11-02', end: '2026-11-03'}")
    project.assert_equals_query()
    assert spark.sql(f"select * from {project.table} where dt = '2026-11-02'").count() == 0
    assert project.history()[-1].operation == "WRITE"


def test_dynamic_overwrite_keeps_partitions_the_query_no_longer_produces(project, spark):
    """Documented behaviour without replace_where: an emptied partition is not written."""
    project.run()
    spark.sql(f"delete from {project.source} where dt = '2026-11-02'")
    project.run()
    assert spark.sql(f"select * from {project.table} where dt = '2026-11-02'").count() == 2


def test_full_refresh_replaces_the_table(project, spark):
    project.run()
    project.replace_source_day("2026-11-01", [(9, 9, "2026-11-01")])
    spark.sql(f"delete from {project.source} where dt = '2026-11-03'")
    project.run("--full-refresh")
    project.assert_equals_query()
    assert project.history()[-1].operation == "CREATE OR REPLACE TABLE AS SELECT"


def test_changed_partitioning_needs_full_refresh(project, spark):
    project.run()
    project.model("partition_by=['dt', 'id']")
    result = project.dbt("run")
    assert not result.success
    msg = _messages(result)
    assert "is partitioned by [dt] but the model's partition_by is [dt, id]" in msg
    assert "--full-refresh" in msg
    project.run("--full-refresh")
    detail = spark.sql(f"describe detail {project.table}").collect()[0]
    assert detail.partitionColumns == ["dt", "id"]
    project.assert_equals_query()


def test_a_view_in_the_way_is_replaced(project, spark):
    spark.sql(f"create database if not exists {project.schema}")
    spark.sql(f"create view {project.table} as select 1 as x")
    project.run()
    assert spark.sql(f"describe detail {project.table}").collect()[0].format == "delta"
    project.assert_equals_query()


@pytest.mark.parametrize(("config", "expected"), [
    ("", "requires partition_by"),
    ("partition_by=[]", "requires partition_by"),
    ("partition_by={'a': 1}", "requires partition_by"),
    ("partition_by='dt', file_format='parquet'", "Expected one of: delta"),
])
def test_invalid_config_is_a_compiler_error(project, spark, config, expected):
    project.model(config)
    result = project.dbt("run")
    assert not result.success
    msg = _messages(result)
    assert "Compilation Error" in msg and expected in msg
    assert not spark.catalog.tableExists(project.table)  # validated before any SQL ran


def test_a_table_built_by_dbts_own_table_materialization_is_owned_by_its_model(project, spark):
    """dbt-then-sqlflow: `materialized='table'` (dbt-spark's materialization, through the
    project's `spark__tblproperties_clause`) records the owner sqlflow checks, so sqlflow may
    replace the table without a manual claim; the config's own tblproperties are kept."""
    from sqlflow.runtime import ownership

    (project.root / "models" / "m.sql").write_text(
        "{{ config(materialized='table', file_format='delta', tblproperties={'team': 'ads'}) }}\n"
        + QUERY.format(source=project.source))
    project.run()
    project.assert_equals_query()
    props = {r["key"]: r["value"] for r in spark.sql(f"show tblproperties {project.table}").collect()}
    assert (props["sqlflow.model"], props["sqlflow.role"], props["team"]) == ("m", "sink", "ads")
    ownership.check(spark, project.table, "m", "sink", action="replace")  # sqlflow's own check
    with pytest.raises(Exception, match="belongs to model `m`"):
        ownership.check(spark, project.table, "other", "sink", action="replace")
