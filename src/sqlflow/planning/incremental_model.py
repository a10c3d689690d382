"""An `incremental` model's incremental run, as dbt-spark's incremental materialization plans it.

A model with `materialized='incremental'` is rendered twice (docs/semantics.md, "Incremental
models"): once with `is_incremental()` false (the plan's `sql`: the first build and every
`--full-refresh`), and once with it true (`IncrementalRun.sql`, which may read `{{ this }}`).
The runtime picks one per run, as dbt does: the incremental SQL when the model's table exists
as a table and the run is not a full refresh. The strategy is dbt-spark's, validated as
`dbt_spark_validate_get_incremental_strategy` validates it, so a model dbt refuses is refused
here too, at its config line:

>>> strategy_of(None, "parquet"), strategy_of("merge", "delta")
('append', 'merge')
>>> strategy_of("merge", "parquet")
Traceback (most recent call last):
...
ValueError: the `merge` strategy needs file_format 'delta' (or 'iceberg', 'hudi'), not 'parquet'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from sqlglot import exp

from sqlflow.dialect import DIALECT, parse
from sqlflow.errors import Diagnostic, Location, SqlflowError
from sqlflow.project.config import column_list

Strategy = Literal["append", "merge", "insert_overwrite"]
STRATEGIES: tuple[str, ...] = ("append", "merge", "insert_overwrite")
MERGE_FORMATS = ("delta", "iceberg", "hudi")  # dbt-spark's validate.sql
# dbt's incremental_validate_on_schema_change: any other value is `ignore`
SCHEMA_CHANGES = ("ignore", "fail", "append_new_columns", "sync_all_columns")


@dataclass(frozen=True)
class IncrementalRun:
    """What an incremental run of the model does: `sql` (rendered with `is_incremental()`
    true) written by `strategy` into the existing table. `unique_key`: merge's match columns
    (none: every row is inserted, dbt's `on FALSE`); `predicates`: the model's
    `incremental_predicates`, added to the merge condition; `update_columns` / `exclude_columns`:
    `merge_update_columns` / `merge_exclude_columns`; `full_refresh`: the model's
    `full_refresh` config (False: `--full-refresh` leaves it incremental, as in dbt);
    `on_schema_change`: what the run does when the new rows' columns differ from the table's
    (`sqlflow.runtime.schema_change`; an unknown value is dbt's `ignore`)."""

    sql: str
    strategy: Strategy
    unique_key: tuple[str, ...] = ()
    predicates: tuple[str, ...] = ()
    update_columns: tuple[str, ...] = ()
    exclude_columns: tuple[str, ...] = ()
    full_refresh: bool | None = None
    on_schema_change: str = "ignore"


def strategy_of(configured: str | None, file_format: str) -> Strategy:
    """dbt-spark's strategy for the config: `append` by default; ValueError (with what to do)
    for a strategy dbt-spark refuses or one sqlflow leaves to dbt (`microbatch`)."""
    strategy = (configured or "append").strip().lower()
    if strategy == "microbatch":
        raise ValueError("the `microbatch` strategy is not run by sqlflow; build the model with "
                         "`sqlflow dbt run --select <model>`")
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown incremental_strategy `{configured}`; expected one of "
                         + ", ".join(f"'{s}'" for s in STRATEGIES))
    if strategy == "merge" and file_format not in MERGE_FORMATS:
        raise ValueError(f"the `merge` strategy needs file_format 'delta' (or 'iceberg', "
                         f"'hudi'), not '{file_format}'")
    return strategy  # type: ignore[return-value]  # one of STRATEGIES


def incremental_run(config: Any, sql: str, file_format: str,
                    origin: Location) -> IncrementalRun | Diagnostic:
    """The model's IncrementalRun, or the Diagnostic (at `origin`, the strategy's config line)
    that says why dbt-spark would refuse it."""
    try:
        strategy = strategy_of(config.incremental_strategy, file_format)
        predicates = tuple(_condition(p) for p in config.incremental_predicates or ())
    except ValueError as exc:
        return Diagnostic(str(exc), origin, "fix the model's incremental config "
                          "(docs/semantics.md, \"Incremental models\")")
    return IncrementalRun(
        sql=sql, strategy=strategy, unique_key=column_list(config.unique_key),
        predicates=predicates, update_columns=tuple(config.merge_update_columns or ()),
        exclude_columns=tuple(config.merge_exclude_columns or ()),
        full_refresh=config.full_refresh,
        on_schema_change=config.on_schema_change if config.on_schema_change in SCHEMA_CHANGES
        else "ignore")


def _condition(text: str) -> str:
    """An `incremental_predicates` entry as Spark SQL: parsed (one boolean expression, never
    a statement spliced as text), then printed."""
    try:
        tree = parse(f"SELECT 1 WHERE {text}")
    except SqlflowError as exc:
        raise ValueError(f"incremental_predicates entry `{text}` is not a SQL condition") from exc
    where = tree.args.get("where") if isinstance(tree, exp.Select) else None
    if where is None:
        raise ValueError(f"incremental_predicates entry `{text}` is not a SQL condition")
    return str(where.this.sql(dialect=DIALECT))
