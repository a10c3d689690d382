"""A table create that finds its own table already there (docs/semantics.md, "Faults: what is
guaranteed, what is refused, what an operator does").

sqlflow creates a table only after the catalog said it does not exist, and the run lock keeps
every other run of the model out. The create can still fail with Spark's
`TABLE_OR_VIEW_ALREADY_EXISTS` when it ran twice: over Spark Connect the client sends the
create as an `ExecutePlan` and, when the response stream breaks before its first answer and the
server has already released the finished operation, sends the same plan again (pyspark's
reattachable iterator treats `OPERATION_NOT_FOUND` as "never reached the server"). The second
run finds the table the first one made. On a loaded machine this happens (the stream service's
idle step failed on it once, 2026-12-03).

`create` runs the create and, on that error, accepts a table whose owner properties say this
model created it in this role (docs/semantics.md, "Table ownership"): it was this create. Any
other table is refused as before (the error is raised unchanged). The caller then goes on as
if it had created it: an empty create has nothing more to do, a create with rows writes them
the idempotent way (an append whose duplicates readers ignore, a partition overwrite).
"""

from __future__ import annotations

from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession

from sqlflow.runtime.delta import deltalog

ALREADY_EXISTS = "TABLE_OR_VIEW_ALREADY_EXISTS"


def create(spark: SparkSession, writer: Any, table: str, owner: str | None, role: str) -> bool:
    """`writer.create()` (a `DataFrameWriterV2`); True when it created `table`, False when the
    table was there already and `owner` owns it in `role` (module doc)."""
    try:
        writer.create()
        return True
    except AnalysisException as exc:
        if not owner or not already_exists(exc):
            raise
        info = deltalog.describe(spark, table)
        if info.owner != (owner, role):
            raise
        return False


def already_exists(exc: BaseException) -> bool:
    """Whether `exc` is Spark's error for a create whose table exists."""
    getter = getattr(exc, "getCondition", None)
    condition = getter() if getter is not None else None
    return condition == ALREADY_EXISTS or (condition is None and f"[{ALREADY_EXISTS}]" in str(exc))
