"""Ephemeral models inlined as CTEs, as dbt does (docs/semantics.md, "Ephemeral models").

dbt compiles `ref('e')` to an ephemeral model `e` as `__dbt__cte__e` and puts
`__dbt__cte__e AS (<e's SQL>)` in front of the model's own CTEs, an ephemeral's own
ephemeral parents first. The same is done here on the sqlglot tree, so both plans (batch and
stream) and lineage read through the CTE to the tables it reads.

    >>> from sqlflow.dialect import parse
    >>> tree = inline_ctes(parse("SELECT a FROM __dbt__cte__e"), [("__dbt__cte__e", "SELECT 1 AS a")])
    >>> tree.sql()
    'WITH __dbt__cte__e AS (SELECT 1 AS a) SELECT a FROM __dbt__cte__e'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlglot import exp

from sqlflow.dialect import parse


def inline_ctes(ast: exp.Expr, ctes: Sequence[tuple[str, str]]) -> exp.Expr:
    """`ast` with `(name, sql)` CTEs in front of its own, in the order given (parents first).

    The inlined trees carry no positions: a finding inside one is reported at the model, not at
    a line of another file's text."""
    if not ctes:
        return ast
    inlined = []
    for name, sql in ctes:
        query = parse(sql)
        for node in query.walk():
            node.meta.clear()
        inlined.append(exp.CTE(this=query, alias=exp.TableAlias(this=exp.to_identifier(name))))
    own = ast.args.get("with_")
    existing = list(own.expressions) if isinstance(own, exp.With) else []
    recursive = bool(own.args.get("recursive")) if isinstance(own, exp.With) else False
    ast.set("with_", exp.With(expressions=[*inlined, *existing], recursive=recursive))
    return ast


def ephemeral_chain(name: str, refs: Mapping[str, Sequence[str]], ephemeral: set[str]) -> list[str]:
    """The ephemeral models `name` reads, directly or through other ephemerals, parents first.

    >>> ephemeral_chain("m", {"m": ["e2", "t"], "e2": ["e1"], "e1": []}, {"e1", "e2"})
    ['e1', 'e2']
    """
    out: list[str] = []

    def visit(node: str) -> None:
        for parent in refs.get(node, ()):
            if parent in ephemeral and parent not in out:
                visit(parent)
                out.append(parent)
    visit(name)
    return out
