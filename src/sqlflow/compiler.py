"""load → render → analyze → check → plan, for every model of a project, in one mode.

`compile_project` never starts Spark or dbt. Every problem of every model is collected:
stream-safety findings are errors in stream mode and warnings in batch mode.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlflow.analysis.analyze import analyze
from sqlflow.analysis.ephemeral import ephemeral_chain
from sqlflow.analysis.ir import InputRel, ModelIR
from sqlflow.analysis.stream_safety import check, stream_input_findings
from sqlflow.errors import Diagnostic, Location, SqlflowError
from sqlflow.planning.delta.linear import DeltaRuleError
from sqlflow.planning.plan import COMMIT_LOG, BatchPlan, Mode, Plan
from sqlflow.planning.planner import build_plan, with_incremental
from sqlflow.project.config import column_list
from sqlflow.project.dag import Dag
from sqlflow.project.eventtime import EventTime
from sqlflow.project.left_to_dbt import is_microbatch, microbatch_notice
from sqlflow.project.load import Project, load_project
from sqlflow.project.profiles import Target
from sqlflow.rendering.render import RenderedModel, render_project
from sqlflow.secrets import mask

ARTIFACT_DIR = Path("target") / "sqlflow"


@dataclass
class CompileResult:
    """Plans of the selected models (topological order) and every diagnostic found."""

    mode: Mode
    plans: dict[str, Plan] = field(default_factory=dict)
    irs: dict[str, ModelIR] = field(default_factory=dict)
    rendered: dict[str, RenderedModel] = field(default_factory=dict)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    seeds: dict[str, str] = field(default_factory=dict)  # selected seed -> its table
    dag: Dag | None = None  # every model and seed, selected or not

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "error"]

    @property
    def warnings(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "warning"]

    def raise_if_errors(self) -> None:
        if self.errors:
            raise SqlflowError(diagnostics=self.errors)


def compile_project(project_dir: Path, *, mode: Mode, select: Sequence[str] | None = None,
                    target: Any = None, vars: dict[str, Any] | None = None,
                    exclude: Sequence[str] | None = None) -> CompileResult:
    """Compile the project at `project_dir` for `mode`; see CompileResult.

    `select` and `exclude` are dbt's selection grammar (`sqlflow.project.selector_spec`).

    Raises SqlflowError for problems that stop compilation early (bad config, Jinja errors,
    unknown refs, cycles, unparseable SQL); stream-safety findings land in the result.
    """
    project = load_project(project_dir)
    target = target or _offline_target()
    everything = render_project(project, target, mode, None, vars)
    selected = (set(everything.dag.select(select, exclude)) if select or exclude
                else set(everything.models) | set(everything.seeds))
    result = CompileResult(mode, diagnostics=list(project.warnings),
                           seeds={n: str(r) for n, r in everything.seeds.items() if n in selected})
    result.dag = everything.dag
    refs = {n: m.refs for n, m in everything.models.items()}
    ephemerals = {n for n, m in everything.models.items() if m.config.materialized == "ephemeral"}
    parse_errors: list[Diagnostic] = []
    microbatch: list[tuple[str, str]] = []
    for name in everything.order:
        rendered = everything.models[name]
        chain = [everything.models[e] for e in ephemeral_chain(name, refs, ephemerals)]
        inputs = _inputs(project, everything.models, result.irs, rendered, mode)
        inlined = {str(e.relation).lower() for e in chain}
        for model in chain:  # an ephemeral's inputs are read as the model reading it reads them
            as_reader = dataclasses.replace(model, config=rendered.config)
            inputs.update(_inputs(project, everything.models, result.irs, as_reader, mode))
        try:
            ir = analyze(rendered.sql, model=name, path=rendered.path, mode=mode,
                         inputs={k: v for k, v in inputs.items() if k not in inlined},
                         locate=rendered.locate, partition_by=column_list(rendered.config.partition_by),
                         ctes=[(str(e.relation), e.sql) for e in chain])
        except SqlflowError as exc:
            parse_errors.extend(exc.diagnostics)
            continue
        result.irs[name] = ir
        if name not in selected:
            continue
        if is_microbatch(rendered.config):  # left to dbt, said once below
            microbatch.append((name, rendered.path))
            continue
        findings = check(ir, mode) + stream_input_findings(ir, rendered.config.materialized, mode)
        result.diagnostics.extend(findings)
        result.rendered[name] = rendered
        if any(d.severity == "error" for d in findings):
            continue  # an unsafe model gets no plan; its errors say why
        try:
            plan = build_plan(
                rendered, ir, mode, warnings=tuple(d.format() for d in findings if d.severity == "warning"))
        except DeltaRuleError as exc:  # a stream plan the delta rule cannot build: at the model
            result.diagnostics.extend(
                Diagnostic(f"model `{name}` cannot stream with the incremental strategy: "
                           f"{d.message}", d.location or ir.location or Location(rendered.path),
                           d.hint or "rewrite the query: docs/semantics.md lists what the "
                           "incremental strategy covers")
                for d in exc.diagnostics)
            continue
        again = everything.incremental.get(name)
        if again is not None and isinstance(plan, BatchPlan):  # docs/semantics.md, "Incremental models"
            try:
                inc_ir = analyze(again.sql, model=name, path=again.path, mode=mode,
                                 inputs={k: v for k, v in inputs.items() if k not in inlined},
                                 locate=again.locate, ctes=[(str(e.relation), e.sql) for e in chain],
                                 partition_by=column_list(rendered.config.partition_by))
                plan = with_incremental(plan, again, inc_ir)
            except SqlflowError as exc:
                result.diagnostics.extend(exc.diagnostics)
                continue
        # kept so Spark's analysis errors name the model line (sqlflow.runtime.analysis_errors)
        result.plans[name] = dataclasses.replace(plan, source_map=rendered.source_map)
    if parse_errors:
        raise SqlflowError(diagnostics=parse_errors)
    result.diagnostics.extend(microbatch_notice(microbatch))
    from sqlflow.planning.fusion import fuse_routes
    from sqlflow.project.notify import notify_hooks

    # routed siblings -> one RoutedPlan with one read (docs/design.md §3); the notification
    # hooks come from the profile, never from a model's config (sqlflow.project.notify)
    fuse_routes(result, notify_hooks(target), {n: m.raw_sql for n, m in project.models.items()})
    return result


def streams_in_stream_mode(config: Any) -> bool:
    return config.materialized == "streaming_table"


def _inputs(project: Project, models: dict[str, RenderedModel], irs: dict[str, ModelIR],
            rendered: RenderedModel, mode: Mode) -> dict[str, InputRel]:
    """What the analyzer needs of each relation `rendered` reads, in this mode."""
    streaming_model = streams_in_stream_mode(rendered.config)
    out: dict[str, InputRel] = {}
    for inp in rendered.inputs:
        relation = str(inp.relation).lower()
        if inp.kind == "source":
            assert inp.source_name is not None  # a source input names its source
            table = project.source(inp.source_name, inp.name)
            streamable = bool(table and table.event_time and table.kind != "static")
            out[relation] = InputRel(
                relation=relation, name=inp.key, kind="source",
                streaming=streamable and streaming_model and mode == "stream",
                streamable=streamable and streaming_model,
                time=table.time if table else EventTime(),
                partition_by=(table.partition_column,) if table and table.partition_column else (),
                columns=tuple(c.name for c in table.columns) if table else (),
                ready_marker=table.ready_marker if table else None)
        else:
            upstream = models.get(inp.name)
            ir = irs.get(inp.name)
            up_stream = bool(upstream and streams_in_stream_mode(upstream.config))
            out[relation] = InputRel(
                relation=relation, name=inp.name, kind="model",
                streaming=up_stream and streaming_model and mode == "stream",
                streamable=up_stream and streaming_model,
                time=dataclasses.replace(
                    _upstream_time(ir), event_time=(upstream.config.event_time if upstream else None)
                    or (ir.event_time if ir else None)),
                partition_by=column_list(upstream.config.partition_by) if upstream else (),
                columns=tuple(o.name for o in ir.outputs) if ir and ir.outputs_complete else ())
    # dim_join reads READY from the commit log (docs/design.md §2.3): a static input, pinned per run
    out[COMMIT_LOG] = InputRel(COMMIT_LOG, COMMIT_LOG, "source", False)
    return out


def _upstream_time(ir: ModelIR | None) -> EventTime:
    """A model's output keeps the lateness of its stream inputs (the largest of them)."""
    return EventTime.widest(r.input.time for r in ir.reads if r.input.is_stream) if ir else EventTime()


