"""Render models: a sandboxed Jinja environment with the dbt subset analysts use.

`ref`, `source`, `config`, `var`, `env_var`, `this`, `target`, `is_incremental`, `return`,
`exceptions`, `log`, `modules` and the project's macros. Relations render as dbt-spark does
(`<schema>.<identifier>`, unquoted; a custom schema becomes `<target_schema>_<custom>` unless the
project overrides `generate_schema_name`). No Spark, no dbt: templates compile once per text.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from types import SimpleNamespace
from typing import Any, Literal

from sqlflow.errors import DiagnosticSink, Location, SqlflowError, did_you_mean
from sqlflow.project.config import ModelConfig, check_layer, config_keys, merge_config, normalize_keys
from sqlflow.project.dag import Dag, build_dag
from sqlflow.project.load import ModelNode, Project, SourceTable
from sqlflow.project.packages import INTERNAL, MacroPackage
from sqlflow.project.runmode import Mode
from sqlflow.project.seeds import SeedNode
from sqlflow.rendering.adapter import API, Adapter, MacroNamespace
from sqlflow.rendering.dbt_context import (
    ENV,
    EXCEPTIONS,
    MISSING,
    MacroReturn,
    Relation,
    Var,
    compile_template,
    env_var,
    log_,
    no_warehouse,
    return_,
)
from sqlflow.rendering.name_check import check_names
from sqlflow.rendering.ownership_check import check_ownership
from sqlflow.rendering.sourcemap import MODEL_PREFIX, SourceMap, locate_exception, strip_markers
from sqlflow.sandbox import MODULES

_CONFIG_CALL = re.compile(r"\bconfig\s*\(")
_INVOCATION_ID = str(uuid.uuid4())
_FLAGS = SimpleNamespace(FULL_REFRESH=False, STORE_FAILURES=False, WHICH="build")


@dataclass(frozen=True)
class InputRelation:
    """One relation a model reads: a ref'd model or a source table, as it appears in the SQL."""

    kind: Literal["ref", "source"]
    name: str  # model name, or the source table's name
    relation: Relation
    source_name: str | None = None

    @property
    def key(self) -> str:
        """`model` for a ref, `source_name.table` for a source."""
        return self.name if self.kind == "ref" else f"{self.source_name}.{self.name}"


