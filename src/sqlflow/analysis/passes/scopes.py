"""Scope facts: for every SELECT of a model, its sources (tables, CTEs, derived tables), whether
each is a stream, and which columns carry the event time or an event-time bucket.

Built bottom-up over `sqlglot.optimizer.scope` (children before parents), so a CTE's or a
subquery's output facts are known before the query that reads it:

    >>> from sqlflow.dialect import parse
    >>> from sqlflow.analysis.ir import InputRel
    >>> from sqlflow.project.eventtime import EventTime
    >>> imp = InputRel("ods.imp", "ods.imp", "source", True, EventTime("imp_ts"))
    >>> sql = "WITH x AS (SELECT imp_ts AS ts, to_date(imp_ts) AS dt FROM ods.imp) SELECT * FROM x"
    >>> facts = ScopeFacts(parse(sql), {"ods.imp": imp})
    >>> root = facts.root_info
    >>> root.streaming, root.output.event_time, root.output.columns["dt"].bucket
    (True, 'ts', 'date')
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from sqlglot import exp
from sqlglot.optimizer.scope import Scope, build_scope

from sqlflow.analysis.ir import InputRel

WINDOW_FUNCS = {"window": "window", "session_window": "session_window"}
_DATE_BUCKETS = (exp.TsOrDsToDate, exp.DateTrunc, exp.TimestampTrunc, exp.Date, exp.DatetimeTrunc)


@dataclass(frozen=True)
class ColInfo:
    """What is known of one column: a copy of an event time, or a bounding event-time bucket
    (`window`, `session_window`, or `date`: a date/truncation of the event time, or an input's
    leading partition column)."""

    event_time: bool = False
    bucket: str | None = None
    origin: str | None = None


@dataclass
class RelInfo:
    """A relation as a scope sees it: a table input, or a CTE/subquery's output."""

    streaming: bool
    event_time: str | None
    columns: dict[str, ColInfo]
    complete: bool
    input: InputRel | None = None


@dataclass
class ScopeInfo:
    scope: Scope
    label: str
    sources: dict[str, RelInfo]
    streaming: bool
    output: RelInfo
    aliases: dict[str, exp.Expr] = field(default_factory=dict)

    @property
    def select(self) -> exp.Select | None:
        return self.scope.expression if isinstance(self.scope.expression, exp.Select) else None


@dataclass(frozen=True)
class Resolved:
    """A column reference resolved to the alias of a source in scope (None if unknown)."""

    alias: str | None
    name: str
    col: ColInfo
    problem: str | None = None


def relation_name(table: exp.Table) -> str:
    return ".".join(p.name for p in table.parts).lower()


def scope_label(scope: Scope) -> str:
    """How a message names a scope: `the model query`, `CTE \\`x\\``, `subquery \\`y\\``."""
    parent = scope.expression.parent
    if scope.is_root:
        return "the model query"
    if scope.is_cte and isinstance(parent, exp.CTE):
        return f"CTE `{parent.alias}`"
    if scope.is_derived_table:
        alias = parent.alias if isinstance(parent, exp.Subquery) else ""
        return f"subquery `{alias}`" if alias else "a subquery"
    if scope.is_set_operation and scope.parent is not None:
        owner = next((p for p in _ancestors(scope) if scope in p.set_operation_scopes), scope.parent)
        branch = owner.set_operation_scopes.index(scope) + 1 if scope in owner.set_operation_scopes else 0
        op = owner.expression.key.upper()
        return f"{op} branch {branch} of {scope_label(owner)}" if branch else scope_label(owner)
    return "a subquery expression" if scope.is_subquery else "a lateral view"


def _ancestors(scope: Scope) -> list[Scope]:
    out, node = [], scope.parent
    while node is not None:
        out.append(node)
        node = node.parent
    return out


