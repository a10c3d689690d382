"""Build a model's plan for one mode from its rendered SQL and its IR (see `sqlflow.plan`)."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

from sqlflow.ir import InputRel, ModelIR
from sqlflow.plan import (
    STATE_DIR, BatchPlan, Mode, Plan, PruneRange, Sink, SourceBinding, StreamPlan, Watermark,
    bind_relations, quarantine_table, spark_sql, stream_joins, streams_of, view_name,
)

DEFAULT_TRIGGER = "10 seconds"


def _us(delta: timedelta) -> int:
    return int(delta / timedelta(microseconds=1))


def build_plan(rendered: Any, ir: ModelIR, mode: Mode, *, warnings: tuple[str, ...] = ()) -> Plan:
    """The plan of one rendered model in `mode`; `ir` must be analyzed in the same mode.

    Only `streaming_table` models stream; every other materialization gets a batch plan in
    both modes (a `table` is rebuilt, a `view` created).
    """
    config = rendered.config
    table = str(rendered.relation)
    partition_by = tuple(_as_list(config.partition_by))
    quarantine = quarantine_table(table, config.quarantine)
    if mode == "stream" and config.materialized == "streaming_table":
        return _stream_plan(rendered, ir, table, partition_by, quarantine, warnings)
    write = {"streaming_table": "overwrite_partitions", "incremental": "overwrite_partitions",
             "view": "view"}.get(config.materialized, "replace")
    if write == "overwrite_partitions" and not partition_by:
        write = "replace"
    return BatchPlan(
        model=rendered.name, path=rendered.path, materialized=config.materialized,
        sql=spark_sql(ir.ast), sources=tuple(_static(i) for i in _inputs(ir)),
        sink=Sink(table, write, partition_by, file_format=config.file_format or "delta"),
        quarantine=quarantine, event_time=ir.event_time, warnings=warnings,
    )


def _stream_plan(rendered: Any, ir: ModelIR, table: str, partition_by: tuple[str, ...],
                 quarantine: str, warnings: tuple[str, ...]) -> StreamPlan:
    config = rendered.config
    streams = streams_of(ir)
    strategy = config.stream_strategy
    if strategy == "stateful":
        delay = _us(config.skew_margin)
        bindings = {
            s.relation: SourceBinding(
                **_base(s, "stream"), view=view_name("stream", s.relation),
                watermark=Watermark(s.event_time, s.allowed_lateness_us + delay)
                if s.event_time else None)
            for s in streams
        }
        sql = spark_sql(bind_relations(ir.ast, {r: b.view for r, b in bindings.items()}))
        padding: tuple[str, ...] = ()
    else:
        bindings, sql, padding = _incremental(ir, streams)
    sources = tuple(bindings.get(i.relation) or _static(i) for i in _inputs(ir))
    return StreamPlan(
        model=rendered.name, path=rendered.path, materialized=config.materialized,
        strategy=strategy, sql=sql, sources=sources,
        sink=Sink(table, "append_once", partition_by,
                  checkpoint=f"{STATE_DIR}/checkpoints/{rendered.name}",
                  file_format=config.file_format or "delta"),
        quarantine=quarantine, trigger=_trigger(config.trigger), padding_sql=padding,
        event_time=ir.event_time, warnings=warnings,
    )


def _incremental(ir: ModelIR, streams: list[InputRel]):
    """Bind streams to micro-batch delta views; joins of streams by the delta rule."""
    from sqlflow.delta_rule import DeltaBinding, delta_rewrite, padding_queries

    joins = stream_joins(ir)
    prunes = _prune_ranges(ir, joins)
    joined = {r for j in joins for r in (_rel(ir, j.left_alias, j), _rel(ir, j.right_alias, j))}
    bindings = {
        s.relation: SourceBinding(
            **_base(s, "stream"), view=view_name("delta", s.relation),
            old_view=view_name("old", s.relation) if s.relation in joined else None,
            prune=prunes.get(s.relation, ()))
        for s in streams
    }
    deltas = {r: DeltaBinding(r, b.view, b.old_view or b.view) for r, b in bindings.items()}
    if not joined:
        return bindings, spark_sql(bind_relations(ir.ast, {r: b.view for r, b in bindings.items()})), ()
    rewritten = delta_rewrite(ir.ast, deltas)
    pending = {r: view_name("pending", r) for r in deltas}
    padded = padding_queries(ir.ast, deltas, pending)
    padding = tuple(spark_sql(padded[r]) for r in sorted(padded))
    for r in padded:
        bindings[r] = dataclasses.replace(bindings[r], pending_view=pending[r])
    return bindings, spark_sql(rewritten), padding


def _prune_ranges(ir: ModelIR, joins) -> dict[str, tuple[PruneRange, ...]]:
    """For each joined stream, the older rows each other side's new rows can match.

    With `r.t - l.t` in [lo, hi]: old left rows need `l.t` in [min(Δr.t) - hi, max(Δr.t) - lo],
    old right rows need `r.t` in [min(Δl.t) + lo, max(Δl.t) + hi].
    """
    out: dict[str, list[PruneRange]] = {}
    for j in joins:
        if j.kind != "interval" or j.interval is None or not j.interval.bounded:
            continue
        b = j.interval
        left, right = _rel(ir, j.left_alias, j), _rel(ir, j.right_alias, j)
        out.setdefault(left, []).append(
            PruneRange(b.left_time, right, b.right_time, -b.upper_us, -b.lower_us))
        out.setdefault(right, []).append(
            PruneRange(b.right_time, left, b.left_time, b.lower_us, b.upper_us))
    return {k: tuple(v) for k, v in out.items()}


def _rel(ir: ModelIR, alias: str, join) -> str:
    for read in ir.reads:
        if read.alias == alias and read.scope == join.scope:
            return read.input.relation
    return next(r.input.relation for r in ir.reads if r.alias == alias)


def _inputs(ir: ModelIR) -> list[InputRel]:
    seen: dict[str, InputRel] = {}
    for read in ir.reads:
        seen.setdefault(read.input.relation, read.input)
    return list(seen.values())


def _base(i: InputRel, read: str) -> dict[str, Any]:
    return dict(relation=i.relation, input=i.name, read=read, event_time=i.event_time,
                ingest_time=i.ingest_time, allowed_lateness_us=i.allowed_lateness_us,
                future_tolerance_us=i.future_tolerance_us)


def _static(i: InputRel) -> SourceBinding:
    return SourceBinding(**_base(i, "static"))


def _trigger(value: Any) -> str:
    if value is None:
        return DEFAULT_TRIGGER
    if isinstance(value, timedelta):
        return f"{int(value.total_seconds())} seconds"
    return str(value)


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)
