"""The model IR: what `analyze` learned about one rendered model, as frozen, printable values.

The planner reads it to bind inputs and rewrite joins; `checks.check` reads it to decide what
cannot stream. Every finding carries the `Location` of the model file it came from. Nothing
here holds Spark or Jinja objects; only `ModelIR.ast` holds the sqlglot tree (and is left out
of `to_dict()`).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from sqlglot import exp

from sqlflow.errors import Location
from sqlflow.project.eventtime import EventTime, HasEventTime
from sqlflow.project.runmode import Mode


def ast_field(default: Any = None) -> Any:
    """A field holding a sqlglot node: not compared, not printed, not in `to_dict()`."""
    return field(default=default, compare=False, repr=False, metadata={"ast": True})
JoinKind = Literal["interval", "stream_static", "static_static", "invalid"]


@dataclass(frozen=True)
class InputRel(HasEventTime):
    """One relation the model reads, as rendered in its SQL (`dw.stg_ad_clicks`, `ods.t`).

    `streaming` says whether it is read as a stream in the mode being compiled. `streamable`
    says whether it would be a stream in stream mode (an event source, a `streaming_table`
    model); None means "same as `streaming`". Pass it in batch mode so `check` can warn about
    what would not stream; the IR classifies joins and aggregations by it. `columns`, when
    known (declared in yml), lets unqualified column names resolve in joins.
    """

    relation: str
    name: str
    kind: Literal["source", "model"]
    streaming: bool
    time: EventTime = EventTime()
    partition_by: tuple[str, ...] = ()
    streamable: bool | None = None
    columns: tuple[str, ...] = ()
    ready_marker: str | None = None

    @property
    def is_stream(self) -> bool:
        """A stream in stream mode: what the stream-safety analysis reasons about."""
        return self.streaming if self.streamable is None else self.streamable


@dataclass(frozen=True)
class TableRead:
    """A table in a FROM/JOIN: its alias in its scope, and the input it binds to."""

    alias: str
    scope: str
    input: InputRel
    location: Location | None = None


@dataclass(frozen=True)
class IntervalBound:
    """Bounds of `right.right_time - left.left_time`, in microseconds, exactly as written.

    `None` means unbounded on that side. Strict `<`/`>` stay strict (`*_inclusive=False`):
    the predicate is evaluated exactly as written at microsecond precision (docs/design.md §2.2).

        >>> b = IntervalBound("imp_ts", "click_ts", 0, 20 * 60 * 10**6)
        >>> b.contains(0), b.contains(20 * 60 * 10**6 + 1)
        (True, False)
        >>> b.predicate_sql("i", "c")
        'c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 20 MINUTES'
    """

    left_time: str
    right_time: str
    lower_us: int | None
    upper_us: int | None
    lower_inclusive: bool = True
    upper_inclusive: bool = True

    @property
    def bounded(self) -> bool:
        return self.lower_us is not None and self.upper_us is not None

    @property
    def empty(self) -> bool:
        """True when no delta satisfies both bounds: the join can never match."""
        if not self.bounded:
            return False
        assert self.lower_us is not None and self.upper_us is not None
        if self.lower_us == self.upper_us:
            return not (self.lower_inclusive and self.upper_inclusive)
        return self.lower_us > self.upper_us

    def contains(self, delta_us: int) -> bool:
        """Whether a right row `delta_us` after the left row satisfies the bound."""
        lo, hi = self.lower_us, self.upper_us
        if lo is not None and (delta_us < lo or (delta_us == lo and not self.lower_inclusive)):
            return False
        if hi is not None and (delta_us > hi or (delta_us == hi and not self.upper_inclusive)):
            return False
        return True

    def predicate_sql(self, left_alias: str, right_alias: str) -> str:
        """The bound as Spark SQL, microsecond literals, inclusive bounds as `BETWEEN`."""
        r = f"{right_alias}.{self.right_time}"
        l_ = f"{left_alias}.{self.left_time}"

        def shifted(us: int) -> str:
            return shifted_sql(l_, us)

        if self.bounded and self.lower_inclusive and self.upper_inclusive:
            assert self.lower_us is not None and self.upper_us is not None
            return f"{r} BETWEEN {shifted(self.lower_us)} AND {shifted(self.upper_us)}"
        parts = []
        if self.lower_us is not None:
            parts.append(f"{r} {'>=' if self.lower_inclusive else '>'} {shifted(self.lower_us)}")
        if self.upper_us is not None:
            parts.append(f"{r} {'<=' if self.upper_inclusive else '<'} {shifted(self.upper_us)}")
        return " AND ".join(parts) or "TRUE"


_UNITS = (("DAYS", 86_400_000_000), ("HOURS", 3_600_000_000), ("MINUTES", 60_000_000),
          ("SECONDS", 1_000_000), ("MILLISECONDS", 1_000), ("MICROSECONDS", 1))


def shifted_sql(column: str, us: int) -> str:
    """`column ± INTERVAL n UNIT` in the coarsest unit that is exact.

        >>> shifted_sql("i.ts", -90_000_000), shifted_sql("i.ts", 1_500), shifted_sql("i.ts", 0)
        ('i.ts - INTERVAL 90 SECONDS', 'i.ts + INTERVAL 1500 MICROSECONDS', 'i.ts')
    """
    if us == 0:
        return column
    name, size = next((n, s) for n, s in _UNITS if abs(us) % s == 0)
    return f"{column} {'+' if us > 0 else '-'} INTERVAL {abs(us) // size} {name}"


@dataclass(frozen=True)
class JoinIR:
    """One join, classified. `left_alias` is the source on the left the right side is keyed to.

    `kind`: `interval` (two streams, an equality key and a bounded range on both event-time
    columns), `stream_static`, `static_static`, or `invalid` (`reason` says why, `fix` how).
    """

    scope: str
    index: int
    kind: JoinKind
    join_type: str
    left_alias: str
    right_alias: str
    left_streaming: bool
    right_streaming: bool
    keys: tuple[tuple[str, str], ...] = ()
    interval: IntervalBound | None = None
    reason: str = ""
    fix: str = ""
    notes: tuple[str, ...] = ()
    location: Location | None = None
    node: exp.Join | None = ast_field()


@dataclass(frozen=True)
class DimJoinIR:
    """A dimension join with fallback partitions (docs/design.md §2.3), as `macros/dim_join.sql` writes it.

    `fact_date` is the SQL of the fact's date d, `ready` the SQL of the subquery mapping each
    day to its chosen partition p* (`__sqlflow_day`, `__sqlflow_p`) over the commit log;
    `lineage` the output column that carries p* (None when the model does not select it).
    """

    alias: str
    relation: str
    join_type: str
    fact_alias: str
    fact_date: str
    partition_column: str
    max_fallback: int
    ready: str
    lineage: str | None = None
    scope: str = ""
    location: Location | None = None
    node: exp.Join | None = ast_field()


@dataclass(frozen=True)
class WindowSpecIR:
    """An event-time window call in a GROUP BY: `window(ts, '1 hour'[, '5 minutes'])`."""

    function: str
    time_column: str
    duration: str
    slide: str | None = None


@dataclass(frozen=True)
class AggIR:
    """A GROUP BY, a global aggregate or a SELECT DISTINCT, and what bounds its state.

    `kind`: `window` / `session_window` (an event-time window is a key), `time_partition`
    (a key is an event-time partition such as `dt`, `to_date(ts)`, `date_trunc('hour', ts)`),
    `event_time` (the event time itself is a key), or `unbounded`.
    """

    scope: str
    streaming: bool
    group_keys: tuple[str, ...]
    kind: Literal["window", "session_window", "time_partition", "event_time", "unbounded"]
    time_key: str | None = None
    window: WindowSpecIR | None = None
    distinct: bool = False
    reason: str = ""
    fix: str = ""
    location: Location | None = None
    node: exp.Select | None = ast_field()


@dataclass(frozen=True)
class WindowFnIR:
    """A window function call (`... OVER (...)`); `dedup` when it is the allowed row_number pattern."""

    scope: str
    streaming: bool
    function: str
    partition_by: tuple[str, ...]
    order_by: tuple[str, ...]
    dedup: bool = False
    fix: str = ""
    location: Location | None = None
    node: exp.Window | None = ast_field()


@dataclass(frozen=True)
class DedupIR:
    """`row_number() OVER (PARTITION BY keys ORDER BY order_by) = 1`: keep one row per key."""

    scope: str
    streaming: bool
    keys: tuple[str, ...]
    order_by: tuple[str, ...]
    row_number: str
    form: Literal["subquery", "qualify"]
    keys_include_time: bool = False
    location: Location | None = None
    node: exp.Window | None = ast_field()


@dataclass(frozen=True)
class CallIR:
    """A call whose result differs between a stream and its backfill (`rand()`, `now()`, ...)."""

    name: str
    category: Literal["random", "clock", "origin", "row_id", "order"]
    scope: str
    streaming: bool
    fix: str = ""
    location: Location | None = None


@dataclass(frozen=True)
class ClauseIR:
    """A clause that needs the whole input at once: ORDER BY, LIMIT, UNION (distinct), ..."""

    clause: Literal["order_by", "limit", "union_distinct", "intersect", "except", "subquery"]
    scope: str
    streaming: bool
    fix: str = ""
    location: Location | None = None


@dataclass(frozen=True)
class OutputColumn:
    """A column the model writes; `event_time` when it carries an input's event time,
    `time_partition` when it is an event-time bucket (`dt`, `window`, `date_trunc(...)`)."""

    name: str
    event_time: bool = False
    time_partition: bool = False
    origin: str | None = None


@dataclass(frozen=True)
class ModelIR:
    """Everything the planner and the checks need to know about one model."""

    model: str
    path: str
    mode: Mode
    ast: exp.Expr = ast_field()
    sql: str = field(default="", repr=False)
    streaming: bool = False
    reads: tuple[TableRead, ...] = ()
    unresolved: tuple[TableRead, ...] = ()
    joins: tuple[JoinIR, ...] = ()
    dim_joins: tuple[DimJoinIR, ...] = ()
    aggregations: tuple[AggIR, ...] = ()
    windows: tuple[WindowFnIR, ...] = ()
    dedups: tuple[DedupIR, ...] = ()
    nondeterministic: tuple[CallIR, ...] = ()
    clauses: tuple[ClauseIR, ...] = ()
    outputs: tuple[OutputColumn, ...] = ()
    outputs_complete: bool = True
    event_time: str | None = None
    partition_by: tuple[str, ...] = ()
    location: Location | None = None

    @property
    def tables(self) -> dict[str, InputRel]:
        """alias -> input for every table the model reads (first binding of an alias wins)."""
        out: dict[str, InputRel] = {}
        for read in self.reads + self.unresolved:
            out.setdefault(read.alias, read.input)
        return out

    @property
    def inputs(self) -> tuple[InputRel, ...]:
        """The distinct inputs, in the order the SQL first reads them."""
        seen: dict[str, InputRel] = {}
        for read in self.reads + self.unresolved:
            seen.setdefault(read.input.relation, read.input)
        return tuple(seen.values())

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able, deterministic view (no AST, no SQL text; locations as `path:line:col`)."""
        out = _plain(self)
        del out["sql"]
        out["tables"] = {k: _plain(v) for k, v in self.tables.items()}
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)


def _plain(value: Any) -> Any:
    if isinstance(value, Location):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)
                if not f.metadata.get("ast")}
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value
