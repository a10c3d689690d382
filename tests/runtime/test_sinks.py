"""Delta sinks on real Spark: exactly the partitions written, idempotent re-runs and appends."""

from __future__ import annotations

import pytest

from sqlflow.errors import SqlflowError
from sqlflow.planning.plan import Sink
from sqlflow.runtime.delta.sinks import BatchId, write

pytestmark = pytest.mark.spark

DB = "rt_sinks"


@pytest.fixture(scope="module", autouse=True)
def database(spark):
    spark.sql(f"DROP DATABASE IF EXISTS {DB} CASCADE")
    yield
    spark.sql(f"DROP DATABASE IF EXISTS {DB} CASCADE")


def frame(spark, *rows):
    return spark.createDataFrame(list(rows), "id long, v string, dt string")


def table_rows(spark, table):
    return sorted(tuple(r) for r in spark.table(table).collect())


def test_overwrite_partitions_replaces_exactly_the_partitions_computed(spark):
    sink = Sink(f"{DB}.parts", "overwrite_partitions", ("dt",))
    first = write(spark, sink, frame(spark, (1, "a", "2026-11-01"), (2, "b", "2026-11-02"),
                                     (3, "c", "2026-11-02")))
    assert (first.version, first.rows, [p.spec for p in first.partitions]) == (
        0, 3, ["dt=2026-11-01", "dt=2026-11-02"])
    detail = spark.sql(f"DESCRIBE DETAIL {sink.table}").collect()[0]
    assert (detail["format"], detail["partitionColumns"]) == ("delta", ["dt"])
    assert sum(p.bytes for p in first.partitions) == detail["sizeInBytes"] > 0  # the one commit's files

    second = write(spark, sink, frame(spark, (4, "d", "2026-11-02"), (5, "e", "2026-11-03")))
    assert table_rows(spark, sink.table) == [
        (1, "a", "2026-11-01"), (4, "d", "2026-11-02"), (5, "e", "2026-11-03")]
    assert [(p.spec, p.rows, p.files) for p in second.partitions] == [
        ("dt=2026-11-02", 1, 1), ("dt=2026-11-03", 1, 1)]
    assert (second.version, second.rows, second.files) == (1, 2, 2)

    again = write(spark, sink, frame(spark, (4, "d", "2026-11-02"), (5, "e", "2026-11-03")))
    assert again.version == 2 and table_rows(spark, sink.table) == [
        (1, "a", "2026-11-01"), (4, "d", "2026-11-02"), (5, "e", "2026-11-03")]


def test_a_range_overwrite_empties_range_partitions_without_rows(spark):
    sink = Sink(f"{DB}.ranged", "overwrite_partitions", ("dt",))
    write(spark, sink, frame(spark, (1, "a", "2026-11-01"), (2, "b", "2026-11-02"),
                             (3, "c", "2026-11-03")))
    where = "dt >= '2026-11-02' AND dt <= '2026-11-03'"
    result = write(spark, sink, frame(spark, (9, "z", "2026-11-02")), replace_where=where)
    assert table_rows(spark, sink.table) == [(1, "a", "2026-11-01"), (9, "z", "2026-11-02")]
    assert [(p.spec, p.rows) for p in result.partitions] == [("dt=2026-11-02", 1), ("dt=2026-11-03", 0)]
    with pytest.raises(SqlflowError, match="cannot write"):  # rows outside the range are refused
        write(spark, sink, frame(spark, (7, "x", "2026-11-05")), replace_where=where)


def test_empty_rows_create_the_table_and_then_write_nothing(spark):
    sink = Sink(f"{DB}.empty", "overwrite_partitions", ("dt",))
    created = write(spark, sink, frame(spark, (1, "a", "2026-11-01")).limit(0))
    assert created.rows == 0 and spark.table(sink.table).count() == 0
    assert spark.sql(f"DESCRIBE DETAIL {sink.table}").collect()[0]["partitionColumns"] == ["dt"]
    write(spark, sink, frame(spark, (1, "a", "2026-11-01")))
    nothing = write(spark, sink, frame(spark, (2, "b", "2026-11-02")).limit(0))
    assert (nothing.version, nothing.rows, nothing.partitions) == (None, 0, ())
    assert table_rows(spark, sink.table) == [(1, "a", "2026-11-01")]


