"""Analyze: one rendered model's SQL -> `ModelIR` (inputs, joins, aggregations, windows,
dedups, determinism, whole-input clauses, output columns and event time).

The passes live in `sqlflow.analysis`, one concern each; this module parses once, builds the
scope facts once, runs every pass over every scope and assembles the IR. It never decides
what is an error: `sqlflow.analysis.stream_safety.check` does, from the IR, per mode.

Decisions where docs/design.md §2.2/§2.8 is silent (for docs/semantics.md):
- An interval join needs its equality key and its time range between the same pair: the right
  side and one stream on the left. `r.t = l.t` is both a key and a `[0, 0]` range. For inner
  and comma joins, WHERE conjuncts count as join conditions (Spark evaluates them the same
  way); for outer joins only the ON clause does.
- A stream-static outer join that preserves the static side (`dim LEFT JOIN stream`,
  `stream RIGHT|FULL JOIN dim`, `dim LEFT SEMI|ANTI JOIN stream`) is invalid: the static rows
  would be emitted again with every micro-batch.
- An aggregation over a stream is bounded by a key that is `window`/`session_window` of the
  event time, the event time itself, a date of it (`to_date`, `date`, `CAST AS DATE`,
  `date_trunc`, `date_format` with a year), or the input's first `partition_by` column
  (levels go coarse to fine; `hour` alone repeats daily). ROLLUP/CUBE/GROUPING SETS keys do
  not count: their grand-total set has no time key. SELECT DISTINCT is an aggregation.
- Non-deterministic also means order-dependent (`first`, `last`, `any_value`, unsorted
  `collect_list`/`collect_set`) and `TABLESAMPLE`; reported anywhere in a model that reads a
  stream, static CTEs included (they are re-evaluated per micro-batch).
- UNION (distinct), INTERSECT, EXCEPT of streams and subquery expressions over a stream are
  rejected like global ORDER BY / LIMIT: they need the whole input.
- Names resolve case-insensitively. An unqualified column resolves to the only source in
  scope, or to the only one known to have it (its event time, first partition column, or
  declared `InputRel.columns`); otherwise it is ambiguous, and a finding that depends on it
  says so.

    >>> from sqlflow.analysis.ir import InputRel
    >>> from sqlflow.project.eventtime import EventTime
    >>> ins = {"ods.imp": InputRel("ods.imp", "ods.imp", "source", True, EventTime("imp_ts"))}
    >>> ir = analyze("SELECT i.imp_ts AS ts, i.ad FROM ods.imp i", model="m",
    ...              path="models/m.sql", inputs=ins, mode="stream")
    >>> ir.event_time, ir.streaming, [r.alias for r in ir.reads]
    ('ts', True, ['i'])
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from sqlglot import exp
from sqlglot.errors import OptimizeError
from sqlglot.optimizer.scope import Scope, walk_in_scope

from sqlflow.analysis.ephemeral import inline_ctes
from sqlflow.analysis.ir import InputRel, Mode, ModelIR, OutputColumn, TableRead
from sqlflow.analysis.passes.aggregates import aggregations
from sqlflow.analysis.passes.clauses import clauses
from sqlflow.analysis.passes.determinism import fix_for, nondeterministic_calls
from sqlflow.analysis.passes.dimjoins import dim_joins
from sqlflow.analysis.passes.joins import classify_joins
from sqlflow.analysis.passes.positions import Positions
from sqlflow.analysis.passes.scopes import ScopeFacts, ScopeInfo
from sqlflow.analysis.passes.windows import window_functions
from sqlflow.dialect import parse_with_tokens
from sqlflow.errors import Location, SqlflowError


def analyze(
    sql: str,
    *,
    model: str,
    path: str,
    inputs: Mapping[str, InputRel],
    mode: Mode,
    locate: Callable[[int, int], Location] | None = None,
    partition_by: tuple[str, ...] | list[str] = (),
    ctes: Sequence[tuple[str, str]] = (),
) -> ModelIR:
    """Parse the rendered `sql` of `model` and describe it. Raises `SqlflowError` only when the
    SQL cannot be read at all (syntax, not a query); every other finding is left for `check`.

    `inputs` maps each rendered relation name (`ods.t`, `dw.model`) to its `InputRel`;
    `locate(line, col)` maps a place in the rendered SQL to the model file (default: the same
    line and column of `path`); `partition_by` is the model's configured partition columns;
    `ctes` are the ephemeral models it reads, `(relation, rendered SQL)`, inlined in front.
    """
    ast, tokens = parse_with_tokens(sql, path=path, locate=locate)
    ast = inline_ctes(ast, ctes)
    if not isinstance(ast, exp.Query):
        raise SqlflowError(
            f"model `{model}` must be a SELECT query, not `{ast.key.upper()}`",
            location=Location(path),
            hint="write the model as one SELECT; sqlflow writes the table for you",
        )
    pos = Positions(sql, path, locate, tokens)
    try:
        facts = ScopeFacts(ast, dict(inputs))
    except OptimizeError as err:
        raise SqlflowError(f"model `{model}`: {err}", location=Location(path),
                           hint="give every table in a FROM/JOIN its own alias") from None
    found = _run_passes(facts, pos)
    reads = tuple(TableRead(a, facts.info(s).label, rel, pos.of(t)) for a, s, t, rel in facts.reads)
    unresolved = tuple(TableRead(a, facts.info(s).label, rel, pos.of(t)) for a, s, t, rel in facts.unresolved)
    streaming = any(r.input.is_stream for r in reads)
    root = facts.root_info
    assert root is not None
    return ModelIR(
        model=model,
        path=path,
        mode=mode,
        ast=ast,
        sql=sql,
        streaming=streaming,
        reads=reads,
        unresolved=unresolved,
        joins=tuple(found["joins"]),
        dim_joins=tuple(dim_joins(ast, pos.of)),
        aggregations=tuple(found["aggregations"]),
        windows=tuple(found["windows"]),
        dedups=tuple(found["dedups"]),
        nondeterministic=tuple(_calls(ast, facts, pos, streaming)),
        clauses=tuple(found["clauses"]),
        outputs=tuple(
            OutputColumn(name, col.event_time, col.bucket is not None, col.origin)
            for name, col in root.output.columns.items()
        ),
        outputs_complete=root.output.complete,
        event_time=root.output.event_time,
        partition_by=tuple(partition_by),
        location=Location(path),
    )


def _run_passes(facts: ScopeFacts, pos: Positions) -> dict[str, list]:
    found: dict[str, list] = {k: [] for k in ("joins", "aggregations", "windows", "dedups", "clauses")}
    for scope in _source_order(facts):
        info = facts.info(scope)
        found["joins"] += classify_joins(facts, info, pos)
        found["aggregations"] += aggregations(facts, info, pos)
        fns, dedups = window_functions(facts, info, pos)
        found["windows"] += fns
        found["dedups"] += dedups
        found["clauses"] += clauses(facts, info, pos)
    return found


def _source_order(facts: ScopeFacts) -> list:
    """Scopes in the order their SQL appears (CTEs first, as written), for stable output."""
    def key(scope: Scope) -> tuple[int, bool]:
        start = min((n.meta["start"] for n in scope.expression.walk() if "start" in n.meta), default=0)
        return (start, scope.is_root)
    return sorted(facts.scopes, key=key)


def _calls(ast: exp.Expr, facts: ScopeFacts, pos: Positions, streaming: bool) -> list:
    owner: dict[int, ScopeInfo] = {}
    for scope in facts.scopes:
        for node in walk_in_scope(scope.expression):
            owner.setdefault(id(node), facts.info(scope))

    def scope_of(node: exp.Expr | None) -> tuple[str, bool]:
        while node is not None and id(node) not in owner:
            node = node.parent
        info = owner.get(id(node)) if node is not None else None
        return (info.label if info else "the model query", streaming)

    out = []
    for call in nondeterministic_calls(ast, pos, scope_of):
        info = next((i for i in facts.infos.values() if i.label == call.scope), facts.root_info)
        out.append(replace(call, fix=fix_for(call, facts.time_column(info) if info else None)))
    return out