@dataclass(frozen=True)
class RenderedModel:
    """A model after Jinja: its SQL, what it reads, its merged config and a source map."""

    name: str
    path: str
    sql: str
    refs: tuple[str, ...]
    sources: tuple[tuple[str, str], ...]
    config: ModelConfig
    relation: Relation
    inputs: tuple[InputRelation, ...]
    source_map: SourceMap

    def locate(self, line: int, col: int = 0) -> Location:
        """Location in the model file of (line, col), 1-based, of the rendered SQL."""
        return self.source_map.locate(line, col)

    def input_for(self, relation: str) -> InputRelation | None:
        """The ref/source a relation name in the SQL (`dw.stg_x`, case-insensitive) stands for."""
        wanted = relation.replace("`", "").lower()
        return next((i for i in self.inputs if str(i.relation).lower() == wanted), None)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (for `compile --format json`): everything but the source map."""
        return {
            "name": self.name, "path": self.path, "relation": str(self.relation),
            "refs": list(self.refs), "sources": [f"{s}.{t}" for s, t in self.sources],
            "inputs": {str(i.relation): i.key for i in self.inputs},
            "config": self.config.model_dump(mode="json", by_alias=True, exclude_defaults=True),
            "sql": self.sql,
        }


# --- the renderer ---------------------------------------------------------------------------------


class Renderer:
    """Renders models of one project for one target, mode and set of CLI vars.

    Caches each model's final config (a model's `{{ config() }}` can change the schema or alias
    other models' `ref`s render to) and the relations of sources.
    """

    def __init__(self, project: Project, target: Any, mode: Mode = "batch",
                 vars: dict[str, Any] | None = None) -> None:
        self.project = project
        self.target = target
        self.mode = mode
        self.vars = {**project.vars, **(vars or {}), "sqlflow_mode": mode}
        self._configs: dict[str, ModelConfig] = {}
        self._capturing: set[str] = set()
        self._relations: dict[str, Relation] = {}
        self._model_relations: dict[str, Relation] = {}
        self._seed_relations: dict[str, Relation] = {}
        self.run_started_at = datetime.now(timezone.utc)
        # `is_incremental()`: false, except while `render_incremental` renders an incremental
        # model's run over its existing table (docs/semantics.md, "Incremental models")
        self.incremental = False
        self._macros_call_config = any(
            _CONFIG_CALL.search(text) for text in project.macro_files.values())
        self._files = {m.path for m in project.models.values()} | set(project.macro_files)
        for package in project.packages.values():
            self._files |= set(package.files)

    # public --------------------------------------------------------------------------------------

    def render(self, name: str) -> RenderedModel:
        """Render model `name`; SqlflowError at the model's file:line for any user mistake."""
        node = self._node(name)
        config = self.final_config(name)
        ctx = _ModelRun(self, node, config, capture=False)
        marked = self._run(node, ctx)
        sql, source_map = strip_markers(node.path, node.raw_sql, marked)
        return RenderedModel(
            name=name, path=node.path, sql=sql, refs=tuple(dict.fromkeys(ctx.refs)),
            sources=tuple(dict.fromkeys(ctx.sources)), config=config,
            relation=self.relation_of(name), inputs=tuple(dict.fromkeys(ctx.inputs)),
            source_map=source_map)

    def render_incremental(self, name: str) -> RenderedModel:
        """Render incremental model `name` as dbt renders it over its existing table:
        `is_incremental()` true (the config stays the one rendered with it false, as dbt's
        parse-time config)."""
        self.incremental = True
        try:
            return self.render(name)
        finally:
            self.incremental = False

    def render_node(self, node: ModelNode, extra: dict[str, Any] | None = None) -> RenderedModel:
        """Render a node that is not one of the project's models (a dbt data test) as a model
        is rendered; `extra` adds names to its context."""
        return self.render_test(node, extra)[0]

    def render_test(self, node: ModelNode, extra: dict[str, Any] | None = None,
                    test_config: dict[str, Any] | None = None,
                    ) -> tuple[RenderedModel, list[dict[str, Any]]]:
        """`render_node`, and the `{{ config(...) }}` calls of the node (a data test's config:
        dbt's test keys, `severity`, `store_failures`, ..., not a model's). `test_config`: what
        `config.get` returns for those keys (dbt's not_null selects `*` when storing failures)."""
        config = _validate(dict(node.base_config), node)
        ctx = _ModelRun(self, node, config, capture=False)
        ctx.config.checked = False
        ctx.config.test_keys = dict(test_config or {})
        ctx.context.update(extra or {})
        marked = self._run(node, ctx)
        sql, source_map = strip_markers(node.path, node.raw_sql, marked)
        return RenderedModel(
            name=node.name, path=node.path, sql=sql, refs=tuple(dict.fromkeys(ctx.refs)),
            sources=tuple(dict.fromkeys(ctx.sources)), config=config,
            relation=Relation("", node.name), inputs=tuple(dict.fromkeys(ctx.inputs)),
            source_map=source_map), ctx.config.calls

    def test_relation(self, schema: str, alias: str, node: ModelNode) -> Relation:
        """Where a data test stores its failing rows: its `schema` config through
        generate_schema_name (dbt's default: `<target schema>_dbt_test__audit`), named `alias`."""
        info = {**_node_dict(node, None), "resource_type": "test",
                "unique_id": f"test.{node.fqn[0]}.{node.name}"}
        return Relation(self._generated("generate_schema_name", schema, info), alias)

    def final_config(self, name: str) -> ModelConfig:
        """The model's merged config, including its `{{ config() }}` calls."""
        if name in self._configs:
            return self._configs[name]
        node = self._node(name)
        layer = dict(node.base_config)
        if name not in self._capturing and (
                self._macros_call_config or _CONFIG_CALL.search(node.raw_sql)):
            self._capturing.add(name)
            try:
                ctx = _ModelRun(self, node, _validate(layer, node), capture=True)
                self._run(node, ctx)
            finally:
                self._capturing.discard(name)
            for call in ctx.config.calls:
                layer = merge_config(layer, call)
        config = _validate(layer, node)
        self._configs[name] = config
        return config

    def relation_of(self, name: str) -> Relation:
        """The relation `ref(name)` renders to (schema and alias after the model's config)."""
        if name not in self._model_relations:
            node = self._node(name)
            self._model_relations[name] = self.relation_for(node, self.final_config(name))
        return self._model_relations[name]

    def relation_for(self, node: ModelNode, config: ModelConfig) -> Relation:
        """The relation of `node` under `config`: generate_schema_name / generate_alias_name."""
        if config.materialized == "ephemeral":
            return Relation("", f"__dbt__cte__{node.name}")
        info = _node_dict(node, self._configs.get(node.name))
        return Relation(self._generated("generate_schema_name", config.schema_name, info),
                        self._generated("generate_alias_name", config.alias, info))

    def seed_relation(self, name: str) -> Relation:
        """The table a seed loads into: generate_schema_name / generate_alias_name as a model's."""
        if name not in self._seed_relations:
            seed = self.project.seeds[name]
            info = seed_dict(seed)
            self._seed_relations[name] = Relation(
                self._generated("generate_schema_name", seed.config.schema_name, info),
                self._generated("generate_alias_name", seed.config.alias, info))
        return self._seed_relations[name]

    def source_relation(self, table: SourceTable) -> Relation:
        """The relation `source(...)` renders to; `{{ }}` in the yml schema is rendered."""
        if table.key not in self._relations:
            schema, ident = table.schema, table.identifier
            if "{{" in schema or "{{" in ident:
                ctx = self._base_context()
                schema = ENV.from_string(schema).render(ctx).strip()
                ident = ENV.from_string(ident).render(ctx).strip()
            self._relations[table.key] = Relation(schema, ident)
        return self._relations[table.key]

    # internals -------------------------------------------------------------------------------------

    def _node(self, name: str) -> ModelNode:
        node = self.project.models.get(name)
        if node is None:
            raise SqlflowError(f"unknown model `{name}`",
                               hint=did_you_mean(name, list(self.project.models)))
        return node

    def _run(self, node: ModelNode, run: _ModelRun) -> str:
        template = compile_template(MODEL_PREFIX.rstrip(":"), node.path, node.raw_sql)
        try:
            return template.render(run.context)
        except Exception as exc:  # noqa: BLE001 - every failure becomes a located user error
            raise locate_exception(exc, node.path, self._files, run.context) from None

    def _generated(self, macro: str, custom: str | None, node: dict[str, Any]) -> str:
        if macro in self.project.macros:
            run = _MacroRuntime(self, self._base_context())
            value = run.call(self.project.name, macro, custom, node)
            return str(value).strip()
        if macro == "generate_alias_name":
            return custom.strip() if custom else str(node["name"])
        schema = self.target.schema_
        return f"{schema}_{custom.strip()}" if custom is not None else schema

    def _base_context(self) -> dict[str, Any]:
        """What every template sees, model or not: target, var, env_var, modules, helpers."""
        t = self.target
        target = {"name": t.name, "schema": t.schema_, "type": "spark", "method": t.method,
                  "profile_name": self.project.profile, "target_name": t.name, "threads": 1,
                  "database": None}
        return {
            "target": target, "var": Var(self.vars), "env_var": env_var,
            "is_incremental": lambda: self.incremental, "return": return_, "log": log_,
            "exceptions": EXCEPTIONS, "modules": MODULES, "execute": True,
            "run_query": no_warehouse("run_query"), "statement": no_warehouse("statement"),
            "dbt_version": "1.11", "project_name": self.project.name,
            "run_started_at": self.run_started_at, "invocation_id": _INVOCATION_ID,
            "api": API,
        }


