"""Where a query reads its streams, and whether it is linear in them (for `delta_rule`).

The delta rule is exact for queries that are linear in every stream occurrence: each output
row comes from exactly one row of each occurrence it reads. Inner joins, filters,
projections, derived tables, CTEs and UNION ALL keep that; aggregation, DISTINCT, windows,
LIMIT, other set operations, semi/anti joins filtering by a stream, and outer joins that pad
a stream against a static table do not (a new row would retract an output already emitted).

`prepare` copies the query, inlines every CTE that reads a stream unless it is read exactly
once (a CTE read twice is two occurrences; one never read would make a spurious term), tags
each stream occurrence with its index in SQL text order and checks linearity.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TypeVar

from sqlglot import exp

from sqlflow.errors import SqlflowError

MARK = "sqlflow_stream"  # meta key of a stream occurrence: its index

_T = TypeVar("_T")  # what a `match` finds for a stream table (a binding)

# Query modifiers that are not linear in the rows below them.
_MODIFIERS = {
    "group": "GROUP BY", "having": "HAVING", "qualify": "QUALIFY", "distinct": "DISTINCT",
    "limit": "LIMIT", "offset": "OFFSET", "order": "ORDER BY", "sort": "SORT BY",
    "distribute": "DISTRIBUTE BY", "cluster": "CLUSTER BY", "windows": "WINDOW",
}


class DeltaRuleError(SqlflowError):
    """A query the delta rule cannot rewrite; the message says which construct and why."""


def prepare(query: exp.Expr, match: Callable[[exp.Table], _T | None],
            inline_all: bool = False) -> tuple[exp.Query, list[_T]]:
    """A tagged, checked copy of `query` and what `match` returned for each occurrence."""
    if not isinstance(query, exp.Query):
        raise DeltaRuleError(f"expected a query, got {query.key.upper()}")
    tree = query.copy()

    def stream(table: exp.Table) -> _T | None:
        return None if cte_of(table) is not None else match(table)

    while True:
        refs = cte_refs(tree)
        reading = _stream_ctes(tree, lambda t: stream(t) is not None)
        inline = [c for c in reading if inline_all or len(refs[id(c)]) != 1]
        if not inline:
            break
        cte = inline[0]
        for ref in refs[id(cte)]:
            ref.replace(exp.Subquery(this=cte.this.copy(), alias=alias_of(ref, cte.alias)))
        _drop_cte(cte)

    found: list[_T] = []
    for table in _in_sql_order(tree, exp.Table):
        hit = stream(table)
        if hit is not None:
            table.meta[MARK] = len(found)
            found.append(hit)
    _check(tree)
    return tree, found


def occurrences(node: exp.Expr) -> list[exp.Table]:
    """The tagged stream tables under `node`, by index."""
    return sorted((t for t in node.find_all(exp.Table) if MARK in t.meta),
                  key=lambda t: t.meta[MARK])


def alias_of(table: exp.Expr, default: str | None = None) -> exp.TableAlias:
    """A copy of the name `table`'s columns are qualified with (its alias, else its name)."""
    alias = table.args.get("alias")
    return alias.copy() if alias else exp.TableAlias(this=exp.to_identifier(default or table.name))


def cte_of(table: exp.Table) -> exp.CTE | None:
    """The CTE an unqualified table name refers to, or None for a real table. A CTE body
    sees only the CTEs before it (a recursive WITH is rejected)."""
    if table.args.get("db") or table.args.get("catalog"):
        return None
    child: exp.Expr
    came_from: exp.Expr | None
    name, child, came_from = table.name.lower(), table, None
    for node in parents(table):
        if isinstance(child, exp.CTE):
            came_from = child
        w = node.args.get("with_")
        if isinstance(w, exp.With):
            if w.args.get("recursive"):
                raise DeltaRuleError("a recursive WITH cannot be rewritten by the delta rule")
            ctes = w.expressions
            at = next((i for i, c in enumerate(ctes) if c is came_from), len(ctes))
            visible = ctes[:at]
            for cte in reversed(visible):
                if cte.alias.lower() == name:
                    return cte
        child = node
    return None


def parents(node: exp.Expr) -> Iterator[exp.Expr]:
    while node.parent is not None:
        node = node.parent
        yield node


def cte_refs(tree: exp.Expr) -> dict[int, list[exp.Table]]:
    """The tables referencing each CTE, by id of the CTE."""
    refs: dict[int, list[exp.Table]] = {id(c): [] for c in tree.find_all(exp.CTE)}
    for table in tree.find_all(exp.Table):
        cte = cte_of(table)
        if cte is not None:
            refs[id(cte)].append(table)
    return refs


def lineage(node: exp.Expr) -> Iterator[tuple[exp.Expr, exp.Expr]]:
    """(parent, child) pairs from `node` up to the root; out of a CTE, the walk continues at
    the table that references it (after `prepare`, exactly one)."""
    child = node
    while child.parent is not None:
        parent = child.parent
        if isinstance(parent, exp.CTE):
            refs = cte_refs(parent.root())[id(parent)]
            if not refs:
                return
            child = refs[0]
            continue
        yield parent, child
        child = parent


def sources(select: exp.Select) -> list[exp.Expression]:
    """The FROM table and the joined tables of `select`, in order."""
    joins = [j.this for j in select.args.get("joins") or []]
    return [select.args["from_"].this, *joins] if select.args.get("from_") else joins


