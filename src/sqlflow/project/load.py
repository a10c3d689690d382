"""Load a dbt project into plain values: project settings, models, yml properties, sources, macros.

Nothing here renders Jinja in models; a model's config from `dbt_project.yml` and its yml is
merged here (`ModelNode.base_config`), and render adds the `{{ config(...) }}` calls on top.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sqlflow.errors import Diagnostic, DiagnosticSink, Location, SqlflowError, did_you_mean
from sqlflow.identifiers import RULE, problem
from sqlflow.project.config import check_layer, merge_config, normalize_keys, project_layers, tree_layer
from sqlflow.project.left_to_dbt import dbt_only_notices
from sqlflow.project.packages import (
    INTERNAL,
    PACKAGES_DIR,
    MacroDef,
    MacroPackage,
    generic_test_paths,
    installed_packages,
    internal_package,
    read_macro_files,
    sql_files,
)
from sqlflow.project.seeds import SeedNode, read_seeds
from sqlflow.project.sources import Column, SourceTable, columns_of, line_of, load_yaml, source_tables

PROJECT_FILE = "dbt_project.yml"

# --- the values a project loads into ------------------------------------------------------------


class ProjectFile(BaseModel):
    """The parts of dbt_project.yml sqlflow reads; other dbt keys are accepted and ignored."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    name: str
    profile: str | None = None
    version: str | float | None = None
    config_version: int = Field(default=2, alias="config-version")
    model_paths: list[str] = Field(default_factory=lambda: ["models"], alias="model-paths")
    macro_paths: list[str] = Field(default_factory=lambda: ["macros"], alias="macro-paths")
    seed_paths: list[str] = Field(default_factory=lambda: ["seeds"], alias="seed-paths")
    test_paths: list[str] = Field(default_factory=lambda: ["tests"], alias="test-paths")
    vars: dict[str, Any] = Field(default_factory=dict)
    models: dict[str, Any] = Field(default_factory=dict)
    seeds: dict[str, Any] = Field(default_factory=dict)
    dispatch: list[Any] = Field(default_factory=list)


class ModelProperties(BaseModel):
    """A model's entry in a `models/**/*.yml` file."""

    model_config = ConfigDict(frozen=True)

    description: str = ""
    columns: tuple[Column, ...] = ()
    config: dict[str, Any] = Field(default_factory=dict)
    path: str = ""
    line: int = 0
    tests: tuple[Any, ...] = ()  # model-level generic tests (`data_tests:` / `tests:`)


class ModelNode(BaseModel):
    """One `models/**/*.sql` file, unrendered, with its config from the project file and yml."""

    model_config = ConfigDict(frozen=True)

    name: str
    path: str
    raw_sql: str
    fqn: tuple[str, ...]
    properties: ModelProperties | None = None
    base_config: dict[str, Any] = Field(default_factory=dict)

    @property
    def location(self) -> Location:
        return Location(self.path)


