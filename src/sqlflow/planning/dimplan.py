"""Plan the dimension joins of a model (docs/design.md §2.3): pinned views and the side queries.

A model's SQL reads each dimension and the commit log (its READY set) by name. Both plans read
them through temp views instead, which the runtime (`sqlflow.runtime.snapshot`) registers at
one Delta version per backfill run or per micro-batch, so one statement never sees two
versions of a dimension or of the READY set. Two side queries come with the plan, over the
same views and the fact input's view:
- `days_sql`: per fact date, the partition each dim join chose (lineage, fallback depth and
  the provisional flag of the commit log);
- `missing_sql`: the fact rows an inner dim join drops because no partition was ready, which
  the runtime writes to the quarantine table with reason `dim_missing`.
"""

from __future__ import annotations

import dataclasses

from sqlglot import exp

from sqlflow.analysis.ir import DimJoinIR, ModelIR
from sqlflow.analysis.passes.joins import conjuncts
from sqlflow.dialect import parse
from sqlflow.planning.plan import COMMIT_LOG, DimBinding, DimPlan, bind_relations, spark_sql, view_name

READY_VIEW = view_name("ready", COMMIT_LOG)


def pinned_views(ir: ModelIR) -> dict[str, str]:
    """Relation -> view for every dimension and the commit log of `ir`'s dim joins."""
    if not ir.dim_joins:
        return {}
    views = {d.relation: view_name("dim", d.relation) for d in ir.dim_joins}
    views[COMMIT_LOG] = READY_VIEW
    return views


def pin(ir: ModelIR) -> ModelIR:
    """`ir` whose SQL reads dimensions and the commit log through the pinned views."""
    views = pinned_views(ir)
    return dataclasses.replace(ir, ast=bind_relations(ir.ast, views)) if views else ir


def dim_plan(ir: ModelIR, fact_views: dict[str, str]) -> DimPlan | None:
    """The DimPlan of `ir` (unpinned IR); `fact_views` maps input relations to the views the
    plan reads them through (delta or clean views). None without dim joins."""
    if not ir.dim_joins:
        return None
    joins = [d for d in ir.dim_joins if d.lineage]
    fact_alias = joins[0].fact_alias if joins else ir.dim_joins[0].fact_alias
    fact = next((r.input.relation for r in ir.reads if r.alias == fact_alias), None)
    if fact is None:
        return None
    markers = {r.input.relation: r.input.ready_marker for r in ir.reads}
    views = {**pinned_views(ir), **fact_views}
    dims = tuple(DimBinding(d.relation, view_name("dim", d.relation), d.alias, d.join_type,
                            d.partition_column, d.max_fallback, d.lineage or "",
                            markers.get(d.relation)) for d in joins)
    fact_table = exp.to_table(fact_views.get(fact, fact)).as_(fact_alias)
    where = _fact_filter(ir.ast, fact_alias)
    return DimPlan(dims=dims, ready_view=READY_VIEW,
                   days_sql=spark_sql(_days(joins, fact_table, where, views)),
                   missing_sql=_missing(joins, fact_table, fact_alias, where, views),
                   fact=fact)


def _ready(d: DimJoinIR, views: dict[str, str]) -> exp.Expr:
    assert d.node is not None
    ready = d.node.this.this.args["joins"][0].this
    return bind_relations(ready, views)


def _days(joins: list[DimJoinIR], fact_table: exp.Expr, where: exp.Expr | None,
          views: dict[str, str]) -> exp.Select:
    """Distinct (`__sqlflow_d<i>`, `__sqlflow_p<i>`) over the fact rows: per dim join its fact
    date and its chosen partition (NULL: none ready)."""
    q = exp.select().from_(fact_table.copy()).distinct()
    for i, d in enumerate(joins):
        m, day = f"__sqlflow_m{i}", parse(d.fact_date)
        q = q.select(day.copy().as_(f"__sqlflow_d{i}"),
                     exp.column("__sqlflow_p", table=m).as_(f"__sqlflow_p{i}"))
        q = q.join(_aliased(_ready(d, views), m), join_type="left",
                   on=exp.EQ(this=exp.column("__sqlflow_day", table=m), expression=day))
    if where is not None:
        q = q.where(where.copy())
    return q


def _missing(joins: list[DimJoinIR], fact_table: exp.Expr, fact_alias: str,
             where: exp.Expr | None, views: dict[str, str]) -> str | None:
    inner = [(i, d) for i, d in enumerate(joins) if d.join_type == "inner"]
    if not inner:
        return None
    q = exp.select(exp.Column(this=exp.Star(), table=exp.to_identifier(fact_alias))).from_(fact_table.copy())
    case = exp.Case()
    missing: list[exp.Expr] = []
    for i, d in inner:
        m = f"__sqlflow_m{i}"
        q = q.join(_aliased(_ready(d, views), m), join_type="left",
                   on=exp.EQ(this=exp.column("__sqlflow_day", table=m), expression=parse(d.fact_date)))
        none = exp.column("__sqlflow_day", table=m).is_(exp.null())
        case = case.when(none, exp.Literal.string(d.relation))
        missing.append(none)
    q = q.select(case.as_("__sqlflow_dim"))
    cond = exp.or_(*missing)
    q = q.where(exp.and_(where.copy(), cond) if where is not None else cond)
    return spark_sql(q)


def _aliased(subquery: exp.Expr, alias: str) -> exp.Expr:
    node = subquery.copy()
    if isinstance(node, exp.Subquery):
        node.set("alias", exp.TableAlias(this=exp.to_identifier(alias)))
        return node
    return exp.Subquery(this=node, alias=exp.TableAlias(this=exp.to_identifier(alias)))


def _fact_filter(ast: exp.Expr, fact_alias: str) -> exp.Expr | None:
    """The WHERE conjuncts of the model query over the fact's columns only: a fact row the
    model filters out is neither joined nor quarantined."""
    where = ast.args.get("where") if isinstance(ast, exp.Select) else None
    if where is None:
        return None
    keep = [c for c in conjuncts(where.this)
            if (cols := list(c.find_all(exp.Column))) and all(col.table == fact_alias for col in cols)
            and not c.find(exp.Subquery)]
    return exp.and_(*keep) if keep else None
