"""Plan: a model IR becomes a `BatchPlan` or a `StreamPlan`, plain frozen values.

Both come from the one sqlglot AST of the model. The modes differ only at the edges:
- batch reads every input as a static table, runs the model SQL and overwrites exactly the
  output partitions it computes; inputs that would stream (event sources and `streaming_table`
  models read by a `streaming_table` model) are read through the quarantine filter, as a clean
  view (`__sqlflow_clean__<db>__<table>`), so late, future and malformed rows leave both modes
  at the same place (`sqlflow.runtime.quarantine`);
- stream (`incremental`, the default) binds each stream input to a view of the micro-batch's
  new rows and, for joins of streams, rewrites the statement by the delta rule
  (`ΔL ⋈ (L_old... )`, see `sqlflow.planning.delta.rule`), appending exactly once per batch id;
- stream (`stateful`) binds each stream input to a streaming view with a watermark of
  `allowed_lateness + skew_margin` and runs the model SQL unchanged.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from sqlglot import exp

from sqlflow.analysis.ir import InputRel, JoinIR, ModelIR
from sqlflow.dialect import DIALECT
from sqlflow.planning.incremental_model import IncrementalRun
from sqlflow.project.eventtime import EventTime, HasEventTime
from sqlflow.project.runmode import AVAILABLE_NOW, Mode
from sqlflow.rendering.sourcemap import SourceMap

PlanKind = Literal["batch", "stream", "routed"]
Write = Literal["overwrite_partitions", "append_once", "replace", "view"]  # how a Sink writes
COMMIT_LOG = "sqlflow.commit_log"  # docs/design.md §2.5; `dim_join` reads READY from it


def source_map_field() -> Any:
    """The model's rendered SQL and source map, kept so a Spark analysis error of the plan's SQL
    can name the model line (`sqlflow.runtime.analysis_errors`): not compared, not printed, not
    in `to_dict()` (the artifacts)."""
    return field(default=None, compare=False, repr=False, metadata={"runtime_only": True})


@dataclass(frozen=True)
class Watermark:
    """Spark's watermark for the `stateful` strategy: column and delay in microseconds."""

    column: str
    delay_us: int

    @property
    def delay(self) -> str:
        return f"{self.delay_us} microseconds"


@dataclass(frozen=True)
class PruneRange:
    """Which older rows of an input a micro-batch can still match (incremental joins).

    Rows of this input with `column` in `[min(other.other_column) + lower_us,
    max(other.other_column) + upper_us]`, where `other` is the micro-batch's new rows of the
    other join side. The runtime computes min/max per micro-batch.
    """

    column: str
    other: str
    other_column: str
    lower_us: int
    upper_us: int


@dataclass(frozen=True)
class KeyPair:
    """An equality key of an incremental join: a row of this input matches a row of `other`
    only where its `column` equals that row's `other_column` (the join's condition says so),
    so the older rows a micro-batch can match are those whose `column` is among its new rows
    of `other`'s (`sqlflow.runtime.incremental.keyed`). Either may name an expression, which
    the runtime does not look up by."""

    column: str
    other: str
    other_column: str


@dataclass(frozen=True)
class SourceBinding(HasEventTime):
    """How one input of the model is read in this plan."""

    relation: str  # as written in the model's SQL: `ods.ods_ad_impressions`, `dw.stg_x`
    input: str  # the ref'd model or `source.table`
    read: Literal["static", "stream"]
    kind: Literal["source", "model"] = "source"  # a yml source table or another model's table
    view: str | None = None  # temp view the plan's SQL reads instead of `relation`
    old_view: str | None = None  # incremental join: this input's older rows
    pending_view: str | None = None  # incremental outer join: this side's closed, unmatched rows
    time: EventTime = EventTime()  # the input's event-time block, as its source declares it
    watermark: Watermark | None = None
    prune: tuple[PruneRange, ...] = ()
    keys: tuple[KeyPair, ...] = ()  # incremental join: equality keys beside `prune`'s ranges
    max_files_per_trigger: int | None = None


@dataclass(frozen=True)
class DimBinding:
    """A dimension join (docs/design.md §2.3) as the runtime pins it: `relation` is read through `view`
    at one Delta version per micro-batch or backfill; `lineage` is the output column with p*."""

    relation: str
    view: str
    alias: str
    join_type: str
    partition_column: str
    max_fallback: int
    lineage: str
    ready_marker: str | None = None


@dataclass(frozen=True)
class DimPlan:
    """What a model with dimension joins needs at run time, beyond its SQL.

    `ready_view`: the commit log, pinned, that every READY subquery reads. `days_sql`: the
    distinct fact dates of the input per dim i (`__sqlflow_d<i>`) with the partition chosen
    (`__sqlflow_p<i>`, NULL: none ready). `missing_sql`: the fact rows an inner dim join drops for want of a ready
    partition (the fact's columns plus `__sqlflow_dim`, the first dim missing), or None.
    `fact` is the relation of the fact input (its event and ingest times fill quarantine rows).
    """

    dims: tuple[DimBinding, ...]
    ready_view: str
    days_sql: str
    missing_sql: str | None
    fact: str


