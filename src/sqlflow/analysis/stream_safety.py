"""Stream-safety checks (docs/design.md §2.8): what a streaming model may not do, from its `ModelIR`.

In stream mode each finding is an error; in batch mode the same finding is a warning that the
model cannot stream. Every finding names the place (`path:line:col`), what is wrong and a
concrete fix, and all of them are returned, not just the first. A model that reads no stream
has no stream-safety findings. Two findings hold in both modes: a configured partition column
the query does not produce (error), and a table that is neither a ref nor a source (warning).

    >>> from sqlflow.analysis.analyze import analyze
    >>> from sqlflow.analysis.ir import InputRel
    >>> from sqlflow.project.eventtime import EventTime
    >>> ins = {"ods.c": InputRel("ods.c", "ods.c", "source", True, EventTime("ts"))}
    >>> sql = "SELECT k,\\n  rand() AS r\\nFROM ods.c"
    >>> for mode in ("stream", "batch"):
    ...     print(check(analyze(sql, model="x", path="models/x.sql", inputs=ins, mode=mode))[0].format())
    models/x.sql:2:3: error: model `x`: `rand()` is not deterministic: a stream and its backfill would give different rows; derive it from the row, e.g. `pmod(xxhash64(<key columns>), 100)`
    models/x.sql:2:3: warning: model `x` cannot stream: `rand()` is not deterministic: a stream and its backfill would give different rows; derive it from the row, e.g. `pmod(xxhash64(<key columns>), 100)`
"""

from __future__ import annotations

from sqlflow.analysis.ir import CallIR, ClauseIR, JoinIR, Mode, ModelIR, WindowFnIR
from sqlflow.errors import Diagnostic, DiagnosticSink, Location, did_you_mean

_CALL_WHAT = {
    "random": "is not deterministic",
    "clock": "reads the wall clock",
    "origin": "depends on the file a row was read from",
    "row_id": "depends on how rows are split into partitions",
    "order": "depends on the order rows arrive in",
}
_CLAUSE_WHAT = {
    "order_by": "global ORDER BY over a stream: a stream never ends, so it has no global order",
    "limit": "LIMIT over a stream: which rows are first depends on arrival order",
    "union_distinct": "UNION (distinct) of streams keeps every row forever to remove duplicates",
    "intersect": "INTERSECT of streams keeps every row of both forever",
    "except": "EXCEPT of streams keeps every row of both forever",
    "subquery": "subquery over a stream inside an expression needs the whole stream",
}


def _where(scope: str) -> str:
    return "" if scope == "the model query" else f" (in {scope})"


def stream_findings(ir: ModelIR) -> list[tuple[Location | None, str, str]]:
    """(location, what is wrong, fix) for everything that keeps `ir` from streaming."""
    if not ir.streaming:
        return []
    out: list[tuple[Location | None, str, str]] = []
    for call in ir.nondeterministic:
        out.append((call.location, _call_message(call), call.fix))
    for join in ir.joins:
        if join.kind == "invalid":
            out.append((join.location, join.reason + _where(join.scope), join.fix))
        elif join.kind == "interval" and join.join_type == "full" and _self_join(ir, join):
            out.append((join.location,
                        f"FULL interval join of `{_relation(ir, join.left_alias, join.scope)}` with "
                        f"itself (`{join.left_alias}` and `{join.right_alias}`): both of its preserved "
                        f"sides are one input, whose unmatched rows a stream cannot pad twice"
                        + _where(join.scope),
                        f"read one side through a model of its own (e.g. a staging model over "
                        f"the same source), or use a LEFT JOIN if the unmatched rows of "
                        f"`{join.right_alias}` are not needed"))
    for agg in ir.aggregations:
        if agg.streaming and agg.kind == "unbounded":
            out.append((agg.location, agg.reason, agg.fix))
    for fn in ir.windows:
        if fn.streaming and not fn.dedup:
            out.append((fn.location, _window_message(fn), fn.fix))
    for clause in ir.clauses:
        if clause.streaming:
            out.append((clause.location, _clause_message(clause), clause.fix))
    return out


def _relation(ir: ModelIR, alias: str, scope: str) -> str | None:
    found = [r.input.relation for r in ir.reads if r.alias == alias and r.scope == scope]
    return found[0] if found else None


def _self_join(ir: ModelIR, join: JoinIR) -> bool:
    """Both sides of `join` read the same input (a self join: docs/semantics.md)."""
    left = _relation(ir, join.left_alias, join.scope)
    return left is not None and left == _relation(ir, join.right_alias, join.scope)


def _call_message(call: CallIR) -> str:
    shown = "TABLESAMPLE" if call.name == "tablesample" else f"{call.name}()"
    return (f"`{shown}` {_CALL_WHAT[call.category]}: a stream and its backfill would give "
            f"different rows{_where(call.scope)}")


