"""`sqlflow diff`: what a change does to each model's plan, and what a running stream needs.

Both revisions are compiled in stream mode (the mode with state) and batch mode; each model's
plan is reduced to a `PlanFacts` of the terms a deployment cares about, and the facts are
compared term by term. Every difference has an impact:

- `full_refresh`: the running stream's checkpoint and state no longer describe the query
  (inputs, join type/keys/interval bounds, event time, watermark, dedup or aggregation keys,
  stream strategy, sink table/partitioning/materialization). Stop it, rebuild the table with a
  backfill and start the stream from a fresh checkpoint.
- `backfill`: the stream can continue from its checkpoint, but rows already written were
  computed by the old SQL (columns added/removed, expressions changed): backfill them.
- `safe`: nothing in the plan changed (comments, formatting).

A model's verdict is its worst impact; a new model needs a backfill to build its history.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sqlglot.errors import SqlglotError

from sqlflow.analysis.ir import ModelIR
from sqlflow.compiler import compile_project
from sqlflow.dialect import DIALECT
from sqlflow.errors import SqlflowError
from sqlflow.planning.plan import RoutedPlan, Sink
from sqlflow.project.dag import build_dag
from sqlflow.project.load import load_project
from sqlflow.workflows.changes import changed_files, export_revision, macro_callers

IMPACTS = ("safe", "backfill", "full_refresh")


@dataclass(frozen=True)
class PlanFacts:
    """The plan terms of one model that `diff` compares."""

    materialized: str
    columns: tuple[str, ...]
    inputs: tuple[str, ...]
    joins: tuple[str, ...]  # "left interval i~c keys [req_id=req_id] c.t BETWEEN ..."
    event_time: str | None
    watermarks: tuple[str, ...]
    keyed_state: tuple[str, ...]  # dedup and aggregation keys
    strategy: str | None
    sink: str
    partition_by: tuple[str, ...]
    sql: str


@dataclass(frozen=True)
class Change:
    term: str
    before: Any
    after: Any
    impact: str
    note: str = ""


@dataclass
class ModelDiff:
    model: str
    status: str  # added | removed | changed | unchanged | downstream (of a changed macro)
    changes: list[Change] = field(default_factory=list)

    @property
    def impact(self) -> str:
        if self.status in ("added", "downstream"):
            return "backfill"
        if self.status == "removed":
            return "safe"
        return max((c.impact for c in self.changes), key=IMPACTS.index, default="safe")


def facts_of(project_dir: Path) -> dict[str, PlanFacts]:
    """PlanFacts of every model of the project at `project_dir`, compiled without Spark.

    Models that do not compile in stream mode (batch-only models) are described from their
    batch plan; a project that does not compile at all is an error naming the problem.
    """
    batch = compile_project(project_dir, mode="batch")
    stream = compile_project(project_dir, mode="stream")
    out: dict[str, PlanFacts] = {}
    for name, plan in batch.plans.items():
        splan = stream.plans.get(name)
        if isinstance(plan, RoutedPlan):  # a routed group: each member described as its model
            for t in plan.targets:
                out[t.model] = _facts(batch.irs[t.model], stream.irs.get(t.model, batch.irs[t.model]),
                                      plan.materialized, plan.event_time, splan, t.sink, t.sql)
            continue
        out[name] = _facts(batch.irs[name], stream.irs.get(name, batch.irs[name]), plan.materialized,
                           plan.event_time, splan, plan.sink, plan.sql)
    return out


def _facts(ir: ModelIR, sir: ModelIR, materialized: str, event_time: str | None, splan: Any,
           sink: Sink, sql: str) -> PlanFacts:
    """The facts of one model: its IRs in both modes, its stream plan (None: batch only)."""
    return PlanFacts(
        materialized=materialized,
        columns=tuple(o.name for o in ir.outputs),
        inputs=tuple(sorted(i.relation for i in ir.inputs)),
        joins=tuple(_join_text(j) for j in sir.joins),
        event_time=event_time,
        watermarks=tuple(sorted(
            f"{b.relation}: {b.watermark.column} - {b.watermark.delay_us}us"
            for b in (splan.sources if splan else ()) if b.watermark)),
        keyed_state=tuple([f"dedup by {', '.join(d.keys)}" for d in sir.dedups]
                          + [f"group by {', '.join(a.group_keys)}" for a in sir.aggregations]),
        strategy=getattr(splan, "strategy", None),
        sink=f"{sink.table} ({sink.write}, {sink.file_format})",
        partition_by=tuple(sink.partition_by),
        sql=_without_comments(sql),
    )


def _without_comments(sql: str) -> str:
    """The plan SQL as sqlglot regenerates it without comments: a comment is no change."""
    try:
        tree = DIALECT().parse(sql)[0]
        assert tree is not None  # a plan's SQL is a statement
        return tree.sql(dialect=DIALECT, comments=False)
    except SqlglotError:
        return sql


def _join_text(j: Any) -> str:
    keys = ", ".join(f"{a}={b}" for a, b in j.keys)
    bound = f" {j.interval.predicate_sql(j.left_alias, j.right_alias)}" if j.interval else ""
    return f"{j.join_type} {j.kind} {j.left_alias}~{j.right_alias} keys [{keys}]{bound}"


_STATE_TERMS = ("inputs", "joins", "event_time", "watermarks", "keyed_state", "strategy", "sink",
                "partition_by", "materialized")


def compare(before: PlanFacts | None, after: PlanFacts | None, model: str) -> ModelDiff:
    if before is None:
        return ModelDiff(model, "added")
    if after is None:
        return ModelDiff(model, "removed")
    changes: list[Change] = []
    for term in _STATE_TERMS:
        old, new = getattr(before, term), getattr(after, term)
        if old != new:
            changes.append(Change(term, old, new, "full_refresh",
                                  "the running stream's state and checkpoint no longer match"))
    if before.columns != after.columns:
        added = [c for c in after.columns if c not in before.columns]
        removed = [c for c in before.columns if c not in after.columns]
        note = "; ".join(p for p in (f"added {', '.join(added)}" if added else "",
                                     f"removed {', '.join(removed)}" if removed else "",
                                     "reordered" if not added and not removed else "") if p)
        changes.append(Change("columns", list(before.columns), list(after.columns), "backfill", note))
    if before.sql != after.sql and not changes:
        changes.append(Change("sql", None, None, "backfill",
                              "expressions changed: rows already written used the old SQL"))
    return ModelDiff(model, "changed" if changes else "unchanged", changes)


def diff_project(project_dir: Path, base: str) -> list[ModelDiff]:
    """Per model (added, removed or changed) what differs between `base` and the working tree."""
    after = facts_of(project_dir)
    with tempfile.TemporaryDirectory(prefix="sqlflow-diff-") as tmp:
        base_dir = export_revision(project_dir, base, Path(tmp) / "base")
        try:
            before = facts_of(base_dir)
        except SqlflowError as exc:
            raise SqlflowError(f"the base revision {base} does not compile: "
                               f"{exc.diagnostics[0].format()}",
                               hint="pick a base that compiles, e.g. the merge base") from None
    diffs = [compare(before.get(m), after.get(m), m) for m in sorted(set(before) | set(after))]
    listed = [d for d in diffs if d.status != "unchanged"]
    return listed + _downstream_of_macros(project_dir, base, {d.model for d in listed})


def _downstream_of_macros(project_dir: Path, base: str, listed: set[str]) -> list[ModelDiff]:
    """Every model downstream (transitively) of a model that calls a changed macro, not
    already listed: its own plan is the same, but it reads rows the new macro computes."""
    project = load_project(project_dir)
    callers = macro_callers(project, changed_files(project_dir, base))
    if not callers:
        return []
    dag = build_dag(compile_project(project_dir, mode="batch").rendered.values())
    out: dict[str, ModelDiff] = {}
    for caller in (c for c in dag.order if c in callers):
        for model in (m for m in dag.order if m in dag.descendants(caller)):
            if model not in listed and model not in out:
                macros = ", ".join(f"`{m}`" for m in callers[caller])
                out[model] = ModelDiff(model, "downstream", [Change(
                    "upstream", None, caller, "backfill",
                    f"reads `{caller}` (through its refs), which calls the changed macro "
                    f"{macros}: rows already written used the old macro")])
    return [out[m] for m in dag.order if m in out]


def to_json(diffs: list[ModelDiff]) -> str:
    return json.dumps([{"model": d.model, "status": d.status, "impact": d.impact,
                        "changes": [asdict(c) for c in d.changes]} for d in diffs],
                      indent=2, default=list)


def to_text(diffs: list[ModelDiff]) -> str:
    if not diffs:
        return "no model's plan changed"
    lines = []
    for d in diffs:
        verdict = {"safe": "safe", "backfill": "safe for a running stream; backfill history",
                   "full_refresh": "STATE-INCOMPATIBLE: full refresh/backfill needed"}[d.impact]
        lines.append(f"{d.model}: {d.status} — {verdict}")
        for c in d.changes:
            if c.term in ("columns", "sql", "upstream"):
                lines.append(f"  {c.term}: {c.note}")
            else:
                lines.append(f"  {c.term}: {_show(c.before)} -> {_show(c.after)}")
    return "\n".join(lines)


def _show(value: Any) -> str:
    if isinstance(value, (tuple, list)):
        return "[" + "; ".join(map(str, value)) + "]" if value else "[]"
    return str(value)
