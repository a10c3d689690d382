"""Names sqlflow writes into SQL: validated once, quoted one way.

Every database, table, alias, quarantine table and partition column sqlflow writes into a
statement comes from a model's file name or config, which are untrusted input (docs/semantics.md,
"Names"). `check_name` refuses, at compile time, a name Spark and its metastore cannot hold as
a plain identifier; `quote` quotes a name for Spark SQL with embedded backticks doubled, so even
a name that slipped past validation stays one identifier and never becomes DDL. Locations are
never derived from names: databases and tables live where the catalog puts them.
"""

from __future__ import annotations

import re

from sqlglot import exp

from sqlflow.errors import Location, SqlflowError

MAX_LENGTH = 128  # the Hive metastore's limit for database and table names
_NAME = re.compile(r"[A-Za-z0-9_]+")
RULE = f"letters, digits and underscores only, at most {MAX_LENGTH} characters"


def problem(name: object) -> str | None:
    """Why `name` cannot be a database, table or column sqlflow writes; None when it can."""
    if not isinstance(name, str) or not name:
        return "is empty"
    if len(name) > MAX_LENGTH:
        return f"is {len(name)} characters long"
    if not _NAME.fullmatch(name):
        bad = sorted({c for c in name if not re.fullmatch(r"[A-Za-z0-9_]", c)})
        shown = " ".join(repr(c) for c in bad[:5])
        return f"holds {shown}"
    return None


def check_name(name: object, what: str, location: Location | None = None, hint: str = "") -> str:
    """`name` itself when valid; else a SqlflowError at `location` saying the rule."""
    why = problem(name)
    if why is not None:
        raise SqlflowError(f"{what} `{name}` {why}; a name sqlflow writes must use {RULE}",
                           location=location, hint=hint or f"rename the {what}")
    return str(name)


def quote(name: str) -> str:
    """One Spark SQL identifier: `` `a``b` `` for a name holding a backtick."""
    return "`" + name.replace("`", "``") + "`"


def quote_table(table: str) -> str:
    """`db.table` (or `catalog.db.table`) as quoted Spark identifiers (`` `db`.`table` ``): sqlflow
    builds table names from validated parts, which hold no dot; a part a caller quoted already
    is taken as is."""
    parts = table.split(".")
    if all(re.fullmatch(r"`[^`]*`", p) for p in parts):
        parts = [p[1:-1] for p in parts]
    return ".".join(quote(p) for p in parts)


def table_expression(table: str) -> exp.Table:
    """The sqlglot tree of `db.table`, each part a quoted identifier."""
    schema, dot, ident = table.rpartition(".")
    return exp.Table(this=exp.to_identifier(ident, quoted=True),
                     db=exp.to_identifier(schema, quoted=True) if dot else None)
