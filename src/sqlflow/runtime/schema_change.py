"""An incremental run's `on_schema_change`, as dbt-spark applies it (docs/semantics.md,
"Incremental models").

Before an incremental run writes, dbt compares the columns of the new rows (its temporary
view) with the existing table's (`check_for_schema_changes`): a column of the rows the table
lacks, a column of the table the rows lack, or a column whose type differs (two string types
never differ: `SparkColumn.can_expand_to`). Names compare exactly, as dbt's `diff_columns`.
Then, by the model's `on_schema_change`:

| value | what happens to the table |
|---|---|
| `ignore` (default; dbt reads any unknown value as `ignore`) | nothing: the strategy writes the table's columns |
| `fail` | the run stops with dbt's message, the table untouched |
| `append_new_columns` | `ALTER TABLE t ADD COLUMNS (<new columns, the rows' types>)` |
| `sync_all_columns` | the new columns are added; a removed column stops the run (dbt-spark: Delta Lake / Apache Spark "does not support dropping columns from tables"); a changed type is `ALTER TABLE t ALTER COLUMN c TYPE <new type>`, which Spark may refuse |

>>> _changes([("id", "int"), ("v", "string"), ("w", "int")], [("id", "bigint"), ("v", "varchar(3)"), ("x", "int")])
Changes(added=[('w', 'int')], removed=[('x', 'int')], retyped=[('id', 'int')])
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession

from sqlflow.runtime.delta.deltalog import quote

_STRINGS = ("text", "character varying", "character", "varchar", "string")


@dataclass(frozen=True)
class Changes:
    """dbt's schema_changes_dict: (name, type) of the rows' new columns, of the table's columns
    the rows lack, and of the rows' columns whose type is new."""

    added: list[tuple[str, str]]
    removed: list[tuple[str, str]]
    retyped: list[tuple[str, str]]

    @property
    def changed(self) -> bool:
        return bool(self.added or self.removed or self.retyped)


def _is_string(dtype: str) -> bool:
    return dtype.lower().split("(")[0] in _STRINGS


def _changes(source: list[tuple[str, str]], target: list[tuple[str, str]]) -> Changes:
    target_types = dict(target)
    source_names = {name for name, _ in source}
    retyped = [(name, dtype) for name, dtype in source if name in target_types
               and dtype != target_types[name]
               and not (_is_string(dtype) and _is_string(target_types[name]))]
    return Changes(added=[c for c in source if c[0] not in target_types],
                   removed=[c for c in target if c[0] not in source_names], retyped=retyped)


def _columns(df: DataFrame) -> list[tuple[str, str]]:
    return [(f.name, f.dataType.simpleString()) for f in df.schema.fields]


def _listed(columns: list[tuple[str, str]]) -> str:
    return "[" + ", ".join(f"{name} ({dtype})" for name, dtype in columns) + "]"


def apply(spark: SparkSession, table: str, rows: DataFrame, mode: str, file_format: str) -> None:
    """Compare `rows` with `table` and apply `mode` (see the module doc). Raises ValueError
    with dbt's reason when the mode stops the run; the table is then unchanged."""
    if mode == "ignore":
        return
    found = _changes(_columns(rows), _columns(spark.table(table)))
    if not found.changed:
        return
    if mode == "fail":
        raise ValueError(
            "the source and target schemas of this incremental model are out of sync "
            f"(on_schema_change: fail). Source columns not in target: {_listed(found.added)}; "
            f"target columns not in source: {_listed(found.removed)}; new column types: "
            f"{_listed(found.retyped)}. Set `on_schema_change` to `append_new_columns` or "
            "`sync_all_columns`, rebuild the model with --full-refresh, or change the table "
            "by hand and run again")
    if mode == "sync_all_columns" and found.removed:
        platform = {"delta": "Delta Lake", "iceberg": "Iceberg"}.get(file_format, "Apache Spark")
        raise ValueError(f"{platform} does not support dropping columns from tables "
                         f"(on_schema_change: sync_all_columns; the new rows lack "
                         f"{_listed(found.removed)}); rebuild the model with --full-refresh")
    if found.added:
        added = ", ".join(f"{quote(name)} {dtype}" for name, dtype in found.added)
        spark.sql(f"ALTER TABLE {quote(table)} ADD COLUMNS ({added})")
    if mode == "sync_all_columns":
        for name, dtype in found.retyped:
            spark.sql(f"ALTER TABLE {quote(table)} ALTER COLUMN {quote(name)} TYPE {dtype}")
