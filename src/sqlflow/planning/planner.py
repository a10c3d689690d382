"""Build a model's plan for one mode from its rendered SQL and its IR (see `sqlflow.planning.plan`)."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

from sqlglot import exp

from sqlflow.analysis.ir import InputRel, JoinIR, ModelIR
from sqlflow.errors import SqlflowError
from sqlflow.planning.formats import DBT_MATERIALIZATIONS, file_format
from sqlflow.planning.incremental_model import IncrementalRun, incremental_run
from sqlflow.planning.partition_safety import safe_partitions
from sqlflow.planning.plan import (
    COMMIT_LOG,
    BatchPlan,
    KeyPair,
    Mode,
    PruneRange,
    RestartPolicy,
    Sink,
    SourceBinding,
    StreamPlan,
    Watermark,
    Write,
    bind_relations,
    quarantine_table,
    spark_sql,
    stream_joins,
    streams_of,
    view_name,
)
from sqlflow.project.config import column_list, micros
from sqlflow.project.config_origin import config_line
from sqlflow.project.runmode import STATE_DIR

DEFAULT_TRIGGER = "10 seconds"


def build_plan(rendered: Any, ir: ModelIR, mode: Mode, *,
               warnings: tuple[str, ...] = ()) -> BatchPlan | StreamPlan:
    """The plan of one rendered model in `mode`; `ir` must be analyzed in the same mode.

    Only `streaming_table` models stream; every other materialization gets a batch plan in
    both modes (a `table` is rebuilt, a `view` created).
    """
    from sqlflow.planning.dimplan import dim_plan, pin

    config = rendered.config
    table = str(rendered.relation)
    unpinned, ir = ir, pin(ir)  # dimensions and READY through views pinned per run/micro-batch
    partition_by = column_list(config.partition_by)
    quarantine = quarantine_table(table, config.quarantine)
    raw = rendered.source_map.raw_lines if rendered.source_map else ()
    q_origin = str(config_line(rendered.path, "\n".join(raw), "quarantine"))
    if mode == "stream" and config.materialized == "streaming_table":
        plan = _stream_plan(rendered, ir, table, partition_by, quarantine, warnings)
        plan = dataclasses.replace(plan, quarantine_origin=q_origin)
        views = {b.relation: b.view for b in plan.sources if b.view}
        return dataclasses.replace(plan, dim=dim_plan(unpinned, views))
    writes: dict[str, Write] = {"streaming_table": "overwrite_partitions",
                                "incremental": "overwrite_partitions", "view": "view"}
    write = writes.get(config.materialized, "replace")
    if write == "overwrite_partitions" and not partition_by:
        write = "replace"
    sources = tuple(_batch_binding(i) for i in _inputs(ir))
    views = {b.relation: b.view for b in sources if b.view}
    return BatchPlan(
        model=rendered.name, path=rendered.path, materialized=config.materialized,
        sql=spark_sql(bind_relations(ir.ast, views)), sources=sources,
        sink=Sink(table, write, partition_by,
                  file_format=file_format(config.materialized, config.file_format),
                  owner=rendered.name, origin=_sink_origin(rendered),
                  adopt_unowned=config.materialized in DBT_MATERIALIZATIONS,
                  safe_partitions=safe_partitions(ir.ast, partition_by)),
        quarantine=quarantine, quarantine_origin=q_origin,
        event_time=config.event_time or ir.event_time,
        backfill_margin_us=backfill_margin(ir, partition_by) if views else None, warnings=warnings,
        dim=dim_plan(unpinned, views),
    )


def with_incremental(plan: BatchPlan, rendered: Any, ir: ModelIR) -> BatchPlan:
    """`plan` of an incremental model, with its run over the existing table: `rendered` and
    `ir` are the model rendered with `is_incremental()` true (`sqlflow.planning.incremental_model`).
    SqlflowError at the strategy's config line for a strategy dbt-spark refuses."""
    raw = rendered.source_map.raw_lines if rendered.source_map else ()
    origin = config_line(rendered.path, "\n".join(raw), "incremental_strategy", "file_format")
    views = {b.relation: b.view for b in plan.sources if b.view}
    found = incremental_run(rendered.config, spark_sql(bind_relations(ir.ast, views)),
                            plan.sink.file_format, origin)
    if not isinstance(found, IncrementalRun):
        raise SqlflowError(diagnostics=[found])
    return dataclasses.replace(plan, incremental=found)


