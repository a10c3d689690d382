"""Run one dbt data test (docs/semantics.md, "sqlflow build"): count the rows its SQL returns.

The count is taken as dbt's `get_test_sql` takes it, `SELECT count(*) FROM (<test>)`, built on
the sqlglot tree of the rendered test.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from sqlflow.dialect import DIALECT, parse


def count_failures(spark: Any, sql: str) -> int:
    """How many rows the test query returns (0: the test passes)."""
    inner = parse(sql)
    assert isinstance(inner, exp.Query)  # a test is a query (parse refuses anything else)
    query = exp.select(exp.Count(this=exp.Star()).as_("failures")).from_(
        inner.subquery("dbt_internal_test"))
    return int(spark.sql(query.sql(dialect=DIALECT)).collect()[0][0])