def _window_message(fn: WindowFnIR) -> str:
    if fn.function == "row_number":
        return (f"`row_number()` over a stream is only allowed as the dedup pattern "
                f"`row_number() OVER (...) = 1`{_where(fn.scope)}")
    return (f"window function `{fn.function}() OVER (...)` over a stream needs every earlier row "
            f"of its partition (unbounded state){_where(fn.scope)}")


def _clause_message(clause: ClauseIR) -> str:
    return _CLAUSE_WHAT[clause.clause] + _where(clause.scope)


def check(ir: ModelIR, mode: Mode | None = None) -> list[Diagnostic]:
    """All findings for `ir` in `mode` (default: the mode it was analyzed in), in file order."""
    mode = mode or ir.mode
    sink = DiagnosticSink()
    for location, what, fix in stream_findings(ir):
        if mode == "stream":
            sink.error(f"model `{ir.model}`: {what}", location, fix)
        else:
            sink.warning(f"model `{ir.model}` cannot stream: {what}", location, fix)
    _model_findings(ir, sink)
    return sorted(sink.items, key=_order)


def stream_input_findings(ir: ModelIR, materialized: str, mode: Mode) -> list[Diagnostic]:
    """A `streaming_table` that reads no stream input cannot run in stream mode: an error there
    (so `check` reports it, and `run --mode stream --full-refresh` stops before dropping
    anything: docs/semantics.md, the full-refresh paragraph); its batch plan still backfills it."""
    if mode != "stream" or materialized != "streaming_table" or any(
            i.is_stream for i in ir.inputs):
        return []
    read = ir.reads[0] if ir.reads else None
    where = (read.location if read else None) or ir.location or Location(ir.path)
    shown = ", ".join(f"`{i.relation}`" for i in ir.inputs if i.relation != "sqlflow.commit_log")
    return [Diagnostic(
        f"model `{ir.model}` is a `streaming_table` but reads no stream input "
        f"({'it reads ' + shown if shown else 'it reads no table'}): its stream has nothing to read",
        where, "read an event source (a source table with `event_time` in `meta.sqlflow`) or a "
               "`streaming_table` model, or materialize the model as `table`")]


def _model_findings(ir: ModelIR, sink: DiagnosticSink) -> None:
    _dim_join_findings(ir, sink)
    names = [c.name for c in ir.outputs]
    if ir.outputs_complete:
        for col in ir.partition_by:
            if col not in names:
                sink.error(f"model `{ir.model}`: partition column `{col}` (config `partition_by`) "
                           "is not a column of the query", ir.location,
                           f"select it (e.g. `to_date(<event time>) AS {col}`); {did_you_mean(col, names)}")
    for read in ir.unresolved:
        sink.warning(f"model `{ir.model}` reads `{read.input.relation}`, which is neither a "
                     "`ref()` nor a `source()`; it is read as a static table", read.location,
                     "use `{{ ref('...') }}` or `{{ source('...', '...') }}`")
    for join in ir.joins:
        if join.interval is not None and join.kind == "interval" and join.interval.empty:
            sink.warning(f"model `{ir.model}`: the time range of the join of `{join.left_alias}` "
                         f"and `{join.right_alias}` is empty, so it never matches", join.location,
                         "check the order of the BETWEEN bounds")


def _order(d: Diagnostic) -> tuple:
    loc = d.location or Location("")
    return (loc.path, loc.line, loc.col, d.severity, d.message)


def _dim_join_findings(ir: ModelIR, sink: DiagnosticSink) -> None:
    """A dimension join (docs/design.md §2.3) must be in the model query, inner or left, joined to the
    FROM table when inner (its `dim_missing` rows are that table's rows), and select p*."""
    root = ir.ast.args.get("from_") if ir.ast is not None else None
    from_alias = root.this.alias_or_name if root is not None else None
    for d in ir.dim_joins:
        if d.scope != "the model query":
            sink.error(f"model `{ir.model}`: dim_join of `{d.relation}` is inside a subquery or CTE",
                       d.location, "use dim_join in the model's main SELECT, joined to its FROM table")
            continue
        if d.join_type not in ("inner", "left"):
            sink.error(f"model `{ir.model}`: dim_join of `{d.relation}` is a {d.join_type} join",
                       d.location, "use 'inner' (missing partitions quarantined) or 'left' (padded)")
        if d.join_type == "inner" and d.fact_alias != from_alias:
            sink.error(f"model `{ir.model}`: inner dim_join of `{d.relation}` takes its date from "
                       f"`{d.fact_alias}`, not from the FROM table `{from_alias}`", d.location,
                       f"pass fact_alias='{from_alias}' and a fact_date over its columns")
        if d.lineage is None:
            sink.error(f"model `{ir.model}`: dim_join of `{d.relation}` does not select its chosen "
                       f"partition `{d.alias}.{d.partition_column}` (the lineage column of docs/design.md §2.3)",
                       d.location, f"select it, e.g. `{d.alias}.{d.partition_column} AS "
                       f"{d.alias}_{d.partition_column}`")