@dataclass(frozen=True)
class Sink:
    """Where the rows go. `overwrite_partitions`: replace exactly the partitions computed;
    `append_once`: Delta append made idempotent per (query, batch id); `replace`: whole table;
    `view`: a view over the SQL. `owner` and `role` are recorded in the table's properties
    when it is created, and a write to a table another model (or nobody) owns is refused
    (docs/semantics.md, "Table ownership"); `origin` is the config line that names the table."""

    table: str
    write: Write
    partition_by: tuple[str, ...] = ()
    checkpoint: str | None = None
    file_format: str = "delta"
    owner: str | None = None
    role: str = "sink"
    origin: str = ""
    # dbt's own materializations: a table at this relation without a sqlflow owner is the one
    # dbt built for the model, taken over as dbt would replace it (sqlflow.planning.formats)
    adopt_unowned: bool = False
    # partition columns whose values are directories by construction: not checked per row
    # (sqlflow.planning.partition_safety)
    safe_partitions: tuple[str, ...] = ()


@dataclass(frozen=True)
class BatchPlan:
    """A backfill: `sql` over static reads, written by `sink`.

    `backfill_margin_us`: a backfill of output dates `[start, end]` (the sink's first partition
    column) reads the rows of each clean-view input whose event time lies in
    `[start - margin, end + 1 day + margin)`; None when the output date does not follow one
    input's event time through interval joins only, so a range backfill reads inputs whole.
    """

    model: str
    path: str
    materialized: str
    sql: str
    sources: tuple[SourceBinding, ...]
    sink: Sink
    quarantine: str
    event_time: str | None = None
    backfill_margin_us: int | None = None
    dim: DimPlan | None = None
    mode: Literal["batch"] = "batch"
    warnings: tuple[str, ...] = ()
    quarantine_origin: str = ""  # the config line naming the quarantine table (ownership)
    # an `incremental` model: its run when the table exists (sqlflow.planning.incremental_model)
    incremental: IncrementalRun | None = None
    source_map: SourceMap | None = source_map_field()

    kind: ClassVar[PlanKind] = "batch"

    @property
    def members(self) -> tuple[str, ...]:
        """The models this plan builds."""
        return (self.model,)

    @property
    def outputs(self) -> tuple[tuple[str, str], ...]:
        """(table, declaring model file) of every table the plan writes rows to (not a view)."""
        return () if self.sink.write == "view" else ((self.sink.table, self.path),)

    def to_dict(self) -> dict[str, Any]:
        return _to_dict(self)


@dataclass(frozen=True)
class RestartPolicy:
    """How the stream service restarts a plan's failed query (config `max_restarts`,
    `restart_window`, `restart_backoff`): at most `max_restarts` restarts within `window_s`
    seconds, the n-th after `backoff_s * 2**n` seconds."""

    max_restarts: int = 3
    window_s: float = 600.0
    backoff_s: float = 1.0


@dataclass(frozen=True)
class StreamPlan:
    model: str
    path: str
    materialized: str
    strategy: Literal["incremental", "stateful"]
    sql: str  # per micro-batch (incremental) or the streaming query (stateful)
    sources: tuple[SourceBinding, ...]
    sink: Sink
    quarantine: str
    trigger: str
    padding_sql: tuple[str, ...] = ()  # incremental outer joins: emits closed unmatched rows
    hash_join_sql: str | None = None  # incremental inner joins: `sql` for a small micro-batch (delta/hash_join.py)
    event_time: str | None = None
    dim: DimPlan | None = None
    mode: Mode = "stream"
    warnings: tuple[str, ...] = ()
    idle_timeout_us: int | None = None  # config `idle_timeout`: close what an idle input holds open
    flush_margin_us: int = 0  # stateful: sum of the stream joins' widest bounds (end-of-input flush)
    quarantine_origin: str = ""  # the config line naming the quarantine table (ownership)
    restarts: RestartPolicy = RestartPolicy()
    source_map: SourceMap | None = source_map_field()

    kind: ClassVar[PlanKind] = "stream"

    @property
    def members(self) -> tuple[str, ...]:
        return (self.model,)

    @property
    def outputs(self) -> tuple[tuple[str, str], ...]:
        return ((self.sink.table, self.path),)

    @property
    def checkpoint_setting(self) -> tuple[str | None, str]:
        """(configured checkpoint, default folder name under `.sqlflow/checkpoints/`)."""
        return self.sink.checkpoint, self.model

    def to_dict(self) -> dict[str, Any]:
        return _to_dict(self)


def _to_dict(plan: Plan) -> dict[str, Any]:
    return {"kind": type(plan).__name__, **_fields(plan)}