def seed_dict(seed: SeedNode) -> dict[str, Any]:
    """A seed as dbt's `model`/`node` dict (what generate_schema_name receives)."""
    return {"name": seed.name, "path": seed.path, "original_file_path": seed.path,
            "resource_type": "seed", "fqn": list(seed.fqn), "package_name": seed.fqn[0],
            "unique_id": f"seed.{seed.fqn[0]}.{seed.name}", "version": None,
            "config": seed.base_config}


def _validate(layer: dict[str, Any], node: ModelNode) -> ModelConfig:
    diags = check_layer(layer, Location(node.path))
    if diags:
        raise SqlflowError(diagnostics=diags)
    return ModelConfig.model_validate(normalize_keys(layer))


def _node_dict(node: ModelNode, config: ModelConfig | None) -> dict[str, Any]:
    return {"name": node.name, "path": node.path, "original_file_path": node.path,
            "resource_type": "model", "fqn": list(node.fqn), "package_name": node.fqn[0],
            "unique_id": f"model.{node.fqn[0]}.{node.name}", "version": None,
            "config": config.model_dump(by_alias=True) if config else dict(node.base_config)}


# --- one model render ----------------------------------------------------------------------------


class _ModelRun:
    """The context of one render of one model; records refs, sources and config() calls."""

    def __init__(self, renderer: Renderer, node: ModelNode, config: ModelConfig,
                 capture: bool) -> None:
        self.renderer, self.node, self.capture = renderer, node, capture
        self.refs: list[str] = []
        self.sources: list[tuple[str, str]] = []
        self.inputs: list[InputRelation] = []
        self.config = _Config(node, config, capture)
        if node.name not in renderer.project.models:  # a data test (render_node)
            this = Relation("", node.name)
        elif capture:
            this = _base_relation(renderer, node)
        else:
            this = renderer.relation_of(node.name)
        self.context = renderer._base_context()
        self.context.update({
            "ref": self.ref, "source": self.source, "config": self.config, "this": this,
            "model": _node_dict(node, config),
        })
        self.macros = _MacroRuntime(renderer, self.context)
        package = node.fqn[0] if node.fqn else renderer.project.name
        if package != renderer.project.name and package in renderer.project.packages:
            # a package's model sees its package's macros first, as dbt renders it
            self.context = self.macros.context_for(package)

    def ref(self, *args: str, **kwargs: Any) -> Relation:
        name = self._ref_name(args, kwargs)
        project = self.renderer.project
        if name in project.seeds and name not in project.models:
            if not project.seeds[name].config.enabled:
                raise SqlflowError(f"`ref('{name}')`: seed `{name}` is disabled (enabled: false)",
                                   hint=f"enable `{name}` or remove the ref")
            relation = self.renderer.seed_relation(name)
            self.refs.append(name)
            self.inputs.append(InputRelation("ref", name, relation))
            return relation
        if name not in project.models:
            raise SqlflowError(f"`ref('{name}')`: no model named `{name}`",
                               hint=did_you_mean(name, [*project.models, *project.seeds]))
        if self.capture:  # config() capture: no recursion into other models
            relation = _base_relation(self.renderer, project.models[name])
        else:
            if not self.renderer.final_config(name).enabled:
                raise SqlflowError(f"`ref('{name}')`: model `{name}` is disabled (enabled: false)",
                                   hint=f"enable `{name}` or remove the ref")
            relation = self.renderer.relation_of(name)
        self.refs.append(name)
        self.inputs.append(InputRelation("ref", name, relation))
        return relation

    def _ref_name(self, args: tuple, kwargs: dict[str, Any]) -> str:
        if kwargs.keys() - {"version", "v"} or not 1 <= len(args) <= 2 or not all(
                isinstance(a, str) for a in args):
            raise SqlflowError("`ref()` takes a model name, or a package and a model name",
                               hint="write ref('model_name')")
        if kwargs:
            raise SqlflowError("model versions are not supported by sqlflow",
                               hint="drop the `version=` argument")
        project = self.renderer.project
        if len(args) == 2 and args[0] != project.name and args[0] in project.packages:
            fqns = {**{n: m.fqn for n, m in project.seeds.items()},
                    **{n: m.fqn for n, m in project.models.items()}}
            if fqns.get(args[1], ("",))[0] != args[0]:
                raise SqlflowError(f"`ref('{args[0]}', '{args[1]}')`: package `{args[0]}` has no "
                                   f"model or seed `{args[1]}`", hint=did_you_mean(
                                       args[1], [n for n, f in fqns.items() if f[0] == args[0]]))
            return args[1]
        if len(args) == 2 and args[0] != project.name:
            raise SqlflowError(f"`ref('{args[0]}', '{args[1]}')`: unknown package `{args[0]}`",
                               hint=f"models are refd from this project, `{project.name}`")
        return args[-1]

    def source(self, source_name: str, table_name: str) -> Relation:
        project = self.renderer.project
        table = project.source(source_name, table_name)
        if table is None:
            known = [t.key for t in project.sources.values()]
            raise SqlflowError(
                f"`source('{source_name}', '{table_name}')`: no source table "
                f"`{source_name}.{table_name}`", hint=did_you_mean(f"{source_name}.{table_name}", known))
        relation = self.renderer.source_relation(table)
        self.sources.append((source_name, table_name))
        self.inputs.append(InputRelation("source", table_name, relation, source_name))
        return relation