def test_append_once_skips_a_replayed_batch_id(spark):
    sink = Sink(f"{DB}.appended", "append_once", ("dt",))
    batch = frame(spark, (1, "a", "2026-11-01"), (2, "b", "2026-11-01"))
    first = write(spark, sink, batch, batch=BatchId("query-1", 0))
    replay = write(spark, sink, batch, batch=BatchId("query-1", 0))
    assert (first.rows, first.skipped) == (2, False)
    assert (replay.rows, replay.skipped, replay.version) == (0, True, None)
    assert table_rows(spark, sink.table) == [(1, "a", "2026-11-01"), (2, "b", "2026-11-01")]  # once
    write(spark, sink, frame(spark, (3, "c", "2026-11-02")), batch=BatchId("query-1", 1))
    older = write(spark, sink, frame(spark, (4, "d", "2026-11-02")), batch=BatchId("query-1", 0))
    other = write(spark, sink, frame(spark, (5, "e", "2026-11-02")), batch=BatchId("query-2", 0))
    assert older.skipped and not other.skipped
    assert table_rows(spark, sink.table) == [
        (1, "a", "2026-11-01"), (2, "b", "2026-11-01"), (3, "c", "2026-11-02"), (5, "e", "2026-11-02")]


def test_a_partitioned_write_adds_one_file_per_partition_not_one_per_task(spark):
    """Rows of two partitions spread over four tasks: Delta's optimized write bins them, so
    the commit adds one file per partition (a plain write would add up to eight)."""
    sink = Sink(f"{DB}.binned", "append_once", ("dt",))
    rows = frame(spark, *[(k, "x", f"2026-11-0{1 + k % 2}") for k in range(40)]).repartition(4)
    assert rows.rdd.getNumPartitions() == 4
    result = write(spark, sink, rows, batch=BatchId("query-1", 0))
    assert result.rows == 40
    assert sorted((p.spec, p.rows, p.files) for p in result.partitions) == [
        ("dt=2026-11-01", 20, 1), ("dt=2026-11-02", 20, 1)]
    plain = write(spark, sink, rows, batch=BatchId("query-1", 1), optimize_write=False)
    assert plain.files > 2  # the baseline: without it, each task writes its own file per partition


def test_a_partitioned_write_keeps_its_file_size_under_a_small_session_advisory_size(spark):
    """The rebalance before a partitioned write has its own advisory size (64 MB): a session
    size for joins far below a partition's rows (64 KB here) does not split the partition
    into several files, as Spark's `rebalance` hint, sized by the session, does."""
    sink = Sink(f"{DB}.sized", "append_once", ("dt",))
    rows = spark.range(60_000).selectExpr(
        "id", "sha2(cast(id AS string), 256) AS v", "concat('2026-11-0', 1 + id % 2) AS dt")
    key = "spark.sql.adaptive.advisoryPartitionSizeInBytes"
    before = spark.conf.get(key)
    spark.conf.set(key, "64k")
    try:
        result = write(spark, sink, rows, batch=BatchId("query-1", 0))
        hinted = write(spark, sink, rows.hint("rebalance", "dt"), batch=BatchId("query-1", 1),
                       optimize_write=False)
    finally:
        spark.conf.set(key, before)
    assert sorted((p.spec, p.rows, p.files) for p in result.partitions) == [
        ("dt=2026-11-01", 30_000, 1), ("dt=2026-11-02", 30_000, 1)]
    assert hinted.rows == 60_000 and hinted.files > 2  # the baseline: the hint splits each
    both = rows.unionAll(rows)  # every row of both writes, each once per write
    stored = spark.table(sink.table)
    assert stored.exceptAll(both).count() == 0 and both.exceptAll(stored).count() == 0


def test_replace_rewrites_rows_and_schema(spark):
    sink = Sink(f"{DB}.replaced", "replace")
    write(spark, sink, frame(spark, (1, "a", "2026-11-01"), (2, "b", "2026-11-02")))
    result = write(spark, sink, spark.createDataFrame([(7, 1.5)], "id long, score double"))
    assert result.rows == 1
    assert spark.table(sink.table).columns == ["id", "score"]
    assert table_rows(spark, sink.table) == [(7, 1.5)]


def test_view_is_created_or_replaced_over_the_sql(spark):
    write(spark, Sink(f"{DB}.base", "replace"), frame(spark, (1, "a", "2026-11-01")))
    sink = Sink(f"{DB}.a_view", "view")
    write(spark, sink, sql=f"SELECT id FROM {DB}.base")
    result = write(spark, sink, sql=f"SELECT id * 10 AS id FROM {DB}.base")
    assert (result.version, result.rows) == (None, 0)
    assert [tuple(r) for r in spark.table(sink.table).collect()] == [(10,)]