def _fields(value: Any) -> Any:
    """`dataclasses.asdict` without the runtime-only fields, at every level (a routed plan's
    targets carry source maps too)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _fields(getattr(value, f.name)) for f in dataclasses.fields(value)
                if not f.metadata.get("runtime_only")}
    if isinstance(value, (list, tuple)):
        return type(value)(_fields(v) for v in value)
    if isinstance(value, dict):
        return {k: _fields(v) for k, v in value.items()}
    return value


def spark_sql(tree: exp.Expr) -> str:
    """The Spark SQL text of a tree, formatted the same way in every plan; constant intervals
    in time arithmetic as single literals (`sqlflow.planning.interval_sql`)."""
    from sqlflow.planning.interval_sql import normalize_intervals

    return normalize_intervals(tree).sql(dialect=DIALECT, pretty=True)


def view_name(prefix: str, relation: str) -> str:
    """A temp view name for a relation: `__sqlflow_delta__ods__ods_ad_impressions`."""
    return f"__sqlflow_{prefix}__" + relation.replace(".", "__").replace("`", "")


def quarantine_table(sink_table: str, override: str | None) -> str:
    if override:
        return override if "." in override else f"{sink_table.rsplit('.', 1)[0]}.{override}"
    return f"{sink_table}__quarantine"


def streams_of(ir: ModelIR) -> list[InputRel]:
    """The stream inputs of a model in this mode, in the order they are first read."""
    seen: dict[str, InputRel] = {}
    for read in ir.reads:
        if read.input.streaming and read.input.relation not in seen:
            seen[read.input.relation] = read.input
    return list(seen.values())


def stream_joins(ir: ModelIR) -> list[JoinIR]:
    return [j for j in ir.joins if j.left_streaming and j.right_streaming]


def bind_relations(tree: exp.Expr, views: dict[str, str]) -> exp.Expr:
    """A copy of `tree` whose tables named in `views` read the named view (alias kept).

        >>> from sqlflow.dialect import parse
        >>> bind_relations(parse("SELECT a FROM ods.t AS x"), {"ods.t": "v"}).sql()
        'SELECT a FROM v AS x'
    """
    def swap(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Table) and _table_key(node) in views:
            return exp.to_table(views[_table_key(node)]).as_(node.alias or node.name)
        return node

    return tree.copy().transform(swap)


def _table_key(table: exp.Table) -> str:
    parts = [p for p in (table.db, table.name) if p]
    return ".".join(parts).lower()


# --- fan-out fusion: one read, many targets (docs/design.md §2.4, §3) ---------------------------------------

@dataclass(frozen=True)
class RouteTarget:
    """One member model of a routed group: its SQL over the group's one input view, its sink
    and its file budget (`target_file_size` bytes per file, at most `max_files` per partition)."""

    model: str
    path: str
    sql: str
    sink: Sink
    target_file_size: int
    max_files: int | None = None
    source_map: SourceMap | None = source_map_field()
    shared_sql: str | None = None  # `sql` reading the group's shared calls (`shared_calls`)


@dataclass(frozen=True)
class RouteCommit:
    """When and how a routed group commits an output partition `(date_column, hour_column)`
    (docs/design.md §2.5): once the input's ingest frontier passes hour end + `allowed_lateness_us`."""

    date_column: str
    hour_column: str
    allowed_lateness_us: int
    success_marker: bool = True
    notify_url: str | None = None
    notify_command: str | None = None


@dataclass(frozen=True)
class RoutedPlan:
    """Sibling models that only filter/project the same parent, fused into ONE read.

    `model` is the group's name. In stream mode one query with one checkpoint writes every
    target each micro-batch; in batch mode the input is read (and quarantined) once, cached,
    and every target's SQL runs over it. `dbt run` still builds each member as its own model.
    """

    model: str
    path: str
    materialized: str
    mode: Mode
    strategy: str
    sources: tuple[SourceBinding, ...]
    targets: tuple[RouteTarget, ...]
    quarantine: str
    commit: RouteCommit
    bytes_per_row: int
    trigger: str = AVAILABLE_NOW
    row_bytes: tuple[tuple[str, int], ...] = ()  # cold-start row size per sub-partition spec
    checkpoint: str | None = None
    event_time: str | None = None
    warnings: tuple[str, ...] = ()
    shared: tuple[tuple[str, str], ...] = ()  # (column, call): computed once per input row
    padding_sql: tuple[str, ...] = ()
    quarantine_origin: str = ""
    restarts: RestartPolicy = RestartPolicy()

    kind: ClassVar[PlanKind] = "routed"

    @property
    def members(self) -> tuple[str, ...]:
        return tuple(t.model for t in self.targets)

    @property
    def outputs(self) -> tuple[tuple[str, str], ...]:
        return tuple((t.sink.table, t.path) for t in self.targets)

    @property
    def checkpoint_setting(self) -> tuple[str | None, str]:
        return self.checkpoint, f"route__{self.model}"

    @property
    def sql(self) -> str:
        """Every target's statement, each headed by its model and table."""
        return ";\n".join(f"-- target {t.model} -> {t.sink.table}\n{t.sql.rstrip()}"
                          for t in self.targets)

    def to_dict(self) -> dict[str, Any]:
        return _to_dict(self)


Plan = BatchPlan | StreamPlan | RoutedPlan
"""Every plan kind; `kind` says which ("batch", "stream", "routed") and
`sqlflow.runtime.dispatch` is the one place that picks a runtime for it."""