def _base_relation(renderer: Renderer, node: ModelNode) -> Relation:
    """A model's relation from its yml/project config alone (used while capturing config())."""
    return renderer.relation_for(node, _validate(dict(node.base_config), node))


class _Config:
    """`config`: `config(key=value, ...)` records a layer; `config.get`/`require` read it.

    While capturing, `get` sees the calls made so far; in the final render `current` is already
    the merged config, calls included.
    """

    sandbox_attrs = ("get", "require")

    def __init__(self, node: ModelNode, current: ModelConfig, capture: bool) -> None:
        self.node, self.current, self.capture = node, current, capture
        self.calls: list[dict[str, Any]] = []
        self.checked = True  # a model's keys; a data test's config has dbt's test keys
        self.test_keys: dict[str, Any] = {}

    def __call__(self, *args: Any, **kwargs: Any) -> str:
        layer: dict[str, Any] = {}
        for arg in args:
            if not isinstance(arg, dict):
                raise SqlflowError("`config()` takes keyword arguments or one dict",
                                   hint="write config(materialized='table')")
            layer.update(arg)
        layer.update(kwargs)
        diags = check_layer(layer, Location(self.node.path)) if self.checked else []
        if diags:
            raise SqlflowError(diagnostics=[_unlocated(d) for d in diags])
        self.calls.append(layer)
        return ""

    def get(self, key: str, default: Any = None) -> Any:
        if key in self.test_keys:
            value = self.test_keys[key]
            return default if value is None else value
        merged = dict(self.current.model_dump(by_alias=True))
        for call in self.calls if self.capture else ():
            merged = merge_config(merged, call)
        value = merged.get(key, MISSING)
        return default if value is MISSING or value is None else value

    def require(self, key: str) -> Any:
        value = self.get(key, MISSING)
        if value is MISSING:
            raise SqlflowError(f"model `{self.node.name}` needs config `{key}`",
                               hint=f"add `{key}` to its config; {did_you_mean(key, config_keys())}")
        return value