def sides_with_streams(join: exp.Join) -> tuple[bool, bool]:
    """Whether the rows before `join` (FROM and earlier joins) and its own table read a
    stream."""
    select = join.parent
    if not isinstance(select, exp.Select):
        return False, reads_stream(join.this)
    at = next(i for i, j in enumerate(select.args["joins"]) if j is join)
    before = sources(select)[: at + 1]
    return any(map(reads_stream, before)), reads_stream(join.this)


def reads_stream(node: exp.Expression) -> bool:
    for table in node.find_all(exp.Table):
        if MARK in table.meta:
            return True
        cte = cte_of(table)
        if cte is not None and reads_stream(cte.this):
            return True
    return False


def _in_sql_order(node: exp.Expr, kind: type) -> Iterator:
    """Pre-order in the order the SQL reads (WITH, FROM, JOIN, WHERE, ...): `arg_types`
    lists a node's arguments in clause order."""
    if isinstance(node, kind):
        yield node
    for key in type(node).arg_types:
        value = node.args.get(key)
        for child in value if isinstance(value, list) else [value]:
            if isinstance(child, exp.Expression):
                yield from _in_sql_order(child, kind)


def _stream_ctes(tree: exp.Expr, is_stream: Callable[[exp.Table], bool]) -> list[exp.CTE]:
    """CTEs that read a stream, directly or through an earlier CTE, in definition order."""
    found: list[exp.CTE] = []
    for cte in _in_sql_order(tree, exp.CTE):
        tables = cte.this.find_all(exp.Table)
        if any(is_stream(t) or any(cte_of(t) is f for f in found) for t in tables):
            found.append(cte)
    return found


def _drop_cte(cte: exp.CTE) -> None:
    w = cte.parent
    assert w is not None  # a CTE sits in its WITH
    cte.pop()
    if not w.expressions:
        w.pop()


def _check(tree: exp.Expr) -> None:
    """Reject every operator above a stream occurrence that is not linear in it."""
    if not occurrences(tree):
        raise DeltaRuleError("the query reads no stream input")
    for table in occurrences(tree):
        for parent, child in lineage(table):
            problem = _problem(parent, child)
            if problem:
                raise DeltaRuleError(
                    f"stream input `{table.alias_or_name}` is read under {problem}: the "
                    "delta rule rewrites only joins, filters, projections and UNION ALL",
                    hint="move it to a downstream model, or use stream_strategy='stateful'")
    if _has_constant(tree):
        raise DeltaRuleError("a UNION ALL branch reads no stream input: in stream mode its "
                             "rows would never be emitted", hint="make it a model of its own")


def _problem(parent: exp.Expr, child: exp.Expr) -> str | None:
    """What keeps `parent` from being linear in the rows of `child`, if anything."""
    modifier = next((v for k, v in _MODIFIERS.items() if parent.args.get(k)), None)
    if isinstance(parent, exp.SetOperation):
        if not isinstance(parent, exp.Union):
            return parent.key.upper()
        return "UNION (distinct)" if parent.args.get("distinct") else modifier
    if isinstance(parent, exp.Subquery):
        return modifier
    if isinstance(parent, exp.From):
        return None
    if isinstance(parent, exp.Join):
        return None if child is parent.this else "a subquery in a join condition"
    if isinstance(parent, exp.Select):
        if not isinstance(child, (exp.From, exp.Join)):
            return "a subquery expression (IN / EXISTS / scalar)"
        if modifier:
            return modifier
        for node in parent.walk(prune=lambda n: isinstance(n, exp.Query) and n is not parent):
            if isinstance(node, exp.Window):
                return "a window function"
            if isinstance(node, exp.AggFunc):
                return f"an aggregate ({node.sql()})"
        return next(filter(None, map(_join_problem, parent.args.get("joins") or [])), None)
    if isinstance(child, exp.Query):  # a query inside a predicate, a projection, ...
        return "a subquery expression (IN / EXISTS / scalar)"
    return parent.key.upper()


def _join_problem(join: exp.Join) -> str | None:
    left, right = sides_with_streams(join)
    kind, side = (join.kind or "").upper(), (join.side or "").upper()
    if kind in ("SEMI", "ANTI") and right:
        return f"a {kind} join filtering by a stream"
    # Padding a stream against a static table: a later stream row would have to retract
    # the padded row already emitted.
    if (side == "LEFT" and right and not left) or (side == "RIGHT" and left and not right):
        return f"a {side} JOIN that keeps static rows unmatched by a stream"
    if side == "FULL" and left != right:
        return "a FULL JOIN of a stream and a static table"
    return None


def _has_constant(node: exp.Expr) -> bool:
    """Whether some of `node`'s rows read no stream (their delta is always empty)."""
    if isinstance(node, exp.Union):
        return _has_constant(node.this) or _has_constant(node.expression)
    if isinstance(node, exp.Subquery):
        return _has_constant(node.this)
    if isinstance(node, exp.Table):
        cte = None if MARK in node.meta else cte_of(node)
        return MARK not in node.meta and (cte is None or _has_constant(cte.this))
    if isinstance(node, exp.Select) and node.args.get("from_"):
        return all(map(_has_constant, sources(node)))
    return True


def binding_matcher(bindings: Mapping[str, _T],
                    name_of: Callable[[_T], str]) -> Callable[[exp.Table], _T | None]:
    """A `match` for `prepare`: a table's alias first, then its name or qualified name."""
    by_name = {name_of(b).lower(): b for b in bindings.values()}

    def match(table: exp.Table) -> _T | None:
        names = (table.alias, table.name, ".".join(p.name for p in table.parts))
        return next((by_name[n.lower()] for n in names if n and n.lower() in by_name), None)

    return match
