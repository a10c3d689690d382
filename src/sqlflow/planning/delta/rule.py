"""The delta rule: a model's batch query rewritten to emit only what one micro-batch adds.

docs/design.md §2.9, the `incremental` stream strategy. Each stream input X is split into the rows of
earlier micro-batches (`old`) and the micro-batch's new rows (`delta`), `full = old UNION ALL
delta`. A query Q linear in its stream occurrences x_1..x_n (see `delta_linear`) satisfies
Q(full) = Q(old) + the telescoping sum

    sum over i of  Q(old_1, .., old_{i-1}, delta_i, full_{i+1}, .., full_n)

(for L JOIN R: delta_L JOIN full_R  UNION ALL  old_L JOIN delta_R). Each new result row comes
from exactly one term, once, so the union over all micro-batches is Q over all the input, for
any arrival order and any split: the backfill, by construction. The rewrite copies the whole
query per term and swaps only the stream table references; projections, filters, CTEs and
static tables stay as written. A term keeps only the UNION ALL branches that hold its delta.

Outer joins of two streams: `delta_rewrite` emits their matched part (as inner joins) and
`padding_query` the preserved side's rows that match nothing, padded with NULLs. Which rows
to pad, and when, is the runtime's decision (a later issue): a row may be padded once its
interval is closed, i.e. no row of the other side that could match it can still arrive
(every later row that old is quarantined as late, docs/design.md §2.1), and only once.
`pruning_ranges` gives the event-time range of old rows a delta can match, so the runtime
reads only those.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from functools import reduce
from typing import NamedTuple, cast

from sqlglot import exp

from sqlflow.planning.delta.linear import (
    MARK,
    DeltaRuleError,
    alias_of,
    binding_matcher,
    cte_of,
    cte_refs,
    lineage,
    occurrences,
    parents,
    prepare,
    reads_stream,
    sides_with_streams,
    sources,
)

__all__ = [
    "DeltaBinding", "DeltaRuleError", "Interval", "MatchRange", "Pruning", "delta_rewrite",
    "padding_queries", "padding_query", "pruning_ranges",
]


@dataclass(frozen=True)
class DeltaBinding:
    """Where a stream input's rows are in one micro-batch.

    `alias_or_table` is how the query names the input: matched against a table's alias
    first, then its name (`clicks` or `dw.clicks`; a self-join matches every occurrence).
    `delta_view` holds the micro-batch's new rows, `old_view` the rows of earlier batches
    (pruned by the runtime to what the new rows can match, see `pruning_ranges`).
    """

    alias_or_table: str
    delta_view: str
    old_view: str


def delta_rewrite(query: exp.Expr, streams: Mapping[str, DeltaBinding]) -> exp.Query:
    """The query a micro-batch runs: the rows `query` gains from the new rows of `streams`.

    `streams` maps an input's name (the planner's relation; used in messages) to its
    binding. One stream occurrence is just bound to its delta view; n occurrences give the
    UNION ALL of n terms under one WITH. Stream-stream outer joins become inner joins (their
    padded rows are `padding_query`'s). Raises `DeltaRuleError` for a non-linear query.

    >>> import sqlglot
    >>> q = sqlglot.parse_one("SELECT l.k, r.v FROM l JOIN r ON l.k = r.k AND r.t > l.t")
    >>> b = {n: DeltaBinding(n, f"{n}_delta", f"{n}_old") for n in "lr"}
    >>> print(delta_rewrite(q, b).sql(pretty=True))
    SELECT
      l.k,
      r.v
    FROM l_delta AS l
    JOIN (
      SELECT
        *
      FROM r_old
      UNION ALL
      SELECT
        *
      FROM r_delta
    ) AS r
      ON l.k = r.k AND r.t > l.t
    UNION ALL
    SELECT
      l.k,
      r.v
    FROM l_old AS l
    JOIN r_delta AS r
      ON l.k = r.k AND r.t > l.t
    """
    tree, bindings = _prepare(query, streams, inline_all=False)
    for join in list(tree.find_all(exp.Join)):
        if join.side and sides_with_streams(join) == (True, True):
            # the matched part of an outer join of two streams: an inner join
            join.set("side", None)
            if (join.kind or "").upper() == "OUTER":
                join.set("kind", None)
    terms = [_term(tree, bindings, i) for i in range(len(bindings))]
    return _union_terms(tree, terms)


def padding_query(
    query: exp.Expr, streams: Mapping[str, DeltaBinding], outer: str, pending_view: str,
    *, occurrence: int | None = None,
) -> exp.Query:
    """The rows of the preserved side `outer` that match nothing, padded with NULLs.

    The query must join exactly two stream occurrences with an outer join preserving `outer`
    (a key of `streams` or a binding's `alias_or_table`); other tables are static. `outer` is
    read from `pending_view`, the rows the runtime has closed; one is emitted iff no row of
    the other side's full table (old UNION ALL delta) satisfies the ON clause. Filters,
    projections and static joins apply as written, so a padded row is the batch query's.
    A self join (both occurrences read one input) names the preserved one by `occurrence`,
    its index among the stream tables in the order the query reads them.
    """
    tree, bindings = _prepare(query, streams, inline_all=True)
    if len(bindings) != 2:
        raise DeltaRuleError(f"padding needs exactly two stream inputs, found {len(bindings)}")
    named = {k.lower(): b for k, b in streams.items()}
    named.update({b.alias_or_table.lower(): b for b in streams.values()})
    padded = named.get(outer.lower())
    if bindings[0] is bindings[1] and padded is bindings[0] and occurrence in (0, 1):
        o = occurrence
    elif padded not in bindings or bindings[0] is bindings[1]:
        raise DeltaRuleError(f"`{outer}` is not exactly one of the query's two stream inputs")
    else:
        o = bindings.index(padded)
    outer_t, inner_t = occurrences(tree)[o], occurrences(tree)[1 - o]
    select, srcs, a, b = _joined_in(outer_t, inner_t)
    join = select.args["joins"][max(a, b) - 1]
    if join.side not in (("LEFT", "FULL") if a < b else ("RIGHT", "FULL")):
        raise DeltaRuleError(f"no outer join keeps `{outer}` rows that match nothing")
    if a > b and (a, b) != (1, 0):
        raise DeltaRuleError("a RIGHT or FULL JOIN padding its right side must be the first "
                             "join", hint="write it as a LEFT JOIN")
    on = join.args.get("on")
    if on is None or any(not c.table for c in on.find_all(exp.Column)):
        raise DeltaRuleError("padding needs an ON clause whose columns are all qualified",
                             hint="write `ON l.k = r.k ...`, not USING or bare column names")
    inner_b, inner_src = bindings[1 - o], srcs[b]
    full_src = _rebind(inner_src, inner_t, _full(inner_b))
    old_src = _rebind(inner_src, inner_t, exp.to_table(inner_b.old_view))
    # The inner side's columns without rows: every reference to it reads NULL, as in the
    # batch query's padded row.
    empty = exp.select("*").from_(old_src).where(exp.false())
    inner_src.replace(empty.subquery(alias_of(inner_src, inner_t.name).this))
    _swap(outer_t, exp.to_table(pending_view))
    # Correlated with the preserved row; inside it the inner alias is the full table.
    unmatched = exp.Exists(this=exp.select("1").from_(full_src).where(on.copy()))
    select.where(exp.Not(this=unmatched), copy=False)
    return tree


def padding_queries(
    query: exp.Expr, streams: Mapping[str, DeltaBinding],
    pending_views: Mapping[str, str] | None = None,
) -> dict[str, exp.Query]:
    """`padding_query` for every side an outer join of two streams preserves, keyed by the
    side's key in `streams`; it reads `pending_views[key]` (default `<delta_view>_pending`)."""
    tree, bindings = _prepare(query, streams, inline_all=True)
    key_of = {id(b): k for k, b in streams.items()}
    out: dict[str, exp.Query] = {}
    for join in tree.find_all(exp.Join):
        if not join.side or sides_with_streams(join) != (True, True):
            continue
        select = cast(exp.Select, join.parent)  # (True, True): a join of a SELECT
        at = next(i for i, j in enumerate(select.args["joins"]) if j is join)
        before = [t for s in sources(select)[: at + 1] for t in occurrences(s)]
        kept = {"LEFT": before, "RIGHT": occurrences(join.this),
                "FULL": before + occurrences(join.this)}[join.side.upper()]
        for table in kept:
            key = key_of[id(bindings[table.meta[MARK]])]
            if key in out:  # a FULL self join pads both occurrences of one input
                raise DeltaRuleError(f"a FULL JOIN of `{key}` with itself cannot be padded",
                                     hint="write it as a LEFT JOIN")
            view = (pending_views or {}).get(key, f"{streams[key].delta_view}_pending")
            out[key] = padding_query(query, streams, key, view, occurrence=table.meta[MARK])
    return out


class Interval(NamedTuple):
    """An interval join `r.right_time BETWEEN l.left_time + lower_us AND l.left_time +
    upper_us` (µs, inclusive); the times are the columns of each side's input."""

    left_time: str
    right_time: str
    lower_us: int
    upper_us: int


@dataclass(frozen=True)
class MatchRange:
    """The old rows of one side that a delta of the other side can match: those with
    `column BETWEEN min(delta.by) + lower_us AND max(delta.by) + upper_us`."""

    column: str
    by: str
    lower_us: int
    upper_us: int

    def bounds(self, delta_min: int | dt.datetime | None,
               delta_max: int | dt.datetime | None) -> tuple[int | dt.datetime, int | dt.datetime] | None:
        """The inclusive range for a delta whose `by` spans [delta_min, delta_max] (int µs
        or datetimes), or None for an empty delta: no old row is needed."""
        if delta_min is None or delta_max is None:
            return None
        return _add_us(delta_min, self.lower_us), _add_us(delta_max, self.upper_us)

    def predicate(self, delta_min: int | dt.datetime | None,
                  delta_max: int | dt.datetime | None) -> exp.Expression:
        """The filter to read the old side with: `column BETWEEN lo AND hi`, or FALSE."""
        span = self.bounds(delta_min, delta_max)
        if span is None:
            return exp.false()
        return exp.column(self.column).between(_literal(span[0]), _literal(span[1]))


class Pruning(NamedTuple):
    old_left: MatchRange  # the left side's old rows, given the right side's delta
    old_right: MatchRange  # the right side's old rows, given the left side's delta


def pruning_ranges(interval: Interval | tuple[str, str, int, int]) -> Pruning:
    """The event-time ranges of the old rows each side's delta can match, for an interval join.

    From `r.t BETWEEN l.t + lo AND l.t + hi`: an old left row can match a right delta iff
    `l.t` is in `[min(delta_r.t) - hi, max(delta_r.t) - lo]`, an old right row a left delta
    iff `r.t` is in `[min(delta_l.t) + lo, max(delta_l.t) + hi]`. With three or more
    streams an old view serves several terms: read it with the union of its ranges.

    >>> p = pruning_ranges(("imp_ts", "click_ts", 0, 1_200_000_000))
    >>> p.old_left.bounds(5_000_000_000, 9_000_000_000)
    (3800000000, 9000000000)
    >>> p.old_right.predicate(0, 10).sql()
    'click_ts BETWEEN 0 AND 1200000010'
    """
    left, right, lo, hi = interval
    if lo > hi:
        raise DeltaRuleError(f"empty interval: lower bound {lo} µs is above upper bound {hi} µs")
    return Pruning(MatchRange(left, right, -hi, -lo), MatchRange(right, left, lo, hi))


def _prepare(query: exp.Expr, streams: Mapping[str, DeltaBinding],
             inline_all: bool) -> tuple[exp.Query, list[DeltaBinding]]:
    match = binding_matcher(streams, lambda b: b.alias_or_table)
    # A binding that names no table would leave its stream read whole in every micro-batch.
    read = [match(t) for t in query.find_all(exp.Table) if cte_of(t) is None]
    unread = [k for k, b in streams.items() if all(b is not x for x in read)]
    if unread:
        raise DeltaRuleError(f"stream input `{unread[0]}` is not read by the query",
                             hint="bind it by the table's alias or name as the query writes it")
    return prepare(query, match, inline_all)


def _term(tree: exp.Query, bindings: list[DeltaBinding], i: int) -> exp.Query:
    """Term i: occurrences before i read old rows, i the delta, those after i everything.
    UNION ALL branches beside the one holding occurrence i go: their rows don't involve it."""
    term = tree.copy()
    target = occurrences(term)[i]
    while True:  # innermost union first; the lineage changes with every replacement
        union = next(((p, c) for p, c in lineage(target) if isinstance(p, exp.Union)), None)
        if union is None:
            break
        parent, child = union
        kept = child.unnest() if isinstance(child, exp.Subquery) and not child.alias else child
        kept = cast(exp.Query, kept)  # a UNION branch is a query
        _move_with(parent, kept)
        if parent is term:
            term = kept.pop()
        else:
            parent.replace(kept)
    for table in occurrences(term):
        j = table.meta[MARK]
        b = bindings[j]
        new = exp.to_table(b.old_view if j < i else b.delta_view) if j <= i else _full(b)
        _swap(table, new)
    return term


def _move_with(union: exp.Union, branch: exp.Query) -> None:
    """Keep the union's CTEs when the branch replaces it."""
    outer = union.args.get("with_")
    if outer:
        inner = branch.args.get("with_")
        ctes = [*outer.expressions, *(inner.expressions if inner else [])]
        branch.set("with_", exp.With(expressions=ctes))


def _full(b: DeltaBinding) -> exp.Subquery:
    old, delta = (exp.select("*").from_(exp.to_table(v)) for v in (b.old_view, b.delta_view))
    return exp.union(old, delta, distinct=False).subquery()


def _swap(table: exp.Table, new: exp.Expression) -> None:
    """Replace a stream table, keeping the name its columns are qualified with."""
    new.set("alias", alias_of(table))
    table.replace(new)


def _rebind(source: exp.Expression, table: exp.Table, new: exp.Expression) -> exp.Expression:
    """A copy of the FROM/JOIN source `source` with the stream `table` in it bound to `new`."""
    if source is table:
        new.set("alias", alias_of(table))
        return new
    copy = source.copy()
    _swap(occurrences(copy)[0], new)
    return copy


def _union_terms(tree: exp.Query, terms: list[exp.Query]) -> exp.Query:
    """UNION ALL of the terms under one WITH: CTEs without streams once, each term's
    stream-reading CTEs renamed `<name>__t<i>`. (A UNION ALL of queries that each carry a
    WITH is poorly supported, and one WITH shows what the terms share.)"""
    if len(terms) == 1:
        return terms[0]
    top = tree.args.get("with_")
    shared = [c for c in (top.expressions if top else []) if not reads_stream(c.this)]
    names = {c.alias.lower() for c in shared}
    ctes = [c.copy() for c in shared]
    for i, term in enumerate(terms, 1):
        w = term.args.get("with_")
        if not w:
            continue
        own = [c for c in w.expressions if c.alias.lower() not in names]
        while True:  # drop CTEs only the dropped UNION ALL branches read
            refs = cte_refs(term)
            unused = [c for c in own if not refs[id(c)]]
            if not unused:
                break
            own = [c for c in own if all(c is not u for u in unused)]
            for c in unused:
                c.pop()
        for cte in own:
            new = f"{cte.alias}__t{i}"
            for ref in refs[id(cte)]:
                ref.set("alias", alias_of(ref))
                ref.set("this", exp.to_identifier(new))
            cte.set("alias", exp.TableAlias(this=exp.to_identifier(new)))
            ctes.append(cte)
        w.pop()
    union = reduce(lambda a, b: exp.union(a, b, distinct=False), terms)
    if ctes:
        union.set("with_", exp.With(expressions=ctes))
    return union


def _joined_in(a: exp.Table, b: exp.Table) -> tuple[exp.Select, list[exp.Expression], int, int]:
    """The innermost SELECT joining the sources that hold `a` and `b`, its sources and the
    two sources' positions."""
    for node in parents(a):
        if isinstance(node, exp.Select):
            srcs = sources(node)
            ia, ib = (next((k for k, s in enumerate(srcs) if any(n is t for n in s.walk())),
                           None) for t in (a, b))
            if ia is not None and ib is not None and ia != ib:
                return node, srcs, ia, ib
    raise DeltaRuleError("the two streams are not joined in one SELECT")


def _literal(value: int | dt.datetime) -> exp.Expression:
    if isinstance(value, dt.datetime):
        return exp.cast(exp.Literal.string(value.isoformat(sep=" ")), exp.DataType.Type.TIMESTAMP)
    return exp.Literal.number(value)


def _add_us(value: int | dt.datetime, us: int) -> int | dt.datetime:
    return value + dt.timedelta(microseconds=us) if isinstance(value, dt.datetime) else value + us
