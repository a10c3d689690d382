"""The comparison every differential test relies on (`tests/rowdiff.py`) finds what EXCEPT ALL
both ways finds: a missing row, an extra row, a row held once too often, a column only one
side has; in one job."""

from __future__ import annotations

import pytest

from rowdiff import row_diff

pytestmark = pytest.mark.spark

SCHEMA = "k string, n bigint, `odd.name` double"


def test_row_diff_agrees_with_except_all_both_ways(spark):
    want = spark.createDataFrame([("a", 1, 0.5), ("a", 1, 0.5), ("b", None, None), ("c", 3, -0.0)], SCHEMA)
    same = spark.createDataFrame([("c", 3, 0.0), ("b", None, None), ("a", 1, 0.5), ("a", 1, 0.5)], SCHEMA)
    got = spark.createDataFrame([("a", 1, 0.5), ("b", None, None), ("d", 4, 1.0), ("d", 4, 1.0)], SCHEMA)

    assert row_diff(want, same.select("`odd.name`", "n", "k")) == row_diff(want, same)
    equal = row_diff(want, same)
    assert equal.equal and equal.want_rows == 4

    diff = row_diff(want, got)
    assert not diff.equal and diff.want_rows == 4
    assert diff.missing == [({"k": "a", "n": 1, "odd.name": 0.5}, 1), ({"k": "c", "n": 3, "odd.name": -0.0}, 1)]
    assert diff.extra == [({"k": "d", "n": 4, "odd.name": 1.0}, 2)]
    # the same rows as EXCEPT ALL each way, copies counted
    assert sum(n for _, n in diff.missing) == want.exceptAll(got).count()
    assert sum(n for _, n in diff.extra) == got.exceptAll(want).count()
    assert row_diff(want.limit(0), got.limit(0)).want_rows == 0
    # a column only one side has is a difference, as it is to EXCEPT ALL
    with pytest.raises(AssertionError, match="columns differ"):
        row_diff(want, same.withColumn("extra", same["n"]))
