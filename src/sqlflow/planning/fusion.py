"""Fan-out fusion (docs/design.md §3): routed sibling models become ONE `RoutedPlan` with one read.

A model joins a routed group by setting the `routing` config (usually for a whole folder in
dbt_project.yml, e.g. `+routing: {group: user_events_by_department}`). Every member must only
filter and project one parent (one input, no join, aggregation, window, dedup, DISTINCT,
ORDER BY, LIMIT or subquery), so `dbt run` can build it as an ordinary model while sqlflow
runs all members from one read of the parent. Members of a group that were selected together
are fused; a group with a single selected member keeps its ordinary plan.

`routing` keys (all optional):

| key              | meaning                                                              |
|------------------|----------------------------------------------------------------------|
| `group`          | the group's name (default: the parent's table name)                  |
| `commit_by`      | the date and hour partition columns a commit covers (default `[dt, hour]`) |
| `success_marker` | write `_SUCCESS` into each committed partition directory (default true) |
| `bytes_per_row`  | cold-start size of a written row before Delta statistics exist (default 256B) |
| `row_bytes`      | cold-start row sizes per sub-partition, e.g. `{"event_type=play": 900B}` (below) |

A commit's notification (an HTTP POST, a shell command) is not a model config: a config comes
with pull requests and never runs code. The operator sets it per group in the profile
(`sqlflow.project.notify`); `notify_url` / `notify_command` under `routing` are an error that
says so.

`row_bytes` presets the size of a row of the sub-partitions it names (levels other than the
date and hour, `level=value` joined by `/`, e.g. `event_type=play/product=app`): rows are
counted exactly in each write, so a partition's share of the volume is known; what a cold start
lacks is how large its rows are. A sub-partition the target's own Delta statistics have not yet
seen uses its most specific preset, then the table's learned average, then `bytes_per_row`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from sqlglot import exp

from sqlflow.analysis.ir import ModelIR
from sqlflow.errors import Diagnostic, Location
from sqlflow.planning.plan import (
    BatchPlan,
    Plan,
    RestartPolicy,
    RouteCommit,
    RoutedPlan,
    RouteTarget,
    StreamPlan,
    quarantine_table,
)
from sqlflow.planning.shared_calls import share_calls
from sqlflow.project.config import ByteSize, parse_size
from sqlflow.project.config_origin import config_line
from sqlflow.project.notify import MODEL_KEYS, NotifyHook, model_setting_hint
from sqlflow.project.runmode import AVAILABLE_NOW, STATE_DIR

DEFAULT_TARGET_FILE_SIZE = parse_size("128MB")


class RoutingConfig(BaseModel):
    """The `routing` config of a member model (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    group: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    commit_by: tuple[str, str] = ("dt", "hour")
    success_marker: bool = True
    bytes_per_row: ByteSize = 256
    row_bytes: dict[str, ByteSize] = Field(default_factory=dict)

    @field_validator("row_bytes")
    @classmethod
    def _specs(cls, value: dict[str, int]) -> dict[str, int]:
        for key in value:
            if not key or any(part.count("=") != 1 or part.startswith("=") for part in key.split("/")):
                raise ValueError(f"`{key}` is not a sub-partition like `event_type=play` or "
                                 "`event_type=play/product=app`")
        return value


def fuse_routes(result: Any, hooks: dict[str, NotifyHook] | None = None,
                raw_sql: dict[str, str] | None = None) -> None:
    """Replace the plans of each routed group's selected members by one RoutedPlan, in place
    (at the first member's position, which comes after the parent and before any model that
    reads a member). Problems become error diagnostics on the member that causes them.
    `hooks`: each group's notification, from the profile (`sqlflow.project.notify`);
    `raw_sql`: the model files' text, to point a refused config key at its line."""
    groups: dict[str, list[str]] = {}
    configs: dict[str, RoutingConfig] = {}
    for name, plan in result.plans.items():
        rendered = result.rendered[name]
        if rendered.config.routing is None:
            continue
        where = Location(rendered.path)
        hook_keys = [k for k in MODEL_KEYS if isinstance(rendered.config.routing, dict)
                     and k in rendered.config.routing]
        if hook_keys:
            group = rendered.config.routing.get("group") or "<group>"
            result.diagnostics.append(Diagnostic(
                f"model `{name}`: `routing.{hook_keys[0]}` is an operator setting, not a model "
                "config: a config must never run a command or call a URL",
                config_line(rendered.path, (raw_sql or {}).get(name, ""), *hook_keys),
                model_setting_hint(group)))
            continue
        try:
            cfg = RoutingConfig.model_validate(rendered.config.routing)
        except ValidationError as exc:
            err = exc.errors()[0]
            result.diagnostics.append(Diagnostic(
                f"model `{name}`: bad `routing` config at {'.'.join(map(str, err['loc']))}: {err['msg']}",
                where, "see docs/macros.md (routing) for the keys"))
            continue
        problem = _not_fusable(result.irs[name], plan)
        if problem:
            result.diagnostics.append(Diagnostic(
                f"model `{name}` is routed but {problem}", where,
                "a routed model may only filter and project one parent; remove `routing` "
                "from its config to run it as an ordinary model"))
            continue
        key = cfg.group or plan.sources[0].relation.rsplit(".", 1)[-1]
        configs[name] = cfg
        groups.setdefault(key, []).append(name)
    for group, members in groups.items():
        if len(members) < 2:
            continue
        routed = _routed_plan(result, group, members, configs, (hooks or {}).get(group))
        if routed is None:
            continue
        plans = {}
        for name, plan in result.plans.items():
            if name == members[0]:
                plans[group] = routed
            elif name not in members:
                plans[name] = plan
        result.plans.clear()
        result.plans.update(plans)


def route_groups(rendered: dict[str, Any]) -> dict[str, list[str]]:
    """Group name -> its member models (rendered models with a valid `routing` config), named
    as `fuse_routes` names them. Lets a caller select a whole group by its name or a member."""
    groups: dict[str, list[str]] = {}
    for name, model in rendered.items():
        if model.config.routing is None or not model.inputs:
            continue
        try:
            cfg = RoutingConfig.model_validate(model.config.routing)
        except ValidationError:
            continue  # compiling reports it
        key = cfg.group or str(model.inputs[0].relation).rsplit(".", 1)[-1]
        groups.setdefault(key, []).append(name)
    return groups


def _not_fusable(ir: ModelIR, plan: Plan) -> str | None:
    """Why a member cannot share its parent's read, or None."""
    if not isinstance(plan, (BatchPlan, StreamPlan)) or plan.materialized != "streaming_table":
        return "is not materialized as `streaming_table`"
    if isinstance(plan, StreamPlan) and plan.strategy != "incremental":
        return "uses stream_strategy `stateful` (routing runs the `incremental` strategy)"
    if len(ir.inputs) != 1 or len(plan.sources) != 1:
        return f"reads {len(ir.inputs)} inputs (a routed model reads exactly one parent)"
    if ir.joins or ir.aggregations or ir.windows or ir.dedups or ir.clauses:
        return "joins, aggregates, uses windows, or orders/limits its rows"
    tree = ir.ast
    if not isinstance(tree, exp.Select) or len(list(tree.find_all(exp.Select))) != 1:
        return "is not one plain SELECT (set operations or subqueries)"
    if any(tree.args.get(k) for k in ("group", "having", "distinct", "order", "limit", "with")):
        return "uses GROUP BY, HAVING, DISTINCT, ORDER BY, LIMIT or WITH"
    return None


def _routed_plan(result: Any, group: str, members: list[str],
                 configs: dict[str, RoutingConfig], hook: NotifyHook | None) -> RoutedPlan | None:
    first = result.plans[members[0]]
    cfg = configs[members[0]]
    for name in members[1:]:
        plan = result.plans[name]
        different = ("routing" if configs[name] != cfg else
                     "input" if plan.sources != first.sources else
                     "stream_strategy" if getattr(plan, "strategy", None) != getattr(first, "strategy", None)
                     else None)
        if different:
            result.diagnostics.append(Diagnostic(
                f"routed group `{group}`: model `{name}` has a different {different} than `{members[0]}`",
                Location(result.rendered[name].path),
                "members of one routed group share one read: give them the same parent and config, "
                "or a different `routing.group`"))
            return None
    source = first.sources[0]
    schema = first.sink.table.rsplit(".", 1)[0] + "." if "." in first.sink.table else ""
    targets = []
    for name in members:
        plan, config = result.plans[name], result.rendered[name].config
        missing = [c for c in cfg.commit_by if c not in plan.sink.partition_by]
        if missing:
            result.diagnostics.append(Diagnostic(
                f"routed model `{name}` is not partitioned by {', '.join(missing)}",
                Location(plan.path), f"add {cfg.commit_by} to its partition_by: a partition commit "
                                     "covers one (date, hour) partition"))
            return None
        levels = {c.lower() for c in plan.sink.partition_by} - {c.lower() for c in cfg.commit_by}
        unknown = sorted({part.split("=", 1)[0] for key in cfg.row_bytes for part in key.split("/")
                          if part.split("=", 1)[0].lower() not in levels})
        if unknown:
            result.diagnostics.append(Diagnostic(
                f"routed model `{name}`: `routing.row_bytes` names level(s) {', '.join(unknown)}, "
                "which are not its sub-partition levels", Location(plan.path),
                f"use levels of its partition_by other than {', '.join(cfg.commit_by)}: "
                f"{', '.join(sorted(levels)) or '(none)'}"))
            return None
        targets.append(RouteTarget(name, plan.path, plan.sql,
                                   dataclasses.replace(plan.sink, role="routed"),
                                   config.target_file_size or DEFAULT_TARGET_FILE_SIZE,
                                   config.max_files_per_partition, source_map=plan.source_map))
    shared = share_calls([t.sql for t in targets])
    targets = [dataclasses.replace(t, shared_sql=sql) for t, sql in zip(targets, shared.sql, strict=False)]
    stream = isinstance(first, StreamPlan)
    return RoutedPlan(
        model=group, path=first.path, materialized=first.materialized, mode=result.mode,
        strategy=first.strategy if stream else "batch", sources=first.sources,
        targets=tuple(targets), quarantine=quarantine_table(f"{schema}{group}", None),
        quarantine_origin=first.path,
        commit=RouteCommit(cfg.commit_by[0], cfg.commit_by[1], source.allowed_lateness_us,
                           cfg.success_marker, hook.url if hook else None,
                           hook.command if hook else None),
        bytes_per_row=cfg.bytes_per_row,
        row_bytes=tuple(sorted(cfg.row_bytes.items())),
        trigger=first.trigger if stream else AVAILABLE_NOW,
        restarts=first.restarts if stream else RestartPolicy(),
        checkpoint=f"{STATE_DIR}/checkpoints/route__{group}" if stream else None,
        event_time=first.event_time,
        warnings=tuple(w for name in members for w in result.plans[name].warnings),
        shared=shared.columns)