def test_the_database_is_created_and_a_changed_partitioning_is_refused(spark):
    spark.sql("DROP DATABASE IF EXISTS rt_sinks_new CASCADE")
    try:
        sink = Sink("rt_sinks_new.t", "overwrite_partitions", ("dt",))
        write(spark, sink, frame(spark, (1, "a", "2026-11-01")))
        assert spark.catalog.databaseExists("rt_sinks_new")
        with pytest.raises(SqlflowError, match=r"partitioned by \(dt\) but its model says \(v\)"):
            write(spark, Sink(sink.table, "overwrite_partitions", ("v",)), frame(spark, (2, "b", "x")))
    finally:
        spark.sql("DROP DATABASE IF EXISTS rt_sinks_new CASCADE")


def test_a_write_given_the_table_as_found_makes_no_catalog_call(spark, monkeypatch):
    """A running stream query passes its sink's description from its first write (`known`):
    later writes skip the catalog (existence, DESCRIBE, ownership, CREATE DATABASE) and still
    append exactly once."""
    from pyspark.sql import SparkSession as Classic
    from pyspark.sql.catalog import Catalog

    from sqlflow.runtime.delta import deltalog

    sink = Sink(f"{DB}.known", "append_once", ("dt",), owner="m", role="sink")
    write(spark, sink, frame(spark, (1, "a", "2026-11-01")), batch=BatchId("q@1", 0))
    info = deltalog.describe(spark, sink.table)
    calls = []
    exists, sql = Catalog.tableExists, Classic.sql
    monkeypatch.setattr(Catalog, "tableExists", lambda self, *a, **k: calls.append(a) or exists(self, *a, **k))
    monkeypatch.setattr(Classic, "sql", lambda self, q, *a, **k: calls.append(q) or sql(self, q, *a, **k))
    out = write(spark, sink, frame(spark, (2, "b", "2026-11-02")), batch=BatchId("q@1", 1), known=info)
    assert calls == []
    assert (out.rows, out.skipped) == (1, False)
    assert write(spark, sink, frame(spark, (2, "b", "2026-11-02")), batch=BatchId("q@1", 1), known=info).skipped
    monkeypatch.undo()
    assert table_rows(spark, sink.table) == [(1, "a", "2026-11-01"), (2, "b", "2026-11-02")]


def test_a_located_sink_is_checked_from_its_log_without_asking_the_catalog(spark, monkeypatch):
    """A batch run locates its tables once (`deltalog.locate`) and passes that to the write
    (`located`): the write asks the catalog nothing more (no existence check, no DESCRIBE, no
    CREATE DATABASE), reads the sink's owner and partition columns from its log, and still
    refuses a table another model owns or one partitioned differently."""
    from pyspark.sql import SparkSession as Classic
    from pyspark.sql.catalog import Catalog

    from sqlflow.runtime.delta import deltalog

    sink = Sink(f"{DB}.located", "overwrite_partitions", ("dt",), owner="m", role="sink")
    write(spark, sink, frame(spark, (1, "a", "2026-11-01")))
    found = deltalog.locate(spark, [sink.table])
    calls = []
    exists, sql = Catalog.tableExists, Classic.sql
    monkeypatch.setattr(Catalog, "tableExists", lambda self, *a, **k: calls.append(a) or exists(self, *a, **k))
    monkeypatch.setattr(Classic, "sql", lambda self, q, *a, **k: calls.append(q) or sql(self, q, *a, **k))
    out = write(spark, sink, frame(spark, (2, "b", "2026-11-01")), located=found)
    assert calls == [] and (out.rows, [p.spec for p in out.partitions]) == (1, ["dt=2026-11-01"])
    with pytest.raises(SqlflowError, match="belongs to model `m`"):
        write(spark, Sink(sink.table, "overwrite_partitions", ("dt",), owner="other", role="sink"),
              frame(spark, (3, "c", "2026-11-01")), located=found)
    with pytest.raises(SqlflowError, match=r"partitioned by \(dt\) but its model says \(v\)"):
        write(spark, Sink(sink.table, "overwrite_partitions", ("v",), owner="m", role="sink"),
              frame(spark, (3, "c", "x")), located=found)
    monkeypatch.undo()
    assert table_rows(spark, sink.table) == [(2, "b", "2026-11-01")]
    # a table missing from what was located is created, its database too
    spark.sql("DROP DATABASE IF EXISTS rt_sinks_loc CASCADE")
    try:
        fresh = Sink("rt_sinks_loc.t", "overwrite_partitions", ("dt",), owner="m", role="sink")
        made = write(spark, fresh, frame(spark, (4, "d", "2026-11-02")),
                     located=deltalog.locate(spark, [fresh.table]))
        assert made.version == 0 and table_rows(spark, fresh.table) == [(4, "d", "2026-11-02")]
    finally:
        spark.sql("DROP DATABASE IF EXISTS rt_sinks_loc CASCADE")
