"""Recognise dimension joins with fallback partitions (docs/design.md §2.3) in a model's SQL.

`macros/dim_join.sql` renders a join against a subquery whose first column is
`__sqlflow_dim_day`: every ready partition p of the dimension, repeated for each day
d in [p, p + max_fallback], keeping the newest p per d. The join condition equates that
column with the fact's date. The recognition reads that shape from the tree (not from the
macro call), so hand-written SQL of the same shape is a dimension join too:

    >>> from sqlflow.dialect import parse
    >>> sql = '''SELECT e.id, u.dt AS user_dt FROM f AS e LEFT JOIN (
    ...   SELECT r.__sqlflow_day AS __sqlflow_dim_day, d.* FROM dim.u AS d JOIN (
    ...     SELECT __sqlflow_day, max(__sqlflow_p) AS __sqlflow_p FROM (
    ...       SELECT __sqlflow_p, explode(sequence(to_date(__sqlflow_p),
    ...              date_add(to_date(__sqlflow_p), 2))) AS __sqlflow_day FROM x) AS s
    ...     GROUP BY __sqlflow_day) AS r ON d.dt = r.__sqlflow_p) AS u
    ...   ON u.__sqlflow_dim_day = to_date(e.ts) AND e.k = u.k'''
    >>> [(j.alias, j.relation, j.join_type, j.fact_alias, j.partition_column, j.max_fallback,
    ...   j.lineage) for j in dim_joins(parse(sql))]
    [('u', 'dim.u', 'left', 'e', 'dt', 2, 'user_dt')]
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from sqlflow.analysis.ir import DimJoinIR
from sqlflow.analysis.passes.joins import conjuncts, join_type
from sqlflow.analysis.passes.scopes import relation_name
from sqlflow.dialect import DIALECT
from sqlflow.errors import Location

DAY_COLUMN = "__sqlflow_dim_day"


def is_dim_join(join: exp.Join) -> bool:
    """Whether `join` joins a dimension subquery of the dim_join shape."""
    sub = join.this
    if not isinstance(sub, exp.Subquery) or not isinstance(sub.this, exp.Select):
        return False
    return any(e.alias_or_name.lower() == DAY_COLUMN for e in sub.this.expressions)


def dim_joins(ast: exp.Expr, locate: Callable[[exp.Expr], Location] | None = None) -> list[DimJoinIR]:
    """Every dimension join in the tree, in SQL order. `locate(node)` gives a Location."""
    out = []
    root = ast if isinstance(ast, exp.Select) else None
    for join in ast.find_all(exp.Join):
        if not is_dim_join(join):
            continue
        found = _read(join, root if join.parent is root else None)
        if found is not None:
            out.append(DimJoinIR(**found, location=locate(join) if locate else None, node=join))
    return out


def _read(join: exp.Join, root: exp.Select | None) -> dict | None:
    sub = join.this
    inner = sub.this
    alias = sub.alias
    table = inner.args.get("from_").this if inner.args.get("from_") else None
    if not alias or not isinstance(table, exp.Table) or not inner.args.get("joins"):
        return None
    ready = inner.args["joins"][0]
    partition_column = None
    for cond in conjuncts(ready.args.get("on")):
        if isinstance(cond, exp.EQ):
            for side in (cond.this, cond.expression):
                if isinstance(side, exp.Column) and side.table == table.alias_or_name:
                    partition_column = side.name
    adds = [n for n in inner.find_all(exp.TsOrDsAdd, exp.DateAdd)]
    fallback = adds[0].expression if adds else None
    fact_date, fact_alias = None, None
    for cond in conjuncts(join.args.get("on")):
        if not isinstance(cond, exp.EQ):
            continue
        for mine, other in ((cond.this, cond.expression), (cond.expression, cond.this)):
            if isinstance(mine, exp.Column) and mine.table == alias and mine.name.lower() == DAY_COLUMN:
                fact_date = other
                aliases = {c.table for c in other.find_all(exp.Column)}
                fact_alias = next(iter(aliases)) if len(aliases) == 1 else None
    if not (partition_column and isinstance(fallback, exp.Literal) and fact_date is not None
            and fact_alias):
        return None
    return dict(
        alias=alias, relation=relation_name(table), join_type=join_type(join),
        fact_alias=fact_alias, fact_date=fact_date.sql(dialect=DIALECT),
        partition_column=partition_column, max_fallback=int(fallback.this),
        ready=ready.this.sql(dialect=DIALECT),
        lineage=_lineage(root, alias, partition_column) if root is not None else None,
        scope="the model query" if root is not None else "a subquery",
    )


def _lineage(root: exp.Select, alias: str, column: str) -> str | None:
    """The output column of the root SELECT that is `<alias>.<column>` (p*), if selected."""
    for item in root.expressions:
        node = item.this if isinstance(item, exp.Alias) else item
        if isinstance(node, exp.Column) and node.table == alias and node.name.lower() == column.lower():
            return item.alias_or_name
        if isinstance(node, exp.Column) and node.table == alias and isinstance(node.this, exp.Star):
            return column
    return None
