"""Load a seed as `dbt seed` does on Spark (docs/semantics.md, "Seeds").

The CSV is read by dbt's own reader (agate, dbt's type tester) and each column typed by
dbt-spark's rules (`bigint`, `double`, `boolean`, `date`, `timestamp`, `string`) unless the
seed's `column_types` names it. The table is dropped and created as dbt-spark creates it
(`USING <file_format>` only when configured, so both tools agree on the format), then each row is
inserted as `cast(<value> AS <type>)` from the literal dbt-spark binds, with ANSI mode off as
dbt-spark's session runs. An empty cell is NULL.
"""

from __future__ import annotations

import datetime as dt
import decimal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlflow.errors import Location, SqlflowError
from sqlflow.project.seeds import SeedNode

_CHUNK = 1000


@dataclass(frozen=True)
class SeedResult:
    seed: str
    relation: str
    rows: int
    columns: tuple[tuple[str, str], ...]  # (name, type)
    seconds: float


def seed_types(file: Path, seed: SeedNode) -> tuple[Any, list[tuple[str, str]]]:
    """The agate table of `file` and each column's Spark type (dbt-spark's inference)."""
    from dbt.adapters.spark.impl import SparkAdapter
    from dbt_common.clients.agate_helper import from_csv

    overrides = seed.config.column_types
    try:
        table = from_csv(str(file), text_columns=list(overrides), delimiter=seed.config.delimiter)
    except Exception as exc:  # noqa: BLE001 - agate's errors name the row; say which file
        raise SqlflowError(f"seed `{seed.name}` cannot be read: {exc}", location=Location(seed.path),
                           hint="fix the CSV (one header row, the same number of fields per row)"
                           ) from None
    types = [(name, overrides.get(name) or SparkAdapter.convert_type(table, i))
             for i, name in enumerate(table.column_names)]
    return table, types


def _literal(value: Any) -> str:
    """The SQL literal dbt-spark binds for an agate value (its `_fix_binding`), NULL for None."""
    if value is None:
        return "NULL"
    if isinstance(value, (bool, int, float, decimal.Decimal)):
        return repr(float(value))
    if isinstance(value, dt.datetime):
        return f"'{value.strftime('%Y-%m-%d %H:%M:%S.%f')[:-3]}'"
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


def load_seed(spark: Any, root: Path, seed: SeedNode, relation: str) -> SeedResult:
    """Replace table `relation` with the rows of `seed`."""
    began = time.monotonic()
    table, types = seed_types(root / seed.path, seed)
    quote = bool(seed.config.quote_columns)
    names = [f"`{n}`" if quote else n for n, _ in types]
    schema = relation.rsplit(".", 1)[0] if "." in relation else None
    if schema:
        spark.sql(f"CREATE SCHEMA IF NOT EXISTS {schema}")
    spark.sql(f"DROP TABLE IF EXISTS {relation}")
    using = f" USING {seed.config.file_format}" if seed.config.file_format else ""
    spark.sql(f"CREATE TABLE {relation} ("
              + ", ".join(f"{n} {t}" for n, (_, t) in zip(names, types, strict=True)) + f"){using}")
    ansi = spark.conf.get("spark.sql.ansi.enabled")
    spark.conf.set("spark.sql.ansi.enabled", "false")  # as dbt-spark's session: a bad cast is NULL
    try:
        rows = list(table.rows)
        for start in range(0, len(rows), _CHUNK):
            values = ", ".join(
                "(" + ", ".join(f"cast({_literal(v)} AS {t})" for v, (_, t) in
                                zip(row, types, strict=True)) + ")"
                for row in rows[start:start + _CHUNK])
            spark.sql(f"INSERT INTO {relation} VALUES {values}")
    finally:
        spark.conf.set("spark.sql.ansi.enabled", ansi)
    return SeedResult(seed.name, relation, len(table.rows), tuple(types), time.monotonic() - began)
