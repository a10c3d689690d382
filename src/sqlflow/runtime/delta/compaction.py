"""Compaction of committed partitions: Delta `OPTIMIZE ... WHERE` (`sqlflow compact`).

Only partitions with a `commit` row in the commit log (docs/design.md §2.5) are compacted: an open hour
is still being appended to by its stream, and rewriting its files under the writer would only
make more small files to compact again. Files are bin-packed up to the model's
`target_file_size` (Delta's `optimize.maxFileSize`), the size the file budget aims at.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import SparkSession
from sqlglot import exp

from sqlflow.errors import SqlflowError
from sqlflow.runtime.delta import commitlog
from sqlflow.runtime.delta.sinks import quote

CHUNK = 200  # partitions per OPTIMIZE statement: keeps the predicate small


@dataclass(frozen=True)
class CompactResult:
    table: str
    partitions: int  # committed partitions the predicate selected
    files_removed: int
    files_added: int


def committed_predicate(specs: list[str]) -> str:
    """`(`dt` = '2026-11-01' AND `hour` = '10') OR ...` for commit-log partition specs: the
    values unescaped (a spec is a path, the predicate compares data) and built as a sqlglot
    tree, so a value holding a quote is a literal, never SQL; the default partition is NULL."""
    terms = []
    for spec in specs:
        levels = []
        for k, v in commitlog.parse_partition(spec).items():
            column = exp.column(k, quoted=True)
            levels.append(exp.Is(this=column, expression=exp.Null()) if v is None
                          else exp.EQ(this=column, expression=exp.Literal.string(v)))
        terms.append(exp.Paren(this=exp.and_(*levels)))
    return exp.or_(*terms).sql(dialect="spark") if terms else ""


def _literal(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace("'", "\\'")


def compact(spark: SparkSession, table: str, *, where: str | None = None,
            target_file_size: int | None = None) -> CompactResult:
    """OPTIMIZE the committed partitions of `table` (narrowed by `where`, a predicate on
    partition columns) and say how many files it rewrote."""
    if not spark.catalog.tableExists(table):
        raise SqlflowError(f"table `{table}` does not exist", hint="run its model first")
    specs = sorted(p for p in commitlog.ready_partitions(spark, table) if p)
    if not specs:
        return CompactResult(table, 0, 0, 0)
    if target_file_size:
        spark.conf.set("spark.databricks.delta.optimize.maxFileSize", str(target_file_size))
    removed = added = 0
    for i in range(0, len(specs), CHUNK):
        predicate = committed_predicate(specs[i:i + CHUNK])
        if where:
            predicate = f"({where}) AND ({predicate})"
        try:
            row = spark.sql(f"OPTIMIZE {quote(table)} WHERE {predicate}").collect()[0]
        except Exception as exc:  # a bad --where: Spark's message says which column
            raise SqlflowError(f"cannot compact `{table}`: {str(exc).strip().splitlines()[0]}",
                               hint="--where may only use the table's partition columns, "
                                    "e.g. \"dt >= '2026-11-01'\"") from exc
        metrics = row["metrics"]
        removed += int(metrics["numFilesRemoved"])
        added += int(metrics["numFilesAdded"])
    return CompactResult(table, len(specs), removed, added)
