"""Two DataFrames compared as multisets of rows, every column, in one Spark job.

EXCEPT ALL both ways is two shuffles and two jobs (three with a count that shows the comparison
is not vacuous); grouping the union of both sides by every column and counting each side's
copies answers all three at once, with the same equality (Spark rewrites EXCEPT ALL into that
aggregate: NULLs equal, -0.0 equal to 0.0). The aggregate is `sqlflow verify`'s own
(`workflows/verify/compare.copies`); this module lists the differing rows for a test's message."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sqlflow.identifiers import quote
from sqlflow.workflows.verify.compare import BATCH, STREAM, copies


@dataclass(frozen=True)
class RowDiff:
    """Rows `want` has more copies of (`missing`) and rows `got` has more of (`extra`), each as
    (row as a dict, how many copies more), at most `limit` each; `want_rows`: rows of `want`."""

    missing: list[tuple[dict, int]]
    extra: list[tuple[dict, int]]
    want_rows: int

    @property
    def equal(self) -> bool:
        return not self.missing and not self.extra


def row_diff(want: DataFrame, got: DataFrame, limit: int = 10) -> RowDiff:
    """`want` and `got` row for row, by column name (`got` may order its columns differently,
    but must have the same ones: EXCEPT ALL refuses two sides of different widths)."""
    names = want.columns
    assert sorted(got.columns) == sorted(names), f"columns differ: want {names}, got {got.columns}"
    cols = [F.col(quote(c)) for c in names]
    differs = F.col(BATCH) != F.col(STREAM)
    diff = F.struct(F.struct(*cols).alias("row"), (F.col(BATCH) - F.col(STREAM)).alias("n"))
    (summary,) = copies(want, got).agg(F.coalesce(F.sum(BATCH), F.lit(0)).alias("rows"),
                                       F.collect_list(F.when(differs, diff)).alias("diff")).collect()
    ordered = sorted(summary["diff"], key=lambda d: str(d["row"]))
    missing = [(d["row"].asDict(), d["n"]) for d in ordered if d["n"] > 0][:limit]
    extra = [(d["row"].asDict(), -d["n"]) for d in ordered if d["n"] < 0][:limit]
    return RowDiff(missing, extra, summary["rows"])
