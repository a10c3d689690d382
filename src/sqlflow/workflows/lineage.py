"""Column lineage: which upstream columns a model's column is computed from, down to sources.

Each model is rendered (macros expanded, refs and sources resolved to relations) and handed
to sqlglot's lineage, which follows the column through CTEs and subqueries to the tables of
the FROM/JOIN clauses. A table that is another model's relation is followed into that model,
recursively; a source table ends the walk. Columns only a predicate uses (join keys, WHERE)
are not lineage: lineage is what the value is computed from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.lineage import lineage as sqlglot_lineage

from sqlflow.compiler import compile_project
from sqlflow.dialect import DIALECT
from sqlflow.errors import SqlflowError, did_you_mean
from sqlflow.project.load import load_project
from sqlflow.project.seeds import seed_columns


@dataclass
class ColumnNode:
    """`kind` is `model` (a model's column, with `upstream`), `source`, `seed` or `table`
    (unknown)."""

    kind: str
    relation: str  # model name, `source.table`, or the table name as written
    column: str
    upstream: list[ColumnNode] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.relation}.{self.column}"

    def sources(self) -> list[str]:
        """The leaf columns (sources, unknown tables), each once, in walk order."""
        if not self.upstream:
            return [self.label] if self.kind != "model" else []
        out: list[str] = []
        for node in self.upstream:
            out += [s for s in node.sources() if s not in out]
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "relation": self.relation, "column": self.column,
                "upstream": [n.to_dict() for n in self.upstream]}


def column_lineage(project_dir: Path, target: str, vars: dict[str, Any] | None = None) -> ColumnNode:
    """The lineage tree of `MODEL.COLUMN`."""
    model, sep, column = target.partition(".")
    if not sep or not model or not column:
        raise SqlflowError(f"`{target}` is not MODEL.COLUMN", hint="e.g. dwd_ad_click_samples.label")
    project = load_project(project_dir)
    compiled = compile_project(project_dir, mode="batch", vars=vars)
    if model not in project.models:
        raise SqlflowError(f"no model named `{model}`", hint=did_you_mean(model, list(project.models)))
    rendered = {name: r for name, r in compiled.rendered.items()}
    schema = _schema(project, compiled)
    return _trace(model, column, rendered, project, schema, compiled, stack=())


def _trace(model: str, column: str, rendered: dict, project: Any, schema: dict, compiled: Any,
           stack: tuple[str, ...]) -> ColumnNode:
    node = ColumnNode("model", model, column)
    r = rendered.get(model)
    if r is None or model in stack:
        return node
    ir = compiled.irs.get(model)
    known = [o.name for o in ir.outputs] if ir else []
    if known and column.lower() not in {k.lower() for k in known}:
        raise SqlflowError(f"model `{model}` has no column `{column}`",
                           location=project.models[model].location,
                           hint=did_you_mean(column, known))
    # ephemeral models are CTEs of the IR's tree (sqlflow.analysis.ephemeral): traced through
    sql = ir.ast.sql(dialect=DIALECT) if ir is not None else r.sql
    try:
        root = sqlglot_lineage(column, sql, schema=schema, dialect=DIALECT)
    except SqlglotError as exc:
        raise SqlflowError(f"lineage of `{model}.{column}` failed: {exc}",
                           location=project.models[model].location) from None
    seen: set[tuple[str, str]] = set()
    for leaf in root.walk():
        if not isinstance(leaf.expression, exp.Table):
            continue
        table = exp.table_name(leaf.expression)
        upstream_col = leaf.name.split(".")[-1]
        if (table, upstream_col) in seen:
            continue
        seen.add((table, upstream_col))
        found = r.input_for(table) or _inlined_input(table, rendered)
        if found is not None and found.kind == "ref" and found.name in project.seeds:
            node.upstream.append(ColumnNode("seed", found.name, upstream_col))
        elif found is not None and found.kind == "ref":
            node.upstream.append(_trace(found.name, upstream_col, rendered, project, schema,
                                        compiled, stack + (model,)))
        elif found is not None:
            node.upstream.append(ColumnNode("source", found.key, upstream_col))
        else:
            node.upstream.append(ColumnNode("table", table, upstream_col))
    return node


def _inlined_input(table: str, rendered: dict) -> Any:
    """What a table read inside an inlined ephemeral model stands for."""
    for other in rendered.values():
        if other.config.materialized == "ephemeral":
            found = other.input_for(table)
            if found is not None:
                return found
    return None


def _schema(project: Any, compiled: Any) -> dict:
    """{db: {table: {column: type}}} of every relation whose columns are known, so sqlglot
    can expand `SELECT *` and qualify bare column names."""
    out: dict[str, dict[str, dict[str, str]]] = {}

    def add(relation: str, columns: list[str]) -> None:
        if not columns or "." not in relation:
            return
        db, table = relation.replace("`", "").rsplit(".", 1)
        out.setdefault(db, {})[table] = {c: "string" for c in columns}

    for table in project.sources.values():
        add(f"{table.schema}.{table.identifier}", [c.name for c in table.columns])
    for r in compiled.rendered.values():
        for inp in r.inputs:
            if inp.kind == "ref" and inp.name in project.seeds:
                add(str(inp.relation), seed_columns(project.root / project.seeds[inp.name].path,
                                                    project.seeds[inp.name].config.delimiter))
    for name, r in compiled.rendered.items():
        ir = compiled.irs.get(name)
        if ir is not None and ir.outputs_complete:
            add(str(r.relation), [o.name for o in ir.outputs])
    return out


def to_text(node: ColumnNode, indent: int = 0) -> str:
    mark = {"model": "", "source": "  (source)", "seed": "  (seed)",
            "table": "  (table outside the project)"}
    lines = ["  " * indent + node.label + mark[node.kind]]
    for child in node.upstream:
        lines.append(to_text(child, indent + 1))
    return "\n".join(lines)
