"""An incremental join's micro-batch SQL for a small micro-batch: each join of new rows hashes
them in the task that reads the other side, not in a Spark job of its own (docs/design.md §2.9).

A small micro-batch's join (`sqlflow.runtime.small_plan`: few rows read in all) is planned by
size: Spark broadcasts the new rows of each join, and every broadcast is a Spark job run before
the join's own (three jobs for the two terms of a two-input join, each with its scheduling and
its pass over the new rows). A shuffled hash join whose two inputs are one partition each needs
no shuffle either (one partition is clustered by any key): it builds the same hash table of the
new rows inside the one task that reads the older rows. The runtime runs this SQL only when it
binds every view as one partition (`MicroBatch`), so the join's terms run in one job of a task
each. The rows are the same whichever way Spark joins them.

`hash_join_sql` asks Spark for that join with a `SHUFFLE_HASH` hint naming each new-rows view a
SELECT joins directly. Only for a query that then plans no exchange at all, by its shape: SELECTs,
inner equi-joins and UNION ALLs over the plan's own views, and nothing that shuffles (an
aggregate, a window, DISTINCT, ORDER BY, LIMIT, a set operation that deduplicates), no subquery
expression and no hint of the model's own (two strategy hints on one relation make Spark warn and
choose). None for any other query: the micro-batch runs the plan's SQL as it always does. A
hint Spark cannot use costs nothing but a warning in its log, which the shape rules also rule out.
"""

from __future__ import annotations

from collections.abc import Collection

from sqlglot import exp

# nodes whose physical plan shuffles (or needs all rows in one place), or that the rule does not
# follow: a query holding one keeps its broadcasts
_SHUFFLES = (exp.Group, exp.Distinct, exp.Window, exp.Order, exp.Limit, exp.Offset, exp.Having,
             exp.Qualify, exp.AggFunc, exp.Intersect, exp.Except, exp.Hint, exp.Lateral,
             exp.Values, exp.Exists, exp.With, exp.Pivot)
HINT = "SHUFFLE_HASH"


def hash_join_sql(query: exp.Expr, new_views: Collection[str],
                  views: Collection[str]) -> exp.Expr | None:
    """`query` (the delta rule's rewrite, reading only temp views) with each direct join source
    that is one of `new_views` hinted `SHUFFLE_HASH`; None when a view would not be hashed by it
    without a shuffle (see the module docstring), or when no SELECT joins a new-rows view."""
    if not _plain(query, {v.lower() for v in views}):
        return None
    tree = query.copy()
    new = {v.lower() for v in new_views}
    hinted = False
    for select in tree.find_all(exp.Select):
        joins = select.args.get("joins") or []
        if not joins:
            continue
        if not all(_inner_equi(j) for j in joins):
            return None
        sources = [select.args["from_"].this, *(j.this for j in joins)]
        names = [s.alias_or_name for s in sources if isinstance(s, exp.Table) and s.name.lower() in new]
        if names:
            select.set("hint", exp.Hint(expressions=[
                exp.JoinHint(this=HINT, expressions=[exp.Table(this=exp.to_identifier(n, quoted=True))
                                                     for n in names])]))
            hinted = True
    return tree if hinted else None


def _plain(query: exp.Expr, views: set[str]) -> bool:
    """Whether `query` is SELECTs, joins and UNION ALLs over `views` only, with no node that
    shuffles, and subqueries only as a FROM or JOIN source or a UNION branch."""
    for node in query.walk():
        if isinstance(node, _SHUFFLES):
            return False
        if isinstance(node, exp.Union) and node.args.get("distinct"):
            return False
        if isinstance(node, exp.Table) and (node.args.get("db") or node.name.lower() not in views):
            return False
        if isinstance(node, exp.In) and node.args.get("query") is not None:
            return False
        if isinstance(node, exp.Subquery) and not isinstance(node.parent, (exp.From, exp.Join, exp.Union)):
            return False
        if isinstance(node, exp.Select) and node is not query and \
                not isinstance(node.parent, (exp.Subquery, exp.Union)):
            return False  # a scalar subquery, or a SELECT somewhere the rule does not follow
    return True


def _inner_equi(join: exp.Join) -> bool:
    """An inner join on a condition with at least one equality of two columns among its ANDed
    terms (a hash join's keys)."""
    if join.side or (join.kind or "INNER").upper() != "INNER" or join.args.get("using"):
        return False
    on = join.args.get("on")
    if on is None:
        return False
    terms = list(on.flatten()) if isinstance(on, exp.And) else [on]
    return any(isinstance(t, exp.EQ) and isinstance(t.this, exp.Column) and
               isinstance(t.expression, exp.Column) for t in terms)
