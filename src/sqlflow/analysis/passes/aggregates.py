"""Aggregations (GROUP BY, global aggregates, SELECT DISTINCT) and what bounds their state.

Over a stream, a group can only be finished (and its state dropped) when one of its keys is
an event-time window or an event-time partition; otherwise every group stays open forever:

    >>> from sqlflow.dialect import parse
    >>> from sqlflow.analysis.ir import InputRel
    >>> from sqlflow.project.eventtime import EventTime
    >>> from sqlflow.analysis.passes.positions import Positions
    >>> from sqlflow.analysis.passes.scopes import ScopeFacts
    >>> ins = {"ods.clk": InputRel("ods.clk", "ods.clk", "source", True, EventTime("click_ts"))}
    >>> def agg(sql):
    ...     facts = ScopeFacts(parse(sql), ins)
    ...     a = aggregations(facts, facts.root_info, Positions(sql, "m.sql"))[0]
    ...     return a.kind, a.time_key
    >>> agg("SELECT ad, count(*) FROM ods.clk GROUP BY ad, window(click_ts, '1 hour')")
    ('window', "WINDOW(click_ts, '1 hour')")
    >>> agg("SELECT to_date(click_ts) AS dt, count(*) FROM ods.clk GROUP BY 1")
    ('time_partition', 'TO_DATE(click_ts)')
    >>> agg("SELECT ad, count(*) FROM ods.clk GROUP BY ad")
    ('unbounded', None)
"""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp
from sqlglot.optimizer.scope import walk_in_scope

from sqlflow.analysis.ir import AggIR, WindowSpecIR
from sqlflow.analysis.passes.positions import Positions
from sqlflow.analysis.passes.scopes import ColInfo, ScopeFacts, ScopeInfo
from sqlflow.errors import Location

_KIND_ORDER = ("window", "session_window", "time_partition", "event_time")


def has_aggregate(select: exp.Select) -> bool:
    """An aggregate function outside any OVER (...) in the select list or HAVING."""
    roots = list(select.expressions) + ([select.args["having"]] if select.args.get("having") else [])
    for root in roots:
        for node in walk_in_scope(root, prune=lambda n: isinstance(n, exp.Window)):
            if isinstance(node, exp.AggFunc) and not isinstance(node.parent, exp.Window):
                return True
    return False


def _group_keys(select: exp.Select) -> list[exp.Expr]:
    """The keys in every grouping set (ordinals and select aliases resolved). ROLLUP, CUBE and
    GROUPING SETS keys are left out: some of their sets (the grand total) do not have them."""
    group = select.args.get("group")
    if group is None:
        return []
    if group.args.get("all"):
        return [e for e in select.expressions if not e.find(exp.AggFunc)]
    aliases = {e.alias: e.this for e in select.expressions if isinstance(e, exp.Alias)}
    keys = []
    for key in group.expressions:
        if isinstance(key, (exp.Rollup, exp.Cube, exp.GroupingSets)):
            continue
        if isinstance(key, exp.Literal) and key.is_int and 0 < int(key.name) <= len(select.expressions):
            key = select.expressions[int(key.name) - 1]
        elif isinstance(key, exp.Column) and not key.table and key.name in aliases:
            key = aliases[key.name]
        keys.append(key.this if isinstance(key, exp.Alias) else key)
    return keys