def _unlocated(diag: Any) -> Any:
    return replace(diag, location=None)


# --- macros ---------------------------------------------------------------------------------------


class _MacroRuntime:
    """Macros for one render, namespaced as dbt namespaces them (docs/semantics.md, "Macros,
    packages and adapter.dispatch"): a template of package P sees P's macros, then the root
    project's, then dbt's own by bare name; every package by its name (`dbt_utils.x`,
    `dbt.date_trunc`); and `adapter.dispatch`. Each macro file's module is built once."""

    def __init__(self, renderer: Renderer, context: dict[str, Any]) -> None:
        self.renderer = renderer
        self.root = renderer.project.name
        self.base = dict(context)  # the model's names, before any macro: every package sees them
        self.contexts: dict[str, dict[str, Any]] = {self.root: context}
        self.modules: dict[tuple[str, str], Any] = {}
        self._fill(context, self.root)

    def package(self, name: str) -> MacroPackage | None:
        project = self.renderer.project
        if name == self.root:
            return MacroPackage(name=name, macros=project.macros, files=project.macro_files)
        return project.packages.get(name)

    def _fill(self, context: dict[str, Any], package: str) -> None:
        for name in dict.fromkeys((package, self.root, INTERNAL)):
            found = self.package(name)
            for macro in found.macros if found else ():
                context.setdefault(macro, _MacroProxy(self, name, macro))
        for name in dict.fromkeys((self.root, *self.renderer.project.packages)):
            found = self.package(name)
            if found is not None:
                context.setdefault(name, MacroNamespace(
                    **{m: context[m] if name == package and m in context else
                       _MacroProxy(self, name, m) for m in found.macros}))
        context["adapter"] = Adapter(self, package)
        if package == INTERNAL:  # dbt's own macros read `flags`; a project's see none (semantics.md)
            context.setdefault("flags", _FLAGS)

    def context_for(self, package: str) -> dict[str, Any]:
        if package not in self.contexts:
            self.contexts[package] = context = dict(self.base)
            self._fill(context, package)
        return self.contexts[package]

    def find(self, package: str | None, name: str, caller: str) -> _MacroProxy | None:
        """dbt's `get_from_package`: `None` looks the name up as the caller's templates do."""
        if package is None:
            for candidate in dict.fromkeys((caller, self.root, INTERNAL)):
                found = self.package(candidate)
                if found is not None and name in found.macros:
                    return _MacroProxy(self, candidate, name)
            return None
        found = self.package(package)
        if found is None:
            raise SqlflowError(f"`adapter.dispatch`: no package named `{package}`",
                               hint="install it under dbt_packages/ (`dbt deps`) or fix the "
                                    "`dispatch:` search_order in dbt_project.yml")
        return _MacroProxy(self, package, name) if name in found.macros else None

    def macro(self, package: str, name: str) -> Any:
        found = self.package(package)
        assert found is not None
        macro = found.macros[name]
        key = (package, macro.path)
        if key not in self.modules:
            text = found.files[macro.path]
            self.modules[key] = compile_template("macro", macro.path, text).make_module(
                vars=self.context_for(package))
        return getattr(self.modules[key], name)

    def call(self, package: str, name: str, *args: Any, **kwargs: Any) -> Any:
        try:
            return self.macro(package, name)(*args, **kwargs)
        except MacroReturn as ret:
            return ret.value