def _sink_origin(rendered: Any) -> str:
    """The config line choosing the model's relation (alias or schema), else its file."""
    raw = rendered.source_map.raw_lines if rendered.source_map else ()
    return str(config_line(rendered.path, "\n".join(raw), "alias", "schema"))


def _batch_binding(i: InputRel) -> SourceBinding:
    """A static read; an input that would stream goes through the quarantine filter (a clean
    view), exactly as its micro-batches do in stream mode."""
    if i.is_stream and i.event_time:
        return SourceBinding(**_base(i, "static"), view=view_name("clean", i.relation))
    return _static(i)


def _stream_plan(rendered: Any, ir: ModelIR, table: str, partition_by: tuple[str, ...],
                 quarantine: str, warnings: tuple[str, ...]) -> StreamPlan:
    config = rendered.config
    streams = streams_of(ir)
    strategy = config.stream_strategy
    if strategy == "stateful":
        delay = micros(config.skew_margin)
        bindings = {
            s.relation: SourceBinding(
                **_base(s, "stream"), view=view_name("stream", s.relation),
                watermark=Watermark(s.event_time, s.allowed_lateness_us + delay)
                if s.event_time else None)
            for s in streams
        }
        sql = spark_sql(bind_relations(ir.ast, {r: b.view for r, b in bindings.items() if b.view}))
        padding: tuple[str, ...] = ()
        hashed: str | None = None
        flush = sum(max(abs(j.interval.lower_us), abs(j.interval.upper_us)) for j in stream_joins(ir)
                    if j.interval is not None  # and bounded:
                    and j.interval.lower_us is not None and j.interval.upper_us is not None)
    else:
        bindings, sql, padding, hashed = _incremental(ir, streams)
        flush = 0
    sources = tuple(bindings.get(i.relation) or _static(i) for i in _inputs(ir))
    return StreamPlan(
        model=rendered.name, path=rendered.path, materialized=config.materialized,
        strategy=strategy, sql=sql, sources=sources,
        sink=Sink(table, "append_once", partition_by,
                  checkpoint=f"{STATE_DIR}/checkpoints/{rendered.name}",
                  file_format=file_format(config.materialized, config.file_format),
                  owner=rendered.name,
                  origin=_sink_origin(rendered),
                  safe_partitions=safe_partitions(ir.ast, partition_by)),
        quarantine=quarantine, trigger=_trigger(config.trigger), padding_sql=padding,
        hash_join_sql=hashed,
        idle_timeout_us=micros(config.idle_timeout) if config.idle_timeout is not None else None,
        event_time=config.event_time or ir.event_time, warnings=warnings,
        flush_margin_us=flush,
        restarts=RestartPolicy(config.max_restarts, config.restart_window.total_seconds(),
                               config.restart_backoff.total_seconds()),
    )


def _incremental(ir: ModelIR, streams: list[InputRel]
                 ) -> tuple[dict[str, SourceBinding], str, tuple[str, ...], str | None]:
    """Bind streams to micro-batch delta views; joins of streams by the delta rule. Also the
    padding queries of outer joins, and an inner join's SQL for small micro-batches
    (`delta.hash_join`)."""
    from sqlflow.planning.delta.hash_join import hash_join_sql
    from sqlflow.planning.delta.rule import DeltaBinding, delta_rewrite, padding_queries

    joins = stream_joins(ir)
    prunes, keys = _prune_ranges(ir, joins)
    joined = {r for j in joins for r in (_rel(ir, j.left_alias, j), _rel(ir, j.right_alias, j))}
    if None in joined:  # a join side is a CTE or subquery: every stream may need its old rows
        joined = {s.relation for s in streams} if joins else set()
    bindings = {
        s.relation: SourceBinding(
            **_base(s, "stream"), view=view_name("delta", s.relation),
            old_view=view_name("old", s.relation) if s.relation in joined else None,
            prune=prunes.get(s.relation, ()), keys=keys.get(s.relation, ()))
        for s in streams
    }
    deltas = {r: DeltaBinding(r, b.view, b.old_view or b.view) for r, b in bindings.items() if b.view}
    if not joined:
        views = {r: b.view for r, b in bindings.items() if b.view}
        return bindings, spark_sql(bind_relations(ir.ast, views)), (), None
    rewritten = delta_rewrite(ir.ast, deltas)
    pending = {r: view_name("pending", r) for r in deltas}
    padded = padding_queries(ir.ast, deltas, pending)
    padding = tuple(spark_sql(padded[r]) for r in sorted(padded))
    for r in padded:
        bindings[r] = dataclasses.replace(bindings[r], pending_view=pending[r])
    hashed = None if padded else hash_join_sql(
        rewritten, {d.delta_view for d in deltas.values()},
        {v for d in deltas.values() for v in (d.delta_view, d.old_view)})
    return bindings, spark_sql(rewritten), padding, spark_sql(hashed) if hashed is not None else None