def aggregations(facts: ScopeFacts, info: ScopeInfo, pos: Positions) -> list[AggIR]:
    """The aggregation of one SELECT scope (at most one), classified."""
    select = info.select
    if select is None:
        return []
    distinct = bool(select.args.get("distinct"))
    group = select.args.get("group")
    if not (group or distinct or has_aggregate(select)):
        return []
    keys = _group_keys(select)
    if distinct and not group:
        keys = [e.this if isinstance(e, exp.Alias) else e for e in select.expressions]
    kind, time_key, window = "unbounded", None, None
    problems: list[str] = []
    for key in keys:
        col = facts.classify(info, key)
        for column in key.find_all(exp.Column):
            found = facts.resolve(info, column)
            if found.problem and found.problem not in problems:
                problems.append(found.problem)
        found_kind = _kind(col)
        if found_kind and (kind == "unbounded" or _KIND_ORDER.index(found_kind) < _KIND_ORDER.index(kind)):
            kind, time_key = found_kind, key.sql(dialect="spark")
            window = _window_spec(key) if found_kind in ("window", "session_window") else None
    shown = group.expressions if group is not None and not group.args.get("all") else keys
    agg = AggIR(
        scope=info.label,
        streaming=info.streaming,
        group_keys=tuple(k.sql(dialect="spark") for k in shown) + _suffix_sets(group),
        kind=kind,  # type: ignore[arg-type]
        time_key=time_key,
        window=window,
        distinct=distinct and not group,
        location=_location(select, pos, distinct and not group),
        node=select,
    )
    if kind == "unbounded" and info.streaming:
        reason, fix = _why(facts, info, agg, problems)
        agg = replace(agg, reason=reason, fix=fix)
    return [agg]


def _suffix_sets(group: exp.Group | None) -> tuple[str, ...]:
    """`WITH ROLLUP` / `WITH CUBE` / suffix GROUPING SETS, kept apart from the keys by sqlglot."""
    if group is None:
        return ()
    return tuple(e.sql(dialect="spark") for key in ("rollup", "cube", "grouping_sets")
                 for e in group.args.get(key) or [])


def _kind(col: ColInfo) -> str | None:
    if col.bucket in ("window", "session_window"):
        return col.bucket
    if col.bucket == "date":
        return "time_partition"
    return "event_time" if col.event_time else None


def _window_spec(key: exp.Expr) -> WindowSpecIR | None:
    while isinstance(key, (exp.Alias, exp.Paren)):
        key = key.this
    if not isinstance(key, exp.Anonymous) or len(key.expressions) < 2:
        return None
    args = key.expressions
    text = lambda e: e.name if isinstance(e, exp.Literal) else e.sql(dialect="spark")  # noqa: E731
    slide = text(args[2]) if len(args) > 2 else None
    return WindowSpecIR(key.name.lower(), args[0].sql(dialect="spark"), text(args[1]), slide)


def _location(select: exp.Select, pos: Positions, distinct: bool) -> Location:
    group = select.args.get("group")
    if group is not None:
        return pos.keyword(pos.start(group), "GROUP_BY") or pos.of(group)
    if distinct:
        return pos.keyword(pos.start(select.expressions[0]), "DISTINCT") or pos.of(select)
    agg = next((n for e in select.expressions for n in e.find_all(exp.AggFunc)), None)
    return pos.of(agg or select)


def _why(facts: ScopeFacts, info: ScopeInfo, agg: AggIR, problems: list[str]) -> tuple[str, str]:
    ts = facts.time_column(info)
    where = "" if info.label == "the model query" else f" in {info.label}"
    extra = f" ({'; '.join(problems)})" if problems else ""
    if ts is None:
        stream = next((a for a, r in info.sources.items() if r.streaming), "the stream")
        return (f"aggregation{where} over a stream without an event-time column cannot be bounded{extra}",
                f"declare `event_time` for `{stream}` and group by `window(<event time>, '1 hour')`")
    if agg.distinct:
        return (f"SELECT DISTINCT{where} over a stream keeps every distinct row forever{extra}",
                f"add `to_date({ts})` (or the event time `{ts}`) to the selected columns, or keep one "
                f"row per key with `row_number() OVER (PARTITION BY <key> ORDER BY {ts}) = 1`")
    if not agg.group_keys:
        return (f"aggregation{where} over a stream has no GROUP BY: a running total over all time{extra}",
                f"add `GROUP BY window({ts}, '1 hour')`")
    keys = ", ".join(agg.group_keys)
    return (f"aggregation{where} over a stream is grouped by `{keys}`, which is not an event-time "
            f"window or event-time partition column (unbounded state){extra}",
            f"add `window({ts}, '1 hour')` to the GROUP BY, or group by the event date `to_date({ts})`")
