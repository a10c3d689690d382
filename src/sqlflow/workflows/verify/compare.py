"""The comparison of `sqlflow verify` and `sqlflow audit`: two tables as multisets, per
output partition.

Both directions of EXCEPT ALL over every column (minus the ones a caller drops), counted per
partition, so a duplicated row counts and a report can say where the outputs differ. Computed
as one Spark query: the union of both sides grouped by every column, each side's copies of a
row counted, then summed per partition (a row with more batch copies than stream copies is
`missing` by the difference, and the other way `extra`). That is how Spark itself plans EXCEPT
ALL (NULLs equal, -0.0 equal to 0.0), without a job per direction and per count.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import cast

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from sqlflow.identifiers import quote as quote_ident
from sqlflow.runtime.delta import partition_path

WHOLE_TABLE = "(whole table)"  # the one "partition" of a table compared without partition columns


@dataclass(frozen=True)
class PartitionDiff:
    """One output partition of one compared table (`sink`, a routed target, `quarantine`) in one run."""

    table: str
    partition: str
    batch_rows: int
    stream_rows: int
    missing: int  # batch rows the stream did not write (EXCEPT ALL: multiset)
    extra: int  # stream rows the batch did not write

    @property
    def ok(self) -> bool:
        return self.missing == 0 and self.extra == 0



def compare(spark: SparkSession, want_table: str, got_table: str, partition_by: Sequence[str], *,
            table: str, drop: Sequence[str] = (), rename_input: dict[str, str] | None = None,
            origin_of: Collection[str] | None = None
            ) -> tuple[tuple[PartitionDiff, ...], tuple[str, ...]]:
    """Per-partition multiset difference of two tables, both directions of EXCEPT ALL over every
    column (minus `drop`). A table that does not exist is empty. `rename_input` maps the
    quarantine's `input` column from copy tables back to the relations they copy. `origin_of`
    (a quarantine): the inputs whose rows' `origin` is compared (a Kafka record's
    topic/partition/offset); the other rows' `origin` names the run that read them, and is
    compared as NULL."""
    want, got = _table(spark, want_table), _table(spark, got_table)
    if want is None and got is None:
        return (), ()
    # not both None: when `want` is, `got` is not
    want = want if want is not None else spark.createDataFrame([], cast(DataFrame, got).schema)
    got = got if got is not None else spark.createDataFrame([], want.schema)
    want, got = want.drop(*drop), got.drop(*drop)
    if rename_input and "input" in got.columns:
        mapped = F.col("input")
        for copy, original in rename_input.items():
            mapped = F.when(F.col("input") == copy, F.lit(original)).otherwise(mapped)
        got = got.withColumn("input", mapped)
    if origin_of is not None and "origin" in want.columns and "input" in want.columns:
        keep = [r.lower() for r in origin_of]
        want, got = (df.withColumn("origin", F.when(F.lower(F.col("input")).isin(keep), F.col("origin")))
                     for df in (want, got))
    problems = _schema_problems(want, got, table)
    if problems:
        return (), problems
    got = got.select(*[F.col(quote_ident(c)) for c in want.columns])
    key = _partition_key(want.columns, partition_by)
    return tuple(PartitionDiff(table, *row) for row in _counts(want, got, key)), ()


def _table(spark: SparkSession, name: str) -> DataFrame | None:
    return spark.table(name) if spark.catalog.tableExists(name) else None


def _schema_problems(want: DataFrame, got: DataFrame, table: str) -> tuple[str, ...]:
    w = {f.name.lower(): f.dataType.simpleString() for f in want.schema.fields}
    g = {f.name.lower(): f.dataType.simpleString() for f in got.schema.fields}
    out = [f"{table}: column `{c}` only in the batch output" for c in w if c not in g]
    out += [f"{table}: column `{c}` only in the stream output" for c in g if c not in w]
    out += [f"{table}: column `{c}` is {w[c]} in the batch output, {g[c]} in the stream output"
            for c in w if c in g and w[c] != g[c]]
    return tuple(out)


def _partition_key(columns: Sequence[str], partition_by: Sequence[str]) -> Column:
    """The partition's spec (`dt=2026-11-01/tag=a%2Fb`), escaped as the project spells every
    partition (`sqlflow.runtime.delta.partition_path`): a value holding `/` or `=` stays one
    level, NULL is `__HIVE_DEFAULT_PARTITION__`; `partition_path.parse` reads it back."""
    names = {c.lower(): c for c in columns}
    parts = [names[p.lower()] for p in partition_by if p.lower() in names]
    if not parts:
        return F.lit(WHOLE_TABLE)
    return partition_path.key(parts)


BATCH, STREAM = "__sqlflow_batch_copies", "__sqlflow_stream_copies"


def copies(want: DataFrame, got: DataFrame) -> DataFrame:
    """Every distinct row of either side (`want`'s columns, matched by name in `got`) with how
    many copies each side holds, in columns `BATCH` and `STREAM`: the one aggregate both
    directions of EXCEPT ALL are counted from (see the module docstring)."""
    cols = [F.col(quote_ident(c)) for c in want.columns]
    sides = (want.select(*cols, F.lit(1).alias(BATCH), F.lit(0).alias(STREAM))
             .unionByName(got.select(*cols, F.lit(0).alias(BATCH), F.lit(1).alias(STREAM))))
    return sides.groupBy(*cols).agg(F.sum(BATCH).alias(BATCH), F.sum(STREAM).alias(STREAM))


def _counts(want: DataFrame, got: DataFrame, key: Column) -> list[tuple[str, int, int, int, int]]:
    """Per partition (sorted): batch rows, stream rows, missing, extra (see the module
    docstring)."""
    more = F.col(BATCH) - F.col(STREAM)
    rows = copies(want, got).groupBy(key.alias("k")).agg(
        F.sum(BATCH).alias("batch"), F.sum(STREAM).alias("stream"),
        F.sum(F.greatest(more, F.lit(0))).alias("missing"),
        F.sum(F.greatest(-more, F.lit(0))).alias("extra")).collect()
    return sorted((r["k"], r["batch"], r["stream"], r["missing"], r["extra"]) for r in rows)