def _prune_ranges(ir: ModelIR, joins: list[JoinIR]
                  ) -> tuple[dict[str, tuple[PruneRange, ...]], dict[str, tuple[KeyPair, ...]]]:
    """For each joined stream, the older rows each other side's new rows can match
    (`delta_rule.pruning_ranges`), named by the relations the runtime reads; and the equality
    keys of the same joins, by which the runtime may look those rows up."""
    from sqlflow.planning.delta.rule import pruning_ranges

    out: dict[str, list[PruneRange]] = {}
    keys: dict[str, list[KeyPair]] = {}
    for j in joins:
        if j.kind != "interval" or j.interval is None or not j.interval.bounded:
            continue
        b = j.interval
        assert b.lower_us is not None and b.upper_us is not None  # bounded
        left, right = _rel(ir, j.left_alias, j), _rel(ir, j.right_alias, j)
        if left is None or right is None:
            continue  # a side read through a CTE or subquery: its older rows are read unpruned
        # An empty range (lower above upper) matches nothing: its ranges are those of the point
        # `lower`, which read few old rows and close a padded row once `t + lower` is past, as
        # for any other bound (docs/semantics.md, "Outer interval joins in stream mode").
        upper = max(b.lower_us, b.upper_us)
        ranges = pruning_ranges((b.left_time, b.right_time, b.lower_us, upper))
        for rel, other, m in ((left, right, ranges.old_left), (right, left, ranges.old_right)):
            out.setdefault(rel, []).append(PruneRange(m.column, other, m.by, m.lower_us, m.upper_us))
        for lkey, rkey in j.keys:
            keys.setdefault(left, []).append(KeyPair(lkey, right, rkey))
            keys.setdefault(right, []).append(KeyPair(rkey, left, lkey))
    # (the keys in one order, whichever order the condition writes them in)
    return {k: tuple(v) for k, v in out.items()}, {k: tuple(sorted(set(v), key=repr)) for k, v in keys.items()}


def _rel(ir: ModelIR, alias: str, join: JoinIR) -> str | None:
    """The input relation a join side reads directly; None for a CTE or subquery side."""
    for read in ir.reads:
        if read.alias == alias and read.scope == join.scope:
            return read.input.relation
    return next((r.input.relation for r in ir.reads if r.alias == alias), None)


def _inputs(ir: ModelIR) -> list[InputRel]:
    """The inputs a run reads and checks; the commit log, read by dim joins through a pinned
    view, is the runtime's own table, not an input."""
    seen: dict[str, InputRel] = {}
    for read in ir.reads:
        if read.input.relation == COMMIT_LOG:
            continue
        seen.setdefault(read.input.relation, read.input)
    return list(seen.values())


def _base(i: InputRel, read: str) -> dict[str, Any]:
    return dict(relation=i.relation, input=i.name, read=read, kind=i.kind, time=i.time)


def _static(i: InputRel) -> SourceBinding:
    return SourceBinding(**_base(i, "static"))


def _trigger(value: Any) -> str:
    if value is None:
        return DEFAULT_TRIGGER
    if isinstance(value, timedelta):
        return f"{int(value.total_seconds())} seconds"
    return str(value)




