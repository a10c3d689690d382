"""Clauses that need the whole input at once: ORDER BY, LIMIT, UNION (distinct), INTERSECT,
EXCEPT, and a subquery expression (`IN (SELECT ...)`, `EXISTS`, scalar) over a stream.

    >>> from sqlflow.dialect import parse
    >>> from sqlflow.analysis.ir import InputRel
    >>> from sqlflow.project.eventtime import EventTime
    >>> from sqlflow.analysis.passes.positions import Positions
    >>> from sqlflow.analysis.passes.scopes import ScopeFacts
    >>> ins = {"ods.c": InputRel("ods.c", "ods.c", "source", True, EventTime("ts"))}
    >>> sql = "SELECT * FROM ods.c ORDER BY ts LIMIT 10"
    >>> facts = ScopeFacts(parse(sql), ins)
    >>> [(c.clause, str(c.location)) for c in clauses(facts, facts.root_info, Positions(sql, "m.sql"))]
    [('order_by', 'm.sql:1:21'), ('limit', 'm.sql:1:33')]
"""

from __future__ import annotations

from sqlglot import exp

from sqlflow.analysis.ir import ClauseIR
from sqlflow.analysis.passes.positions import Positions
from sqlflow.analysis.passes.scopes import ScopeFacts, ScopeInfo

_SET_OPS = {exp.Intersect: ("intersect", "INTERSECT"), exp.Except: ("except", "EXCEPT")}


def clauses(facts: ScopeFacts, info: ScopeInfo, pos: Positions) -> list[ClauseIR]:
    """The whole-input clauses of one scope (whether it is over a stream is in `streaming`)."""
    node = info.scope.expression
    ts = facts.time_column(info) or "<event time>"
    out = []
    order = node.args.get("order")
    if order is not None:
        loc = pos.keyword(pos.start(order), "ORDER_BY") or pos.of(order)
        out.append(ClauseIR("order_by", info.label, info.streaming,
                            "remove the ORDER BY (sort the rows when you read the table)", loc))
    limit = node.args.get("limit")
    if limit is not None:
        loc = pos.keyword(pos.start(limit), "LIMIT") or pos.of(limit)
        out.append(ClauseIR("limit", info.label, info.streaming,
                            "remove the LIMIT; to keep one row per key use "
                            f"`row_number() OVER (PARTITION BY <key> ORDER BY {ts}) = 1`", loc))
    if isinstance(node, exp.SetOperation):
        out.extend(_set_operation(node, info, pos))
    if info.scope.is_subquery and info.streaming:
        out.append(ClauseIR("subquery", info.label, True,
                            "rewrite the subquery over a stream as an interval join "
                            "(a key and a time range), or read a dimension in it", pos.of(node)))
    return out


def _set_operation(node: exp.SetOperation, info: ScopeInfo, pos: Positions) -> list[ClauseIR]:
    start = pos.start(node.expression)
    if isinstance(node, exp.Union):
        if not node.args.get("distinct"):
            return []
        loc = pos.keyword(start, "UNION") or pos.of(node)
        return [ClauseIR("union_distinct", info.label, info.streaming,
                         "use UNION ALL (and keep one row per key with the row_number dedup "
                         "pattern if you need distinct rows)", loc)]
    clause, token = _SET_OPS.get(type(node), ("except", "EXCEPT"))
    loc = pos.keyword(start, token) or pos.of(node)
    return [ClauseIR(clause, info.label, info.streaming,  # type: ignore[arg-type]
                     "rewrite it as an interval join (a key and a time range) or a "
                     "left anti join with a time range", loc)]
