"""Join classification: interval, stream-static, static-static, or invalid (with why and a fix).

A join of two streams is an interval join when its condition (the ON clause; for inner and
cross joins also the WHERE clause, which Spark evaluates the same way) has an equality key
between the right side and one left stream AND bounds the difference of their event times on
both sides. Whoever wrote it, a macro or a person, the same condition classifies the same:

    >>> from sqlflow.dialect import parse
    >>> from sqlflow.analysis.ir import InputRel
    >>> from sqlflow.project.eventtime import EventTime
    >>> from sqlflow.analysis.passes.positions import Positions
    >>> from sqlflow.analysis.passes.scopes import ScopeFacts
    >>> ins = {"ods.imp": InputRel("ods.imp", "ods.imp", "source", True, EventTime("imp_ts")),
    ...        "ods.clk": InputRel("ods.clk", "ods.clk", "source", True, EventTime("click_ts"))}
    >>> def kind(on):
    ...     sql = f"SELECT * FROM ods.imp i JOIN ods.clk c ON {on}"
    ...     facts = ScopeFacts(parse(sql), ins)
    ...     j = classify_joins(facts, facts.root_info, Positions(sql, "m.sql"))[0]
    ...     return j.kind, j.keys, j.interval and (j.interval.lower_us, j.interval.upper_us)
    >>> kind("i.ad = c.ad AND c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 20 MINUTES")
    ('interval', (('ad', 'ad'),), (0, 1200000000))
    >>> kind("c.ad = i.ad AND i.imp_ts >= c.click_ts - INTERVAL '20' MINUTE AND i.imp_ts <= c.click_ts")
    ('interval', (('ad', 'ad'),), (0, 1200000000))
    >>> kind("i.ad = c.ad")[0]
    'invalid'
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, cast

from sqlglot import exp

from sqlflow.analysis.ir import IntervalBound, JoinIR, shifted_sql
from sqlflow.analysis.passes.positions import Positions
from sqlflow.analysis.passes.scopes import ScopeFacts, ScopeInfo
from sqlflow.analysis.passes.timecols import (
    DeltaBound,
    IntervalError,
    TimeCmp,
    combine,
    orient,
    time_comparisons,
)
from sqlflow.errors import Location

_EXAMPLE_RANGE = "INTERVAL 20 MINUTES"
_EXAMPLE_US = 20 * 60_000_000


def join_type(join: exp.Join) -> str:
    """`inner`, `left`, `right`, `full`, `cross`, `left_semi`, `left_anti`, `natural_...`."""
    side, kind = (join.side or "").lower(), (join.kind or "").lower()
    if kind in ("semi", "anti"):
        return f"left_{kind}"
    if kind == "cross" or (not side and not join.args.get("on") and not join.args.get("using")):
        base = "cross"
    else:
        base = side or "inner"
    return f"natural_{base}" if (join.method or "").upper() == "NATURAL" else base


def conjuncts(node: exp.Expr | None) -> list[exp.Expr]:
    if node is None:
        return []
    while isinstance(node, exp.Paren):
        node = node.this
    assert node is not None  # a parenthesis always holds an expression
    if isinstance(node, exp.And):
        return conjuncts(node.this) + conjuncts(node.expression)
    return [node]


def source_alias(node: exp.Expr) -> str:
    return node.alias_or_name if isinstance(node, exp.Table) else node.alias


def classify_joins(facts: ScopeFacts, info: ScopeInfo, pos: Positions) -> list[JoinIR]:
    """Every JOIN of one SELECT scope, in order, classified."""
    select = info.select
    if select is None or not select.args.get("joins") or not select.args.get("from_"):
        return []
    left = [source_alias(select.args["from_"].this)]
    where = conjuncts(select.args["where"].this) if select.args.get("where") else []
    out = []
    for index, join in enumerate(select.args["joins"]):
        right = source_alias(join.this)
        out.append(_JoinAnalysis(facts, info, pos, join, index, list(left), right, where).run())
        left.append(right)
    return out


class _JoinAnalysis:
    """One JOIN of a SELECT: `left` are the aliases before it, `right` the one it joins."""

    def __init__(self, facts: ScopeFacts, info: ScopeInfo, pos: Positions, join: exp.Join,
                 index: int, left: list[str], right: str, where: list[exp.Expr]) -> None:
        self.facts, self.info, self.pos, self.join = facts, info, pos, join
        self.index, self.left, self.right = index, [a for a in left if a in info.sources], right
        self.type = join_type(join)
        on = conjuncts(join.args.get("on"))
        self.conds = on + (where if self.type in ("inner", "cross") else [])
        self.problems: list[str] = []

    def stream(self, alias: str) -> bool:
        rel = self.info.sources.get(alias)
        return bool(rel and rel.streaming)

    def resolve(self, column: exp.Column) -> tuple[str, str] | None:
        found = self.facts.resolve(self.info, column)
        if found.problem and found.problem not in self.problems:
            self.problems.append(found.problem)
        return (found.alias, found.name) if found.alias else None

    def sides(self, node: exp.Expr) -> set[str | None]:
        return {self.facts.resolve(self.info, c).alias for c in node.find_all(exp.Column)}

    def keys(self) -> dict[str, list[tuple[str, str]]]:
        """Equality keys between the right side and each left alias."""
        found: dict[str, list[tuple[str, str]]] = {}
        for cond in self.conds:
            if not isinstance(cond, exp.EQ):
                continue
            x, y = cond.this, cond.expression
            for lhs, rhs in ((x, y), (y, x)):
                lset = self.sides(lhs)
                if self.sides(rhs) == {self.right} and len(lset) == 1 and next(iter(lset)) in self.left:
                    found.setdefault(cast(str, next(iter(lset))), []).append((_key(lhs), _key(rhs)))
        for name in self.join.args.get("using") or []:
            for alias in self.left[:1]:
                found.setdefault(alias, []).append((name.name, name.name))
        return found

    def comparisons(self) -> list[TimeCmp]:
        out = []
        for cond in self.conds:
            try:
                out.extend(time_comparisons(cond, self.resolve))
            except IntervalError as err:
                self.problems.append(str(err))
        return out

    def run(self) -> JoinIR:
        r_stream = self.stream(self.right)
        l_streams = [a for a in self.left if self.stream(a)]
        keys = self.keys()
        partner = next((a for a in self.left if a in keys), self.left[-1] if self.left else "")
        base: dict[str, Any] = dict(
            scope=self.info.label, index=self.index, join_type=self.type,
            right_alias=self.right, location=self._location(), node=self.join,
        )
        if not r_stream and not l_streams:
            return JoinIR(kind="static_static", left_alias=partner, left_streaming=False,
                          right_streaming=False, keys=tuple(keys.get(partner, ())), **base)
        if not (r_stream and l_streams):
            return self._stream_static(partner, r_stream, keys, base)
        return self._two_streams(l_streams, keys, base)

    def _stream_static(self, partner: str, r_stream: bool, keys: dict[str, list[tuple[str, str]]],
                       base: dict[str, Any]) -> JoinIR:
        ir = JoinIR(kind="stream_static", left_alias=partner, left_streaming=not r_stream,
                    right_streaming=r_stream, keys=tuple(keys.get(partner, ())), **base)
        static_preserved = (r_stream and self.type in ("left", "full", "left_semi", "left_anti")) or (
            not r_stream and self.type in ("right", "full"))
        if not static_preserved:
            return ir
        static = partner if r_stream else self.right
        stream = self.right if r_stream else partner
        return replace(
            ir, kind="invalid",
            reason=(f"{self.type.replace('_', ' ')} join keeps rows of the static side `{static}` "
                    f"that depend on the whole stream `{stream}`; each micro-batch would emit them again"),
            fix=(f"make the stream the preserved side (`{stream} LEFT JOIN {static}`), "
                 "or use an inner join"),
        )

    def _two_streams(self, l_streams: list[str], keys: dict[str, list[tuple[str, str]]],
                     base: dict[str, Any]) -> JoinIR:
        cmps = self.comparisons()
        r_time = self.info.sources[self.right].event_time
        ranked = sorted(l_streams, key=lambda a: (a not in keys, not self._bounds(cmps, a)))
        for alias in ranked:
            bound = self._interval(cmps, alias, r_time)
            if alias in keys and bound is not None and bound.bounded:
                notes = ["NULL keys never match"]
                if self.type in ("left", "right", "full", "left_anti"):
                    notes.append("unmatched rows are emitted padded once their interval is closed")
                if bound.empty:
                    notes.append("the time range is empty: this join never matches")
                return JoinIR(kind="interval", left_alias=alias, left_streaming=True, right_streaming=True,
                              keys=tuple(keys[alias]), interval=bound, notes=tuple(notes), **base)
        alias = ranked[0]
        reason, fix = self._why_not(alias, keys, cmps, r_time)
        return JoinIR(kind="invalid", left_alias=alias, left_streaming=True, right_streaming=True,
                      keys=tuple(keys.get(alias, ())), interval=self._interval(cmps, alias, r_time),
                      reason=reason, fix=fix, **base)

    def _bounds(self, cmps: list[TimeCmp], alias: str) -> list[DeltaBound]:
        return [b for b in (orient(c, alias, self.right) for c in cmps) if b is not None]

    def _interval(self, cmps: list[TimeCmp], alias: str, r_time: str | None) -> IntervalBound | None:
        l_time = self.info.sources[alias].event_time
        bounds = self._bounds(cmps, alias)
        if not (l_time and r_time and bounds):
            return None
        bound = combine(bounds, l_time, r_time)
        return bound if (bound.lower_us is not None or bound.upper_us is not None) else None

    def _why_not(self, alias: str, keys: dict[str, list[tuple[str, str]]], cmps: list[TimeCmp],
                 r_time: str | None) -> tuple[str, str]:
        r, l_time = self.right, self.info.sources[alias].event_time
        head = f"join of two streams `{alias}` and `{r}`"
        example = (f"`AND {r}.{r_time} BETWEEN {alias}.{l_time} AND {alias}.{l_time} + {_EXAMPLE_RANGE}`"
                   if r_time and l_time else "")
        if not (r_time and l_time):
            missing = r if not r_time else alias
            return (f"{head} cannot be bounded: `{missing}` has no event-time column",
                    f"declare `event_time` for `{missing}` (in its yml), or make `{missing}` a dimension")
        extra = f" ({'; '.join(self.problems)})" if self.problems else ""
        if self.type == "cross" and not self.conds:
            return f"{head} is a cross join: every pair of rows is kept forever{extra}", (
                f"join on a key and a time range: `ON {r}.<key> = {alias}.<key> "
                f"AND {r}.{r_time} BETWEEN {alias}.{l_time} AND {alias}.{l_time} + {_EXAMPLE_RANGE}`")
        bound = self._interval(cmps, alias, r_time)
        if alias not in keys:
            return (f"{head} has no equality key between them (unbounded state){extra}",
                    f"add an equality on a shared key, e.g. `AND {r}.<key> = {alias}.<key>`"
                    + ("" if bound and bound.bounded else f", and a time range {example}"))
        if bound is None:
            other = self._other_time_columns(cmps, alias)
            if other:
                return (f"{head} bounds {other}, not the event-time columns `{alias}.{l_time}` "
                        f"and `{r}.{r_time}` (unbounded state){extra}",
                        f"bound the event times instead: {example}")
            return (f"{head} has no time bound (unbounded state){extra}",
                    f"add {example} or make `{r}` a dimension")
        return self._partial(alias, bound, cmps, head, extra)

    def _partial(self, alias: str, bound: IntervalBound, cmps: list[TimeCmp], head: str,
                 extra: str) -> tuple[str, str]:
        """Why and how to fix a range bounded on one side only, quoting what the user wrote."""
        r, l_time, r_time = self.right, bound.left_time, bound.right_time
        written = " AND ".join(dict.fromkeys(
            c.node.sql(dialect="spark") for c in cmps
            if (b := orient(c, alias, r)) is not None
            and (b.left_time.lower(), b.right_time.lower()) == (l_time.lower(), r_time.lower())))
        if bound.upper_us is None:
            assert bound.lower_us is not None
            hint = f"{r}.{r_time} <= {shifted_sql(f'{alias}.{l_time}', bound.lower_us + _EXAMPLE_US)}"
            return (f"{head} has only a lower time bound (`{written}`), so its state is "
                    f"unbounded{extra}", f"add an upper bound, e.g. `AND {hint}`")
        lower = 0 if bound.upper_us > 0 else bound.upper_us - _EXAMPLE_US
        hint = f"{r}.{r_time} >= {shifted_sql(f'{alias}.{l_time}', lower)}"
        return (f"{head} has only an upper time bound (`{written}`), so its state is "
                f"unbounded{extra}", f"add a lower bound, e.g. `AND {hint}`")

    def _other_time_columns(self, cmps: list[TimeCmp], alias: str) -> str:
        found = sorted({f"`{alias}.{b.left_time}`/`{self.right}.{b.right_time}`"
                        for b in self._bounds(cmps, alias) if b.op != "="})
        return ", ".join(found)

    def _location(self) -> Location:
        start = self.pos.start(self.join.this)
        if start is None:
            return self.pos.of(self.join)
        return self.pos.join_keyword(start, parenthesized=isinstance(self.join.this, exp.Subquery))


def _key(node: exp.Expr) -> str:
    return node.name if isinstance(node, exp.Column) else node.sql(dialect="spark")