# --- backfill ranges ------------------------------------------------------------------------------

_DAY_OR_FINER = {"DAY", "DD", "HOUR", "MINUTE", "SECOND", "MILLISECOND", "MICROSECOND"}


def backfill_margin(ir: ModelIR, partition_by: tuple[str, ...]) -> int | None:
    """How far (µs) a backfill of output dates [start, end] must widen its event-time reads.

    Pruning is safe when the output's first partition column is the date (or a finer
    truncation) of one stream input's event time in the model query, and every other stream
    input is tied to that one by bounded interval joins: then an output row of date d comes
    from rows whose event times lie within the sum of the join bounds of [d, d + 1 day).
    Anything else (windows, dedups, LIMIT, subqueries over streams, a date taken from the
    ingest partition) returns None: the backfill reads its inputs whole and filters the output.
    """
    if not partition_by or ir.windows or ir.dedups or ir.clauses or not isinstance(ir.ast, exp.Select):
        return None
    root_tables = {t.alias_or_name.lower(): t for t in _root_tables(ir.ast)}
    streams = {r.alias.lower(): r.input for r in ir.reads if r.input.is_stream and r.input.event_time}
    if not streams or not set(streams) <= set(root_tables):
        return None
    anchor = _date_source(ir.ast, partition_by[0], root_tables)
    if anchor is None or anchor[0] not in streams or \
            anchor[1].lower() != (streams[anchor[0]].event_time or "").lower():
        return None
    stream_joins = [j for j in ir.joins if j.left_streaming and j.right_streaming]
    if any(j.kind != "interval" or j.interval is None or not j.interval.bounded for j in stream_joins):
        return None
    reached, pending = {anchor[0]}, list(stream_joins)
    while any(_touches(j, reached) for j in pending):  # walk out from the anchor, join by join
        for j in [j for j in pending if _touches(j, reached)]:
            reached |= {j.left_alias.lower(), j.right_alias.lower()}
            pending.remove(j)
    if pending or not set(streams) <= reached:
        return None
    # Bounds add up along a chain of joins; their sum covers every path from the anchor.
    return sum(max(abs(j.interval.lower_us), abs(j.interval.upper_us)) for j in stream_joins
               if j.interval is not None  # always, all bounded (checked above)
               and j.interval.lower_us is not None and j.interval.upper_us is not None)


def _touches(join: JoinIR, aliases: set[str]) -> bool:
    return join.left_alias.lower() in aliases or join.right_alias.lower() in aliases


def _root_tables(select: exp.Select) -> list[exp.Table]:
    """Tables read directly by the model query's FROM and JOINs (not in subqueries)."""
    nodes = [select.args.get("from_")] + list(select.args.get("joins") or [])
    return [n.this for n in nodes if n is not None and isinstance(n.this, exp.Table)]


def _date_source(select: exp.Select, name: str, tables: dict[str, exp.Table]) -> tuple[str, str] | None:
    """(alias, column) when output column `name` is a date bucket of one plain column."""
    item = next((e for e in select.expressions if e.alias_or_name.lower() == name.lower()), None)
    node = item.this if isinstance(item, exp.Alias) else item
    if not _is_date_bucket(node):
        return None
    assert node is not None  # a date bucket is a node
    inner = node.this
    while isinstance(inner, (exp.TimeStrToTime, exp.Paren)):
        inner = inner.this
    if not isinstance(inner, exp.Column):
        return None
    alias = inner.table.lower() or (next(iter(tables)) if len(tables) == 1 else "")
    return (alias, inner.name) if alias else None


def _is_date_bucket(node: exp.Expression | None) -> bool:
    if isinstance(node, (exp.TsOrDsToDate, exp.Date)):
        return True
    if isinstance(node, (exp.Cast, exp.TryCast)):
        return node.to.is_type("date")
    if isinstance(node, (exp.TimestampTrunc, exp.DateTrunc, exp.DatetimeTrunc)):
        unit = node.args.get("unit")
        return unit is not None and unit.name.upper() in _DAY_OR_FINER
    if isinstance(node, exp.TimeToStr):
        return spark_sql(node).lower().find("'yyyy-mm-dd") >= 0
    return False
