"""Partition values are data, not paths: one escaping, exactly Spark's (docs/semantics.md,
"Partition values")."""

from __future__ import annotations

import os
from urllib.parse import unquote

import pytest
from pyspark.sql import functions as F

from sqlflow.runtime.delta import commitlog as C
from sqlflow.runtime.delta import partition_path as P
from sqlflow.runtime.delta.compaction import committed_predicate

POISON = ["a/b=c%d", "../../../../tmp/x", "..", "it's", "x" * 300, "é€ 1", "%2F", "a\\b\x01\x7f"]


@pytest.mark.parametrize("value", POISON + ["2026-11-01", "03", "pv"])
def test_a_value_round_trips_and_is_one_level(value):
    spec = P.spec({"dt": "2026-11-01", "tag": value})
    assert spec.count("/") == 1 and ".." not in spec.split("/")
    assert P.parse(spec) == {"dt": "2026-11-01", "tag": value}
    assert C.parse_partition(spec) == P.parse(spec)


def test_the_issue_values_are_spelled_as_spark_spells_them():
    assert P.spec({"event_type": "a/b=c%d"}) == "event_type=a%2Fb%3Dc%25d"
    assert P.spec({"product": "../../../../tmp/x"}) == "product=..%2F..%2F..%2F..%2Ftmp%2Fx"
    assert P.spec([("dt", None), ("hour", "")]) == "dt=__HIVE_DEFAULT_PARTITION__/hour=__HIVE_DEFAULT_PARTITION__"
    assert P.parse("dt=__HIVE_DEFAULT_PARTITION__") == {"dt": None}
    assert P.spec({"dt": "2026-11-01", "hour": 3}) == "dt=2026-11-01/hour=3"  # normal values unchanged


def test_a_marker_path_never_leaves_the_table_folder():
    spec = P.spec({"dt": "2026-11-01", "product": "../../../../tmp/x"})
    assert P.directory("file:/w/t", spec) == "file:/w/t/dt=2026-11-01/product=..%2F..%2F..%2F..%2Ftmp%2Fx"
    for raw in ("dt=2026-11-01/../../x", "product=../../x", "a=b/c"):
        with pytest.raises(ValueError):
            P.directory("file:/w/t", raw)


def test_compaction_predicate_compares_the_unescaped_values_as_literals():
    spec = P.spec({"dt": "2026-11-01", "tag": "it's a/b"})
    assert committed_predicate([spec]) == "(`dt` = '2026-11-01' AND `tag` = 'it\\'s a/b')"
    assert committed_predicate([P.spec({"dt": None})]) == "(`dt` IS NULL)"


@pytest.mark.spark
def test_the_escaping_is_sparks_own_for_every_ascii_character(spark, tmp_path):
    """Write a partitioned Delta table with every ASCII character (but NUL, which Spark cannot
    write) and the issue's values; each directory is named `P.spec`, and Spark's key column
    computes the same text."""
    values = [f"v{chr(c)}x" for c in range(1, 128)] + POISON[:4] + POISON[5:] + ["", None]
    df = spark.createDataFrame(list(enumerate(values)), "i int, p string")
    path = str(tmp_path / "t")
    df.write.format("delta").partitionBy("p").save(path)
    got = {r["i"]: unquote(r["f"]).rsplit("/", 2)[1] for r in spark.read.format("delta").load(path)
           .select("i", F.input_file_name().alias("f")).collect()}
    assert got == {i: P.spec({"p": v}) for i, v in enumerate(values)}
    assert set(os.listdir(path)) - {"_delta_log"} == {P.spec({"p": v}) for v in values}
    keys = {r["i"]: r["k"] for r in df.select("i", P.key(["p"]).alias("k")).collect()}
    assert keys == got
    rows = [("ok", "x" * 252), ("ok", "x" * 253), ("ok", None), (None, "d"), ("a\x00b", "d"),
            ("ok", "%" * 84), ("ok", "%" * 85), ("ok", "é" * 126), ("__HIVE_DEFAULT_PARTITION__", "d")]
    reasons = spark.createDataFrame(rows, "tag string, dt string").select(
        P.problem(["dt", "tag"], required=["dt"]).alias("r"), P.problem(["tag"]).alias("q")).collect()
    assert [(r["r"], r["q"]) for r in reasons] == [
        (None, None), ("bad_partition", None), ("null_partition", None), (None, None),
        ("bad_partition", "bad_partition"), (None, None), ("bad_partition", None), (None, None),
        ("bad_partition", "bad_partition")]
