"""Seeds as dbt reads them: `seeds/**/*.csv`, configured by `seeds:` in dbt_project.yml and yml.

A seed is a node of the DAG (docs/semantics.md, "Seeds"): `ref('name')` reads its table and
`sqlflow seed` / `sqlflow build` load it. Its config merges like a model's: the `seeds:` tree
of dbt_project.yml (root first, the most specific folder last), then its yml `config:`.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sqlflow.errors import DiagnosticSink, Location
from sqlflow.identifiers import RULE, problem
from sqlflow.project.config import merge_config, normalize_keys, project_layers
from sqlflow.project.sources import line_of, load_yaml


class SeedConfig(BaseModel):
    """The seed configs sqlflow acts on; dbt's other seed keys are accepted and ignored."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, frozen=True)

    enabled: bool = True
    schema_: str | None = Field(default=None, alias="schema")
    alias: str | None = None
    tags: list[str] = Field(default_factory=list)
    column_types: dict[str, str] = Field(default_factory=dict)
    quote_columns: bool | None = None
    delimiter: str = ","
    file_format: str | None = None

    @property
    def schema_name(self) -> str | None:
        return self.schema_


class SeedNode(BaseModel):
    """One seed file with its merged config."""

    model_config = ConfigDict(frozen=True)

    name: str
    path: str
    fqn: tuple[str, ...]
    config: SeedConfig
    columns_yml: tuple[dict[str, Any], ...] = ()  # the yml `columns:` entries (their tests)
    yml_path: str = ""

    @property
    def base_config(self) -> dict[str, Any]:
        return self.config.model_dump(by_alias=True)

    # what the DAG reads of a node (sqlflow.project.dag.build_dag): a seed reads nothing
    resource_type: str = "seed"
    refs: tuple[str, ...] = ()
    sources: tuple[tuple[str, str], ...] = ()


def _yml_entries(root: Path, folders: list[str], sink: DiagnosticSink,
                 shown: Path | None = None) -> dict[str, tuple[str, dict]]:
    out: dict[str, tuple[str, dict]] = {}
    for folder in folders:
        base = root / folder
        files = sorted([*base.rglob("*.yml"), *base.rglob("*.yaml")]) if base.is_dir() else []
        for file in files:
            rel = file.relative_to(shown or root).as_posix()
            data = load_yaml(file, rel)
            entries = data.get("seeds") if isinstance(data, dict) else None
            for entry in entries if isinstance(entries, list) else []:
                if isinstance(entry, dict) and isinstance(entry.get("name"), str):
                    out[entry["name"]] = (rel, entry)
    return out


def read_seeds(root: Path, project: str, seed_paths: list[str], tree: dict[str, Any],
               sink: DiagnosticSink, model_paths: tuple[str, ...] = ("models",), *,
               shown: Path | None = None, over: dict[str, Any] | None = None) -> dict[str, SeedNode]:
    """Every `<seed-path>/**/*.csv`, keyed by file name, with its config; problems to `sink`.
    A package's seeds: `shown` is the root project (paths are relative to it) and `over` its
    `seeds:` tree, applied over the package's own."""
    ymls = _yml_entries(root, [*seed_paths, *model_paths], sink, shown)
    seeds: dict[str, SeedNode] = {}
    for folder in seed_paths:
        base = root / folder
        for file in sorted(base.rglob("*.csv")) if base.is_dir() else []:
            rel = file.relative_to(shown or root).as_posix()
            fqn = (project, *file.relative_to(base).with_suffix("").parts)
            name = fqn[-1]
            why = problem(name)
            if why is not None:
                sink.error(f"seed file `{rel}`: its name `{name}` {why}", Location(rel),
                           f"rename the file; a seed name uses {RULE}")
                continue
            if name in seeds:
                sink.error(f"two seeds are named `{name}` ({seeds[name].path} and {rel})",
                           Location(rel), "rename one of the files")
                continue
            config: dict[str, Any] = {}
            for layer in [*project_layers(tree or {}, fqn), *project_layers(over or {}, fqn)]:
                config = merge_config(config, layer)
            yml_path, entry = ymls.get(name, ("", {}))
            if isinstance(entry.get("config"), dict):
                config = merge_config(config, entry["config"])
            try:
                parsed = SeedConfig.model_validate(normalize_keys(config))
            except ValidationError as exc:
                err = exc.errors()[0]
                key = ".".join(str(p) for p in err["loc"])
                where = Location(yml_path, line_of(entry) or 1) if yml_path else Location(
                    "dbt_project.yml", line_of(tree) or 1)
                sink.error(f"seed `{name}`: config `{key}`: {err['msg']}", where,
                           "see dbt's seed configs (column_types, quote_columns, delimiter, schema)")
                continue
            columns = entry.get("columns")
            columns = columns if isinstance(columns, list) else []
            seeds[name] = SeedNode(name=name, path=rel, fqn=fqn, config=parsed,
                                   columns_yml=tuple(c for c in columns if isinstance(c, dict)),
                                   yml_path=yml_path)
    return seeds


def seed_columns(file: Path, delimiter: str = ",") -> list[str]:
    """The column names of a seed file (its header row)."""
    with file.open(newline="", encoding="utf-8") as handle:
        return next(csv.reader(handle, delimiter=delimiter), [])