class Project(BaseModel):
    """Everything `load_project` read: the input of render."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    name: str
    profile: str | None
    root: Path
    vars: dict[str, Any]
    model_paths: tuple[str, ...]
    macro_paths: tuple[str, ...]
    models: dict[str, ModelNode]
    sources: dict[str, SourceTable]  # "source_name.table_name" -> table
    macros: dict[str, MacroDef]
    macro_files: dict[str, str]  # project-relative path -> text
    # `dbt_packages/*` by package name, and dbt's own macros as package `dbt` (packages.py)
    packages: dict[str, MacroPackage] = Field(default_factory=dict)
    # dbt_project.yml `dispatch:`: macro namespace -> the packages searched, in order
    dispatch: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    seeds: dict[str, SeedNode] = Field(default_factory=dict)
    test_paths: tuple[str, ...] = ("tests",)
    # dbt_project.yml `tests:` then `data_tests:`: data test config by fqn (rendering.test_config)
    test_configs: tuple[dict[str, Any], ...] = ()
    warnings: tuple[Diagnostic, ...] = ()

    def source(self, source_name: str, table_name: str) -> SourceTable | None:
        return self.sources.get(f"{source_name}.{table_name}")


# --- loading ----------------------------------------------------------------------------------------


def load_project(project_dir: Path) -> Project:
    """Read `project_dir` (dbt_project.yml, models, yml properties, sources, macros).

    Every problem found is reported together as one SqlflowError, each at its file and line.
    """
    root = Path(project_dir).resolve()
    sink = DiagnosticSink()
    pfile, tree_lines = _read_project_file(root)
    _check_tree(pfile.models, tree_lines, sink)
    sql_files = _model_files(root, pfile)
    props, sources = _read_ymls(root, pfile, sink)
    models = _build_models(root, pfile, sql_files, props, sink, orphans=False)
    macros, macro_files = _read_macros(root, pfile, sink)
    packages = {**installed_packages(root, sink), INTERNAL: internal_package()}
    seeds = read_seeds(root, pfile.name, pfile.seed_paths, pfile.seeds, sink,
                       tuple(pfile.model_paths))
    package_tests = _package_nodes(root, pfile, models, sources, seeds, sink, props)
    for name, prop in props.items():
        if name not in models:
            sink.warning(f"yml properties for model `{name}`, which has no .sql file",
                         Location(prop.path, prop.line), did_you_mean(name, list(models)))
    for name in seeds.keys() & models.keys():
        sink.error(f"a seed and a model are both named `{name}` ({seeds[name].path} and "
                   f"{models[name].path})", Location(seeds[name].path),
                   "rename one of them; dbt refuses the same name twice too")
    sink.raise_if_errors()
    return Project(
        name=pfile.name, profile=pfile.profile, root=root, vars=_project_vars(pfile),
        model_paths=tuple(pfile.model_paths), macro_paths=tuple(pfile.macro_paths),
        models=models, sources=sources, macros=macros, macro_files=macro_files,
        packages=packages, dispatch=_dispatch(pfile, sink), seeds=seeds,
        test_paths=(*pfile.test_paths, *package_tests),
        test_configs=tuple(tree for key in ("tests", "data_tests")
                           if isinstance(tree := (pfile.model_extra or {}).get(key), dict)),
        warnings=tuple(sink.warnings) + tuple(_unused_paths(pfile, models)) + tuple(
            dbt_only_notices(root, pfile.model_paths,
                             (pfile.model_extra or {}).get("snapshot-paths") or ["snapshots"])),
    )


def _package_nodes(root: Path, pfile: ProjectFile, models: dict[str, ModelNode],
                   sources: dict[str, SourceTable], seeds: dict[str, SeedNode],
                   sink: DiagnosticSink,
                   root_props: dict[str, ModelProperties] | None = None) -> list[str]:
    """The models, sources and seeds of every package installed under `dbt_packages/`, added
    to the project's, as dbt loads them (docs/semantics.md, "Macros, packages and
    adapter.dispatch"): each one's fqn starts with its package's name, its config is the
    package's `models:`/`seeds:` tree with the root project's over it. A root-project yml
    entry naming a package model is that model's properties (description, columns, tests,
    config), as dbt's patch lookup falls back to any package; the package's own entry for it
    too is an error, as in dbt (a model is patched once). Returns the packages' test paths
    (their singular tests), relative to `root`."""
    tests: list[str] = []
    folder = root / PACKAGES_DIR
    for pdir in sorted(folder.iterdir()) if folder.is_dir() else []:
        if not (pdir / PROJECT_FILE).is_file():
            continue
        try:
            ppf, _ = _read_project_file(pdir)
        except SqlflowError:
            continue  # reported by the package's macro loading (packages.installed_packages)
        props, _ = _read_ymls(pdir, ppf, sink, shown=root, sources=sources)
        names = {fqn[-1] for _, _, fqn in _model_files(pdir, ppf, shown=root)}
        for name, prop in (root_props or {}).items():
            if name in models or name not in names:
                continue
            if name in props:
                sink.error(f"model `{name}` of package `{ppf.name}` has properties in two places "
                           f"({props[name].path}:{props[name].line} and {prop.path}:{prop.line})",
                           Location(prop.path, prop.line),
                           "keep one entry; dbt patches a model once too")
                continue
            props[name] = prop
        _build_models(pdir, ppf, _model_files(pdir, ppf, shown=root), props, sink,
                      trees=(ppf.models, pfile.models), models=models)
        for name, seed in read_seeds(pdir, ppf.name, ppf.seed_paths, ppf.seeds, sink,
                                     tuple(ppf.model_paths), shown=root,
                                     over=pfile.seeds).items():
            if name in seeds or name in models:
                sink.error(f"package `{ppf.name}` has a seed named `{name}` like another node",
                           Location(seed.path), "rename one of them")
                continue
            seeds[name] = seed
        tests += [(pdir / t).relative_to(root).as_posix() for t in ppf.test_paths]
    return tests


def _read_project_file(root: Path) -> tuple[ProjectFile, Any]:
    path = root / PROJECT_FILE
    if not path.is_file():
        raise SqlflowError(f"no {PROJECT_FILE} in {root}", hint="run inside a dbt project")
    data = load_yaml(path, PROJECT_FILE) or {}
    try:
        pfile = ProjectFile.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = str(err["loc"][0]) if err["loc"] else ""
        raise SqlflowError(f"`{key}`: {err['msg']}", location=Location(
            PROJECT_FILE, line_of(data, key) or 1), hint="see dbt's dbt_project.yml reference") from None
    return pfile, data.get("models") if isinstance(data, dict) else None


def _project_vars(pfile: ProjectFile) -> dict[str, Any]:
    """Global vars plus the ones scoped to this project (`vars: {<project>: {...}}`)."""
    out = {k: v for k, v in pfile.vars.items() if k != pfile.name}
    scoped = pfile.vars.get(pfile.name)
    if isinstance(scoped, dict):
        out.update(scoped)
    return out


def _check_tree(tree: Any, lines: Any, sink: DiagnosticSink) -> None:
    if not isinstance(tree, dict):
        return
    layer = tree_layer(tree)
    key_lines = {k.lstrip("+"): v for k, v in getattr(lines, "key_lines", {}).items()
                 if isinstance(k, str)}
    for diag in check_layer(layer, Location(PROJECT_FILE, line_of(lines)), key_lines):
        sink.items.append(diag)
    for key, value in tree.items():
        if isinstance(value, dict) and not str(key).startswith("+"):
            _check_tree(value, value, sink)


def _model_files(root: Path, pfile: ProjectFile,
                 shown: Path | None = None) -> list[tuple[str, Path, tuple[str, ...]]]:
    """(path relative to `shown`, the project by default; file, fqn) of every model .sql file,
    in path order."""
    out = []
    for mpath in pfile.model_paths:
        base = root / mpath
        for file in sorted(base.rglob("*.sql")) if base.is_dir() else []:
            rel = file.relative_to(shown or root).as_posix()
            parts = file.relative_to(base).with_suffix("").parts
            out.append((rel, file, (pfile.name, *parts)))
    return out


def _build_models(root: Path, pfile: ProjectFile, files: list, props: dict[str, ModelProperties],
                  sink: DiagnosticSink, trees: tuple[dict[str, Any], ...] | None = None,
                  models: dict[str, ModelNode] | None = None,
                  orphans: bool = True) -> dict[str, ModelNode]:
    """The models of `files` added to `models`; configs from the `models:` `trees` (the
    project's own; a package's, then the root project's over it). `orphans`: warn about
    properties naming no model here (the root project's are checked after the packages')."""
    models = {} if models is None else models
    for rel, file, fqn in files:
        name = fqn[-1]
        why = problem(name)  # docs/semantics.md, "Names": a model's name becomes its table's
        if why is not None:
            sink.error(f"model file `{rel}`: its name `{name}` {why}, so it cannot name a model",
                       Location(rel), f"rename the file; a model name uses {RULE}")
            continue
        if name in models:
            sink.error(f"two models are named `{name}` ({models[name].path} and {rel})",
                       Location(rel), "rename one of the files; model names are unique")
            continue
        config: dict[str, Any] = {}
        for tree in (pfile.models,) if trees is None else trees:
            for layer in project_layers(tree, fqn):
                config = merge_config(config, layer)
        prop = props.get(name)
        if prop is not None:
            config = merge_config(config, prop.config)
        models[name] = ModelNode(name=name, path=rel, raw_sql=file.read_text(), fqn=fqn,
                                 properties=prop, base_config=normalize_keys(config))
    for name, prop in props.items() if orphans else ():
        if name not in models:
            sink.warning(f"yml properties for model `{name}`, which has no .sql file",
                         Location(prop.path, prop.line), did_you_mean(name, list(models)))
    return models


def _unused_paths(pfile: ProjectFile, models: dict[str, ModelNode]) -> list[Diagnostic]:
    """dbt warns about `models:` tree folders that match no model; so do we."""
    prefixes = {node.fqn[:i] for node in models.values() for i in range(1, len(node.fqn) + 1)}
    out: list[Diagnostic] = []

    def walk(level: dict[str, Any], path: tuple[str, ...]) -> None:
        for key, value in level.items():
            if isinstance(value, dict) and not str(key).startswith("+"):
                here = (*path, str(key))
                if here not in prefixes and models:
                    out.append(Diagnostic(
                        f"`models: {'.'.join(here)}` in dbt_project.yml matches no model",
                        Location(PROJECT_FILE, line_of(level, key)),
                        "check the folder name, or prefix config keys with `+`", "warning"))
                else:
                    walk(value, here)

    walk(pfile.models, ())
    return out


# --- yml property files ------------------------------------------------------------------------------

_FOLDED_PROPERTIES = ("tags", "meta", "docs", "access", "group")


def _read_ymls(root: Path, pfile: ProjectFile, sink: DiagnosticSink,
               shown: Path | None = None,
               sources: dict[str, SourceTable] | None = None,
               ) -> tuple[dict[str, ModelProperties], dict[str, SourceTable]]:
    props: dict[str, ModelProperties] = {}
    sources = {} if sources is None else sources
    for mpath in pfile.model_paths:
        base = root / mpath
        files = sorted([*base.rglob("*.yml"), *base.rglob("*.yaml")]) if base.is_dir() else []
        for file in files:
            rel = file.relative_to(shown or root).as_posix()
            data = load_yaml(file, rel)
            if not isinstance(data, dict):
                continue
            for entry in _entries(data, "models", rel, sink):
                _add_model_props(entry, rel, props, sink)
            for entry in _entries(data, "sources", rel, sink):
                for table in source_tables(entry, rel, sink):
                    if table.key in sources:
                        sink.error(f"source table `{table.key}` is defined twice (also at "
                                   f"{sources[table.key].location})", table.location,
                                   "keep one definition")
                    sources[table.key] = table
    return props, sources


def _entries(data: dict, key: str, rel: str, sink: DiagnosticSink) -> list[dict]:
    items = data.get(key) or []
    if not isinstance(items, list):
        sink.error(f"`{key}:` must be a list", Location(rel, line_of(data, key)),
                   f"write `{key}:` followed by `- name: ...` items")
        return []
    good = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            sink.error(f"every entry of `{key}:` needs a `name:`", Location(rel, line_of(item)),
                       "add `name: ...`")
        else:
            good.append(item)
    return good


def _add_model_props(entry: dict, rel: str, props: dict[str, ModelProperties],
                     sink: DiagnosticSink) -> None:
    name = entry["name"]
    where = Location(rel, line_of(entry))
    if name in props:
        sink.error(f"model `{name}` has properties in two places (also "
                   f"{props[name].path}:{props[name].line})", where, "merge them into one entry")
        return
    config = entry.get("config") or {}
    if not isinstance(config, dict):
        sink.error("`config:` must be a mapping", where, "write `config:` then `key: value` lines")
        return
    folded = {k: entry[k] for k in _FOLDED_PROPERTIES if k in entry}
    config = merge_config(folded, config)
    sink.items.extend(check_layer(config, where, getattr(entry.get("config"), "key_lines", None)))
    props[name] = ModelProperties(description=entry.get("description") or "",
                                  columns=columns_of(entry, rel, sink), config=config,
                                  path=rel, line=where.line,
                                  tests=tuple(entry.get("data_tests") or entry.get("tests") or ()))


# --- macros and seeds ----------------------------------------------------------------------------


def _read_macros(root: Path, pfile: ProjectFile,
                 sink: DiagnosticSink) -> tuple[dict[str, MacroDef], dict[str, str]]:
    folders = [*pfile.macro_paths, *generic_test_paths(pfile.test_paths)]  # `{% test %}` blocks too
    package = read_macro_files(pfile.name, sql_files(root, folders, root), sink)
    return dict(package.macros), dict(package.files)


def _dispatch(pfile: ProjectFile, sink: DiagnosticSink) -> dict[str, tuple[str, ...]]:
    """dbt_project.yml `dispatch: [{macro_namespace: x, search_order: [a, b]}]`."""
    out: dict[str, tuple[str, ...]] = {}
    for item in pfile.dispatch:
        namespace = item.get("macro_namespace") if isinstance(item, dict) else None
        order = item.get("search_order") if isinstance(item, dict) else None
        if not isinstance(namespace, str) or not isinstance(order, list) or not all(
                isinstance(p, str) for p in order):
            sink.error("every `dispatch:` entry needs `macro_namespace:` and a `search_order:` list",
                       Location(PROJECT_FILE, line_of(item) or 1),
                       "write `- macro_namespace: dbt_utils` and `search_order: [my_project, dbt_utils]`")
            continue
        out[namespace] = tuple(order)
    return out
