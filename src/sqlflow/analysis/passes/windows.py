"""Window functions, and the one pattern a stream allows: deduplication by `row_number() = 1`.

    SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY k ORDER BY ts) AS rn FROM s) WHERE rn = 1
    SELECT * FROM s QUALIFY row_number() OVER (PARTITION BY k ORDER BY ts) = 1

(`rn <= 1`, `rn < 2`, `1 = rn` too.) The outer filter must be a top-level conjunct of every
query reading the subquery, else the numbering is visible and needs the whole stream:

    >>> from sqlflow.dialect import parse
    >>> from sqlflow.analysis.ir import InputRel
    >>> from sqlflow.project.eventtime import EventTime
    >>> from sqlflow.analysis.passes.positions import Positions
    >>> from sqlflow.analysis.passes.scopes import ScopeFacts
    >>> ins = {"ods.c": InputRel("ods.c", "ods.c", "source", True, EventTime("ts"))}
    >>> def dedup(sql):
    ...     facts = ScopeFacts(parse(sql), ins)
    ...     pos = Positions(sql, "m.sql")
    ...     return [(w.function, w.dedup) for s in facts.scopes for w in window_functions(facts, facts.info(s), pos)[0]]
    >>> dedup("SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY k ORDER BY ts) rn FROM ods.c) WHERE rn = 1")
    [('row_number', True)]
    >>> dedup("SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY k ORDER BY ts) rn FROM ods.c) WHERE rn = 2")
    [('row_number', False)]
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp
from sqlglot.optimizer.scope import find_all_in_scope

from sqlflow.analysis.ir import DedupIR, WindowFnIR
from sqlflow.analysis.passes.joins import conjuncts
from sqlflow.analysis.passes.positions import Positions
from sqlflow.analysis.passes.scopes import ScopeFacts, ScopeInfo


def _is_first(cond: exp.Expr, matches: Callable[[exp.Expr | None], bool]) -> bool:
    """`x = 1`, `x <= 1`, `x < 2` (either side) where `matches(x)`."""
    for op, lhs, rhs in (
        (type(cond), cond.this, cond.args.get("expression")),
        (_MIRROR.get(type(cond)), cond.args.get("expression"), cond.this),
    ):
        if op is None or not isinstance(rhs, exp.Literal) or not rhs.is_int or not matches(lhs):
            continue
        n = int(rhs.name)
        if (op is exp.EQ and n == 1) or (op is exp.LTE and n == 1) or (op is exp.LT and n == 2):
            return True
    return False


_MIRROR: dict[type[exp.Expr], type[exp.Expr]] = {exp.EQ: exp.EQ, exp.GTE: exp.LTE, exp.GT: exp.LT}


def _row_number(node: exp.Expr) -> bool:
    return isinstance(node, exp.Window) and isinstance(node.this, exp.RowNumber)


def _qualify_dedups(info: ScopeInfo) -> set[int]:
    """ids of row_number windows filtered to 1 by this scope's QUALIFY."""
    select = info.select
    qualify = select.args.get("qualify") if select is not None else None
    if qualify is None:
        return set()
    windows = {a: e for a, e in info.aliases.items() if _row_number(e)}
    out = set()
    for cond in conjuncts(qualify.this):
        for w in [*windows.values(), *cond.find_all(exp.Window)]:
            def is_it(x: exp.Expr | None, w: exp.Expr = w) -> bool:
                return x is w or (isinstance(x, exp.Column) and windows.get(x.name) is w)

            if _row_number(w) and _is_first(cond, is_it):
                out.add(id(w))
    return out


def _subquery_dedup(facts: ScopeFacts, info: ScopeInfo, alias: str) -> bool:
    """Every query reading this scope keeps only `alias = 1` rows (a top-level WHERE conjunct)."""
    readers = facts.parents.get(id(info.scope), [])
    if not readers:
        return False
    for parent, source in readers:
        where = parent.select.args.get("where") if parent.select is not None else None
        conds = conjuncts(where.this) if where is not None else []
        hit = lambda x, parent=parent, source=source: (  # noqa: E731
            isinstance(x, exp.Column) and x.name == alias and facts.resolve(parent, x).alias == source)
        if not any(_is_first(c, hit) for c in conds):
            return False
    return True


def window_functions(
    facts: ScopeFacts, info: ScopeInfo, pos: Positions
) -> tuple[list[WindowFnIR], list[DedupIR]]:
    """Every `... OVER (...)` of one SELECT scope, and the dedups among them."""
    select = info.select
    if select is None:
        return [], []
    in_qualify = _qualify_dedups(info)
    named = {id(e): a for a, e in info.aliases.items() if _row_number(e)}
    fns, dedups = [], []
    for w in find_all_in_scope(select, exp.Window):
        if not isinstance(w, exp.Window) or w.find_ancestor(exp.Window) is not None:
            continue
        if w.arg_key == "windows":  # a named window definition: `WINDOW w AS (...)`
            continue
        form = "qualify" if id(w) in in_qualify else None
        if form is None and id(w) in named and _subquery_dedup(facts, info, named[id(w)]):
            form = "subquery"
        fn = _function_name(w, pos)
        parts = tuple(p.sql(dialect="spark") for p in w.args.get("partition_by") or [])
        ordered = w.args["order"].expressions if w.args.get("order") else []
        order = tuple(o.sql(dialect="spark") for o in ordered)
        loc = pos.of(w)
        fns.append(WindowFnIR(info.label, info.streaming, fn, parts, order, dedup=form is not None,
                              fix=_fix(facts, info, fn, parts, form), location=loc, node=w))
        if form is not None:
            timed = any(facts.classify(info, p).event_time or facts.classify(info, p).bucket
                        for p in w.args.get("partition_by") or [])
            dedups.append(DedupIR(info.label, info.streaming, parts, order, named.get(id(w), fn),
                                  form, timed, loc, node=w))  # type: ignore[arg-type]
    return fns, dedups


def _function_name(w: exp.Window, pos: Positions) -> str:
    fn = w.this
    inner = fn.this if isinstance(fn, (exp.IgnoreNulls, exp.RespectNulls)) else fn
    if "start" in inner.meta:
        return pos.text(inner).lower()
    return (inner.name if isinstance(inner, exp.Anonymous) else inner.sql_name()).lower()


def _fix(facts: ScopeFacts, info: ScopeInfo, fn: str, parts: tuple[str, ...], form: str | None) -> str:
    if form is not None:
        return ""
    ts = facts.time_column(info) or "<event time>"
    key = ", ".join(parts) or "<key>"
    if fn == "row_number":
        return ("keep only the first row per key: filter `WHERE rn = 1` on this row_number in the "
                f"outer query (or `QUALIFY row_number() OVER (PARTITION BY {key} ORDER BY {ts}) = 1`)")
    return (f"use an aggregation grouped by `window({ts}, '1 hour')` instead, or keep one row per key "
            f"with `row_number() OVER (PARTITION BY {key} ORDER BY {ts}) = 1`")
