"""`deltalog.describe` parses the catalog's `DESCRIBE TABLE EXTENDED` rows (no JVM: the rows
are given as Spark prints them, in both spellings of a table's partitioning)."""

from __future__ import annotations

from types import SimpleNamespace

from sqlflow.runtime.delta import deltalog


class Catalog:
    """Answers `spark.sql(...).collect()` with fixed rows, like a session would."""

    def __init__(self, rows):
        self.rows = [{"col_name": n, "data_type": t, "comment": ""} for n, t in rows]
        self.asked: list[str] = []

    def sql(self, text):
        self.asked.append(text)
        return SimpleNamespace(collect=lambda: self.rows)


DETAILS = [("", ""), ("# Detailed Table Information", ""), ("Table", "t"),
           ("Location", "file:/w/db.db/t"), ("Provider", "delta")]


def test_hive_style_partition_information():
    spark = Catalog([("id", "bigint"), ("dt", "string"), ("hour", "string"),
                     ("# Partition Information", ""), ("# col_name", "data_type"),
                     ("dt", "string"), ("hour", "string"), *DETAILS])
    info = deltalog.describe(spark, "db.t")
    assert info == deltalog.TableInfo("delta", "file:/w/db.db/t", ("dt", "hour"))
    assert spark.asked == ["DESCRIBE TABLE EXTENDED `db`.`t`"]


def test_transform_style_partitioning_and_no_partitions():
    spark = Catalog([("id", "bigint"), ("dt", "string"), ("", ""), ("# Partitioning", ""),
                     ("Part 0", "dt"), *DETAILS])
    assert deltalog.describe(spark, "db.t").partition_columns == ("dt",)
    view = Catalog([("id", "int"), ("", ""), ("# Detailed Table Information", ""), ("Type", "VIEW")])
    assert deltalog.describe(view, "db.v") == deltalog.TableInfo("", None, ())