class _MacroProxy:
    """A macro as a global or a namespace attribute: dbt semantics for `return(...)`."""

    def __init__(self, runtime: _MacroRuntime, package: str, name: str) -> None:
        self.runtime, self.package, self.name = runtime, package, name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.runtime.call(self.package, self.name, *args, **kwargs)


# --- entry points ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class RenderedProject:
    """Rendered models (the selected ones, in topological order) and the DAG of all of them."""

    models: dict[str, RenderedModel]
    dag: Dag
    seeds: dict[str, Relation] = field(default_factory=dict)  # selected seeds -> their tables
    # each selected `incremental` model rendered with `is_incremental()` true
    incremental: dict[str, RenderedModel] = field(default_factory=dict)

    @property
    def order(self) -> tuple[str, ...]:
        return tuple(self.models)


def render_model(project: Project, name: str, *, target: Any, mode: Mode = "batch",
                 vars: dict[str, Any] | None = None) -> RenderedModel:
    """Render one model. `target` is a `profiles.Target`; `vars` are CLI vars (override project's)."""
    return Renderer(project, target, mode, vars).render(name)


def render_project(project: Project, target: Any, mode: Mode = "batch",
                   select: Sequence[str] | str | None = None,
                   vars: dict[str, Any] | None = None) -> RenderedProject:
    """Render every enabled model, build the DAG, and keep the `select`ed ones.

    Every model is rendered (selection needs the whole graph); all errors of all models are
    raised together as one SqlflowError.
    """
    renderer = Renderer(project, target, mode, vars)
    rendered: dict[str, RenderedModel] = {}
    sink = DiagnosticSink()
    seen: set[str] = set()
    for name in sorted(project.models):
        try:
            if renderer.final_config(name).enabled:
                rendered[name] = renderer.render(name)
        except SqlflowError as exc:
            for diag in exc.diagnostics:
                if diag.format() not in seen:
                    seen.add(diag.format())
                    sink.items.append(diag)
    names = check_names(renderer, rendered)
    sink.items.extend(names or check_ownership(renderer, rendered))
    sink.raise_if_errors()
    seeds = [s for s in project.seeds.values() if s.config.enabled]
    fqns = {**{n: project.models[n].fqn for n in rendered}, **{s.name: s.fqn for s in seeds}}
    dag = build_dag([*rendered.values(), *seeds], fqns)  # seeds are nodes: ordered and selectable
    chosen = dag.select(select)
    incremental = {n: renderer.render_incremental(n) for n in chosen if n in rendered
                   and rendered[n].config.materialized == "incremental"}
    return RenderedProject({n: rendered[n] for n in chosen if n in rendered}, dag,
                           {n: renderer.seed_relation(n) for n in chosen if n in project.seeds},
                           incremental)
