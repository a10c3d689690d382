"""`sqlflow verify`'s and `sqlflow audit`'s comparison (`workflows/verify/compare.py`, one
query) counts per partition what EXCEPT ALL both ways counts: drawn tables with repeated rows,
NULLs, -0.0 against 0.0, a NULL partition value and one holding `/`, a partition only one side
has, and a table that does not exist."""

from __future__ import annotations

import random

import pytest
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sqlflow.runtime.delta import partition_path
from sqlflow.workflows.verify.compare import WHOLE_TABLE, compare

pytestmark = pytest.mark.spark

SCHEMA = "dt string, `odd.tag` string, n bigint, x double"
DAYS = ("2026-11-01", "2026-11-02", None)
TAGS = ("a", "a/b", None)


def drawn(rnd: random.Random, count: int) -> list[tuple]:
    return [(rnd.choice(DAYS), rnd.choice(TAGS), rnd.choice((1, 2, None)), rnd.choice((0.5, 0.0, -0.0, None)))
            for _ in range(count)]


def by_except_all(want: DataFrame, got: DataFrame, parts: list[str]) -> dict[str, tuple[int, int, int, int]]:
    """The former comparison: four counts per partition, EXCEPT ALL each way."""
    key = partition_path.key(parts) if parts else F.lit(WHOLE_TABLE)

    def count(df: DataFrame) -> dict[str, int]:
        return {r["k"]: r["n"] for r in df.groupBy(key.alias("k")).count().withColumnRenamed("count", "n").collect()}

    counts = [count(df) for df in (want, got, want.exceptAll(got), got.exceptAll(want))]
    return {k: tuple(c.get(k, 0) for c in counts) for k in set().union(*counts)}


def test_compare_counts_what_except_all_counts_per_partition(spark):
    rnd = random.Random(11)
    db = "t_compare"
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {db}")
    want_rows = drawn(rnd, 60)
    assert any(str(r[3]) == "-0.0" for r in want_rows)  # the zeros check below is not vacuous
    got_rows = [r for r in want_rows if rnd.random() > 0.15] + rnd.sample(want_rows, 6) + drawn(rnd, 5)
    rnd.shuffle(got_rows)
    for name, rows in (("want", want_rows), ("got", got_rows), ("same", list(reversed(want_rows)))):
        spark.createDataFrame(rows, SCHEMA).write.format("delta").mode("overwrite").saveAsTable(f"{db}.{name}")
    want, got = spark.table(f"{db}.want"), spark.table(f"{db}.got")

    for parts in (["dt", "odd.tag"], ["dt"], []):
        diffs, problems = compare(spark, f"{db}.want", f"{db}.got", parts, table="sink")
        assert not problems
        found = {d.partition: (d.batch_rows, d.stream_rows, d.missing, d.extra) for d in diffs}
        assert found == by_except_all(want, got, parts), parts
        assert [d.partition for d in diffs] == sorted(found)
        assert any(not d.ok for d in diffs) and {d.table for d in diffs} == {"sink"}
    # the drawn differences reach a NULL partition and one holding `/`
    spec = {d.partition for d in compare(spark, f"{db}.want", f"{db}.got", ["dt", "odd.tag"], table="s")[0]}
    assert any("__HIVE_DEFAULT_PARTITION__" in s for s in spec) and any("a%2Fb" in s for s in spec)

    same, _ = compare(spark, f"{db}.want", f"{db}.same", ["dt"], table="sink")
    assert all(d.ok for d in same) and sum(d.batch_rows for d in same) == len(want_rows)
    # -0.0 and 0.0 are one value, as they are to EXCEPT ALL
    spark.createDataFrame([r[:3] + ((0.0 if r[3] == 0.0 else r[3]),) for r in want_rows], SCHEMA) \
        .write.format("delta").mode("overwrite").saveAsTable(f"{db}.zeros")
    assert all(d.ok for d in compare(spark, f"{db}.want", f"{db}.zeros", ["dt"], table="sink")[0])
    # a table that does not exist is empty: every row of the other side is missing
    gone, _ = compare(spark, f"{db}.want", f"{db}.nothing", [], table="sink")
    assert [(d.partition, d.batch_rows, d.stream_rows, d.missing, d.extra) for d in gone] == [
        (WHOLE_TABLE, len(want_rows), 0, len(want_rows), 0)]
    spark.sql(f"DROP DATABASE {db} CASCADE")