class ScopeFacts:
    """Every scope of one statement with its `ScopeInfo`, plus the tables it reads."""

    def __init__(self, ast: exp.Expr, inputs: dict[str, InputRel]) -> None:
        self.inputs = _index(inputs)
        self.reads: list[tuple[str, Scope, exp.Table, InputRel]] = []
        self.unresolved: list[tuple[str, Scope, exp.Table, InputRel]] = []
        self.infos: dict[int, ScopeInfo] = {}
        self.parents: dict[int, list[tuple[ScopeInfo, str]]] = {}
        root = build_scope(ast)
        self.scopes: list[Scope] = list(root.traverse()) if root else []
        for scope in self.scopes:
            self.infos[id(scope)] = self._visit(scope)
        for scope in self.scopes:  # set-operation branches are known only once all are built
            self.infos[id(scope)].label = scope_label(scope)
        self.root_info = self.infos[id(root)] if root else None

    def info(self, scope: Scope) -> ScopeInfo:
        return self.infos[id(scope)]

    def _visit(self, scope: Scope) -> ScopeInfo:
        sources: dict[str, RelInfo] = {}
        for name, _node in scope.references:
            source = scope.sources.get(name)
            if isinstance(source, exp.Table):
                sources[name] = self._table(name, scope, source)
            elif isinstance(source, Scope) and id(source) in self.infos:
                sources[name] = self.infos[id(source)].output
        branches = [self.infos[id(s)] for s in scope.set_operation_scopes if id(s) in self.infos]
        streaming = any(r.streaming for r in sources.values()) or any(b.streaming for b in branches)
        info = ScopeInfo(scope, scope_label(scope), sources, streaming, RelInfo(False, None, {}, True))
        for name, source in scope.sources.items():
            if name in sources and isinstance(source, Scope) and id(source) in self.infos:
                self.parents.setdefault(id(source), []).append((info, name))
        info.output = self._branch_output(branches, streaming) if branches else self._output(info)
        return info

    def _table(self, alias: str, scope: Scope, table: exp.Table) -> RelInfo:
        relation = relation_name(table)
        rel = self.inputs.get(relation) or self.inputs.get(".".join(relation.split(".")[-2:]))
        if rel is None:
            rel = InputRel(relation, relation, "source", False)
            self.unresolved.append((alias, scope, table, rel))
        else:
            self.reads.append((alias, scope, table, rel))
        columns = {c: ColInfo(origin=f"{alias}.{c}") for c in rel.columns}
        if rel.partition_by:
            columns[rel.partition_by[0]] = ColInfo(bucket="date", origin=f"{alias}.{rel.partition_by[0]}")
        if rel.event_time:
            columns[rel.event_time] = ColInfo(event_time=True, origin=f"{alias}.{rel.event_time}")
        return RelInfo(rel.is_stream, rel.event_time, columns, bool(rel.columns), rel)

    # -- column resolution -------------------------------------------------------------
    def resolve(self, info: ScopeInfo, column: exp.Column) -> Resolved:
        """Resolve `column` against the sources of `info`'s scope (see module docstring)."""
        name, table = column.name, column.table
        if table and table not in info.sources:
            table = next((a for a in info.sources if a.lower() == table.lower()), table)
        if table and table in info.sources:
            return Resolved(table, name, _origin(column_info(info.sources[table], name), table, name))
        if table:
            return self._struct_field(info, column)
        known = [a for a, rel in info.sources.items() if column_info(rel, name) is not None]
        if len(known) == 1:
            alias = known[0]
            return Resolved(alias, name, _origin(column_info(info.sources[alias], name), alias, name))
        if len(info.sources) == 1:
            alias = next(iter(info.sources))
            return Resolved(alias, name, _origin(None, alias, name))
        if not info.sources:
            return Resolved(None, name, ColInfo())
        listed = ", ".join(f"`{a}`" for a in (known or info.sources))
        return Resolved(
            None, name, ColInfo(),
            f"column `{name}` is not qualified and could come from any of {listed}; "
            f"qualify it (e.g. `{(known or list(info.sources))[0]}.{name}`)",
        )

    def _struct_field(self, info: ScopeInfo, column: exp.Column) -> Resolved:
        # `window.start` / `w.end`: a field of a window struct column, not a table alias.
        inner = self.resolve(info, exp.column(column.table))
        group = info.select.args.get("group") if info.select is not None else None
        if not inner.col.bucket and group is not None:
            # `GROUP BY window(ts, ...)` names its result `window` (`session_window`).
            name = column.table.lower()
            calls = [k for k in group.expressions if name in WINDOW_FUNCS
                     and isinstance(k, exp.Anonymous) and k.name.lower() == name]
            if calls:
                inner = Resolved(None, column.table, self.classify(info, calls[0]))
        if inner.col.bucket in WINDOW_FUNCS.values() and column.name.lower() in ("start", "end"):
            return Resolved(inner.alias, column.name, ColInfo(event_time=True, origin=column.sql()))
        return Resolved(None, column.name, ColInfo())

    def classify(self, info: ScopeInfo, node: exp.Expr) -> ColInfo:
        """What `node`, computed in `info`'s scope, carries: event time, a time bucket, or nothing.

        Only row-wise, order-preserving derivations count: aliases, casts to timestamp, and
        for buckets `to_date`, `date(...)`, `date_trunc`, `date_format` with a year, `window`.
        """
        while isinstance(node, (exp.Alias, exp.Paren)):
            node = node.this
        if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
            return self.resolve(info, node).col
        if isinstance(node, exp.Anonymous):
            return self._classify_call(info, node)
        arg = node.args.get("this")
        inner = self.classify(info, arg) if isinstance(arg, exp.Expr) else ColInfo()
        timed = inner.event_time or inner.bucket == "date"
        if isinstance(node, exp.Dot) and node.name.lower() in ("start", "end"):
            windowed = inner.bucket in WINDOW_FUNCS.values()
            return ColInfo(event_time=True, origin=node.sql()) if windowed else ColInfo()
        if isinstance(node, (exp.Cast, exp.TryCast)):
            if node.to.is_type("date"):
                return ColInfo(bucket="date") if timed else ColInfo()
            return inner if node.to.is_type(*exp.DataType.TEMPORAL_TYPES) else ColInfo()
        if isinstance(node, _DATE_BUCKETS) or _is_dated_format(node):
            return ColInfo(bucket="date") if timed else ColInfo()
        return inner if isinstance(node, exp.TimeStrToTime) else ColInfo()

    def _classify_call(self, info: ScopeInfo, node: exp.Anonymous) -> ColInfo:
        """`window(ts, ...)` / `session_window(ts, ...)` buckets; `window_time(w)` is a time."""
        name = node.name.lower()
        first = self.classify(info, node.expressions[0]) if node.expressions else ColInfo()
        if name in WINDOW_FUNCS and first.event_time:
            return ColInfo(bucket=WINDOW_FUNCS[name])
        if name == "window_time" and first.bucket in WINDOW_FUNCS.values():
            return ColInfo(event_time=True)
        return ColInfo()

    # -- outputs -----------------------------------------------------------------------
    def _output(self, info: ScopeInfo) -> RelInfo:
        select = info.select
        if select is None:
            return RelInfo(info.streaming, None, {}, False)
        columns: dict[str, ColInfo] = {}
        complete = True
        for item in select.expressions:
            if isinstance(item, exp.Star) or (type(item) is exp.Column and item.is_star):
                complete &= self._expand_star(info, item, columns)
                continue
            # Spark names an unaliased expression itself; its SQL text stands in for that name.
            named = isinstance(item, (exp.Alias, exp.Column, exp.Dot))
            name = item.alias_or_name if named else item.sql(dialect="spark")
            if isinstance(item, exp.Alias):
                info.aliases[name] = item.this
            columns[name] = self.classify(info, item)
        outer = info.scope.outer_columns
        if outer and complete and len(outer) == len(columns):
            columns = dict(zip(outer, columns.values(), strict=True))
        return RelInfo(info.streaming, self._pick_event_time(info, columns), columns, complete)

    def _expand_star(self, info: ScopeInfo, item: exp.Expr, columns: dict[str, ColInfo]) -> bool:
        star = item.this if isinstance(item, exp.Column) else item
        table = item.table if isinstance(item, exp.Column) else ""
        excluded = {c.name for c in (star.args.get("except_") or [])}
        complete = True
        for alias, rel in info.sources.items():
            if table and alias != table:
                continue
            for name, col in rel.columns.items():
                if name not in excluded:
                    columns.setdefault(name, _origin(col, alias, name))
            complete &= rel.complete
        return complete

    def _pick_event_time(self, info: ScopeInfo, columns: dict[str, ColInfo]) -> str | None:
        candidates = [n for n, c in columns.items() if c.event_time]
        streams = [a for a, r in info.sources.items() if r.streaming and r.event_time]
        for alias in streams[:1]:
            for name in candidates:
                if (columns[name].origin or "").startswith(f"{alias}."):
                    return name
        return candidates[0] if candidates else None

    def _branch_output(self, branches: list[ScopeInfo], streaming: bool) -> RelInfo:
        first = branches[0].output
        complete = all(b.output.complete for b in branches)
        return RelInfo(streaming, first.event_time, dict(first.columns), complete)

    def time_column(self, info: ScopeInfo) -> str | None:
        """The event time of the scope's first stream, as the user would write it (`i.imp_ts`)."""
        for alias, rel in info.sources.items():
            if rel.streaming and rel.event_time:
                return f"{alias}.{rel.event_time}" if len(info.sources) > 1 else rel.event_time
        return None


def column_info(rel: RelInfo, name: str) -> ColInfo | None:
    """A column of `rel` by name; Spark resolves names case-insensitively."""
    found = rel.columns.get(name)
    if found is None:
        lowered = name.lower()
        found = next((c for n, c in rel.columns.items() if n.lower() == lowered), None)
    return found


def _origin(col: ColInfo | None, alias: str, name: str) -> ColInfo:
    if col is None:
        return ColInfo(origin=f"{alias}.{name}")
    return replace(col, origin=f"{alias}.{name}")


def _is_dated_format(node: exp.Expr) -> bool:
    if not isinstance(node, (exp.TimeToStr, exp.UnixToStr)):
        return False
    fmt = node.args.get("format")
    return isinstance(fmt, exp.Literal) and ("%Y" in fmt.name or "%y" in fmt.name)


def _index(inputs: dict[str, InputRel]) -> dict[str, InputRel]:
    index: dict[str, InputRel] = {}
    for key, rel in inputs.items():
        index.setdefault(rel.relation.lower(), rel)
        index.setdefault(key.lower(), rel)
    return index
