"""Run one dbt data test (docs/semantics.md, "sqlflow build") as dbt's `test` materialization
runs it.

The test's SQL selects its failing rows; `limit` caps them (dbt's `get_limit_sql`). With
`store_failures` they are first written to the test's relation (a table, or a view with
`store_failures_as: view`; what was there is dropped, as dbt drops it) and counted from it.
The result is dbt's `get_test_sql`: `SELECT <fail_calc> AS failures, <fail_calc> <warn_if> AS
should_warn, <fail_calc> <error_if> AS should_error FROM (<rows>) dbt_internal_test`, built as
a sqlglot tree: each config text is parsed as one expression, never spliced as a statement.
A test fails when `should_error` holds and its severity is `error`, warns when `should_warn`
holds, passes otherwise.

>>> print(result_query("SELECT id FROM t WHERE id IS NULL", TestConfig(limit=5, warn_if=">= 3")))
SELECT COUNT(*) AS failures, COUNT(*) >= 3 AS should_warn, COUNT(*) <> 0 AS should_error FROM (SELECT * FROM (SELECT id FROM t WHERE id IS NULL) AS dbt_internal_limit LIMIT 5) AS dbt_internal_test
>>> result_query("SELECT 1", TestConfig(fail_calc="1; DROP TABLE t"))
Traceback (most recent call last):
...
ValueError: `fail_calc` / `warn_if` / `error_if` are not SQL expressions: `1; DROP TABLE t`, `!= 0`, `!= 0`
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from sqlflow.dialect import DIALECT, parse
from sqlflow.errors import SqlflowError
from sqlflow.rendering.render import Relation
from sqlflow.rendering.test_config import TestConfig
from sqlflow.runtime.delta.deltalog import quote

_ROWS = "dbt_internal_test_rows"  # placeholder table of the result template


@dataclass(frozen=True)
class TestResult:
    __test__ = False  # not a pytest class

    failures: Any
    should_warn: bool
    should_error: bool

    def status(self, severity: str) -> str:
        """dbt's TestRunner: `fail`, `warn` or `ok`."""
        if severity == "error" and self.should_error:
            return "fail"
        return "warn" if self.should_warn else "ok"


def _rows(sql: str, limit: int | None) -> exp.Query:
    inner = parse(sql)
    assert isinstance(inner, exp.Query)  # a test is a query (parse refuses anything else)
    if limit is None:
        return inner
    return exp.select(exp.Star()).from_(inner.subquery("dbt_internal_limit")).limit(limit)


def result_query(rows_sql: str | exp.Query, config: TestConfig) -> str:
    """dbt's `get_test_sql` over the failing rows (a query, or SQL text: limited by `config`)."""
    calc, warn, error = config.fail_calc, config.warn_if, config.error_if
    try:
        tree = parse(f"SELECT {calc} AS failures, {calc} {warn} AS should_warn, "
                     f"{calc} {error} AS should_error FROM {_ROWS}")
    except SqlflowError:
        tree = None
    source = (tree.args.get("from_") or tree.args.get("from")) if isinstance(tree, exp.Select) else None
    if (not isinstance(tree, exp.Select) or len(tree.expressions) != 3 or source is None
            or not isinstance(source.this, exp.Table) or source.this.name != _ROWS
            or any(tree.args.get(k) for k in ("joins", "where", "group", "having", "limit"))):
        raise ValueError(f"`fail_calc` / `warn_if` / `error_if` are not SQL expressions: "
                         f"`{calc}`, `{warn}`, `{error}`")
    rows = rows_sql if isinstance(rows_sql, exp.Query) else _rows(rows_sql, config.limit)
    source.set("this", rows.subquery("dbt_internal_test"))
    return str(tree.sql(dialect=DIALECT))


def store(spark: Any, relation: Relation, sql: str, config: TestConfig) -> None:
    """Write the failing rows to `relation` (dbt's test materialization with store_failures):
    the old relation dropped, the schema created if missing, then a table or a view."""
    schema, name = relation.schema, relation.identifier
    full = quote(f"{schema}.{name}")
    spark.sql(f"CREATE SCHEMA IF NOT EXISTS {quote(schema)}")
    if spark.catalog.tableExists(f"{schema}.{name}"):
        kind = spark.catalog.getTable(f"{schema}.{name}").tableType
        spark.sql(f"DROP {'VIEW' if kind == 'VIEW' else 'TABLE'} IF EXISTS {full}")
    body = _rows(sql, config.limit).sql(dialect=DIALECT)
    spark.sql(f"CREATE {'VIEW' if config.store_as == 'view' else 'TABLE'} {full} AS {body}")


def run_test(spark: Any, sql: str, config: TestConfig,
             relation: Relation | None = None) -> TestResult:
    """Run the test (see the module doc); `relation`: store its failing rows there."""
    if relation is not None:
        store(spark, relation, sql, config)
        rows: str | exp.Query = exp.select(exp.Star()).from_(
            exp.to_table(f"{relation.schema}.{relation.identifier}", dialect=DIALECT))
    else:
        rows = sql
    row = spark.sql(result_query(rows, config)).collect()[0]
    return TestResult(row["failures"], bool(row["should_warn"]), bool(row["should_error"]))