def write_artifacts(result: CompileResult, project_dir: Path) -> list[Path]:
    """Write `target/sqlflow/<mode>/<model>.sql` and `.json` for every plan; return the paths."""
    folder = project_dir / ARTIFACT_DIR / result.mode
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, plan in result.plans.items():
        sql_path, json_path = folder / f"{name}.sql", folder / f"{name}.json"
        sql_path.write_text(mask(plan_sql_text(plan)))  # docs/deploy.md, "Secrets"
        json_path.write_text(mask(plan_json_text(plan, result.irs.get(name))))
        written += [sql_path, json_path]
    return written


def plan_sql_text(plan: Plan) -> str:
    """The SQL of a plan as a file: a header naming model and mode, then each statement."""
    head = f"-- model: {plan.model} ({plan.path}); mode: {plan.mode}"
    if plan.mode == "stream":
        head += f"; strategy: {plan.strategy}"
    parts = [head, plan.sql.rstrip() + ";"]
    for i, pad in enumerate(getattr(plan, "padding_sql", ()) or ()):
        parts += [f"-- padding of closed unmatched rows ({i + 1})", pad.rstrip() + ";"]
    hashed = getattr(plan, "hash_join_sql", None)
    if hashed:  # what a micro-batch that reads few rows runs instead (docs/semantics.md, "Stream runs")
        parts += ["-- the same statement for a micro-batch that reads few rows (its new rows hashed in one job)",
                  hashed.rstrip() + ";"]
    return "\n".join(parts) + "\n"


def plan_json_text(plan: Plan, ir: ModelIR | None) -> str:
    data = plan.to_dict()
    if ir is not None:
        data["ir"] = ir.to_dict()
    return json.dumps(data, indent=2, sort_keys=True, default=str) + "\n"


def _offline_target() -> Target:
    """A stand-in target for compiling without a profile: schema `dw`, name `local`."""
    return Target(name="local", type="spark", method="session", schema="dw")
