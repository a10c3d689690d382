"""Function calls that several routed targets filter on, computed once per row (docs/design.md §2.4).

Each target of a routed group is its own SELECT over the group's one input view, and most of
them filter on the same routing key: `WHERE spmid_department(spmid) = 'live'`. Run as written,
a group of N targets calls that function N times per row; for a Python UDF that is N trips
through a Python worker. `share_calls` finds the calls that the WHERE clauses of two or more
targets make (functions sqlglot has no node for, i.e. project UDFs and Spark functions outside
its catalogue, called on plain columns), names each `__sqlflow_shared_<i>`, and gives each
target that makes one a second SQL whose WHERE reads the column instead. The runtime adds the
columns to the cached input once (`sqlflow.runtime.routed.routing`). The SQL as written stays the
plan's: it is what an analysis error is reported against. A target that selects `*` would
also select the added columns, so a group with one shares nothing.

    >>> s = share_calls(["SELECT a FROM v WHERE f(k) = 'x'", "SELECT a FROM v WHERE f(v.k) = 'y'"])
    >>> s.columns
    (('__sqlflow_shared_0', 'F(k)'),)
    >>> s.sql
    ("SELECT a FROM v WHERE __sqlflow_shared_0 = 'x'", "SELECT a FROM v WHERE __sqlflow_shared_0 = 'y'")
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from sqlglot import exp, parse_one
from sqlglot.errors import SqlglotError

PREFIX = "__sqlflow_shared_"


@dataclass(frozen=True)
class SharedCalls:
    columns: tuple[tuple[str, str], ...] = ()  # (column name, the call as Spark SQL)
    sql: tuple[str | None, ...] = ()  # per target: its SQL reading the columns; None: as written


def share_calls(sqls: Sequence[str]) -> SharedCalls:
    """The calls two or more of `sqls` make in their WHERE, and each SQL rewritten to read them."""
    try:
        trees = [parse_one(sql, dialect="spark") for sql in sqls]
    except SqlglotError:
        return SharedCalls(sql=tuple(None for _ in sqls))
    if any(tree.find(exp.Star) for tree in trees):
        return SharedCalls(sql=tuple(None for _ in sqls))
    calls: dict[str, exp.Expression] = {}
    users: Counter = Counter()
    for tree in trees:
        keys = set()
        for call in _calls(tree):
            key, plain = _key(call)
            calls.setdefault(key, plain)
            keys.add(key)
        users.update(keys)
    names = {key: f"{PREFIX}{i}" for i, key in enumerate(k for k in calls if users[k] >= 2)}
    out: list[str | None] = []
    for tree in trees:
        found = [(c, name) for c in _calls(tree) if (name := names.get(_key(c)[0]))]
        for call, name in found:
            call.replace(exp.column(name))
        out.append(tree.sql(dialect="spark") if found else None)
    return SharedCalls(tuple((name, calls[key].sql(dialect="spark")) for key, name in names.items()),
                       tuple(out))


def _calls(tree: exp.Expr) -> list[exp.Anonymous]:
    """The WHERE clause's calls of functions sqlglot does not know, on plain columns only."""
    where = tree.args.get("where")
    if where is None:
        return []
    return [c for c in where.find_all(exp.Anonymous)
            if c.expressions and all(isinstance(a, exp.Column) for a in c.expressions)]


def _key(call: exp.Anonymous) -> tuple[str, exp.Expression]:
    """The call without table qualifiers (the input view is the only table), and its key:
    Spark resolves function and column names case-insensitively."""
    plain = call.copy()
    for column in plain.find_all(exp.Column):
        column.set("table", None)
    return plain.sql(dialect="spark").lower(), plain
