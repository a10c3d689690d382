"""dbt data tests rendered for `sqlflow build` (docs/semantics.md, "sqlflow build").

Generic tests on the columns of models and seeds (yml `tests:` / `data_tests:`): dbt's four
built-ins (`unique`, `not_null`, `accepted_values`, `relationships`) render through dbt's own
macros (`adapter.dispatch('test_unique', 'dbt')`, dbt-adapters' SQL), and singular tests are
the `.sql` files of the test paths, rendered like models. A test's SQL selects the failing
rows; it fails when it returns any. Custom generic tests (`{% test %}` blocks) are listed as
not run, with the dbt command that runs them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlflow.errors import SqlflowError
from sqlflow.project.load import ModelNode, Project
from sqlflow.rendering.render import Renderer

BUILTIN = ("unique", "not_null", "accepted_values", "relationships")
_NOT_ARGS = {"config", "severity", "name", "description", "tags", "where", "arguments"}


@dataclass(frozen=True)
class DataTest:
    """One test: the node it is attached to, every node it reads, its SQL and severity."""

    name: str
    attached: tuple[str, ...]
    refs: tuple[str, ...]
    sql: str
    severity: str  # "error" or "warn"
    path: str


@dataclass(frozen=True)
class Skipped:
    name: str
    path: str
    why: str


def _specs(columns: Any) -> list[tuple[str, Any]]:
    """(column, test spec) for every column test of a yml `columns:` list."""
    out = []
    for col in columns or ():
        data = col if isinstance(col, dict) else {"name": getattr(col, "name", None),
                                                   **(getattr(col, "model_extra", None) or {})}
        for key in ("tests", "data_tests"):
            for spec in data.get(key) or []:
                out.append((str(data.get("name")), spec))
    return out


def _parse_spec(spec: Any) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(test name, arguments, config) of a yml test entry."""
    if isinstance(spec, str):
        return spec, {}, {}
    if isinstance(spec, dict) and len(spec) == 1:
        name, body = next(iter(spec.items()))
        body = body if isinstance(body, dict) else {}
        args = {k: v for k, v in body.items() if k not in _NOT_ARGS}
        args.update(body.get("arguments") or {})
        config = dict(body.get("config") or {})
        if "severity" in body:
            config["severity"] = body["severity"]
        return str(name), args, config
    raise SqlflowError(f"a test entry must be a name or a mapping, not {spec!r}",
                       hint="write `- unique` or `- accepted_values: {values: [a, b]}`")


def _arg_text(value: Any, key: str, extra: dict[str, Any]) -> str:
    """A test argument as Jinja: `ref(...)`/`source(...)` strings are rendered, as dbt does."""
    if isinstance(value, str) and value.strip().startswith(("ref(", "source(")):
        return value.strip()
    extra[f"arg_{key}"] = value
    return f"arg_{key}"


def generic_tests(project: Project, renderer: Renderer) -> tuple[list[DataTest], list[Skipped]]:
    tests: list[DataTest] = []
    skipped: list[Skipped] = []
    owners: list[tuple[str, str, Any]] = [
        (name, node.properties.path, node.properties.columns)
        for name, node in sorted(project.models.items()) if node.properties is not None]
    owners += [(name, seed.yml_path, seed.columns_yml)
               for name, seed in sorted(project.seeds.items()) if seed.yml_path]
    for owner, path, columns in owners:
        for column, spec in _specs(columns):
            test, args, config = _parse_spec(spec)
            test_id = f"{test}_{owner}_{column}"
            if test.split(".")[-1] not in BUILTIN:
                skipped.append(Skipped(test_id, path, "a custom generic test"))
                continue
            extra: dict[str, Any] = {}
            kwargs = ", ".join(f"{k}={_arg_text(v, k, extra)}" for k, v in sorted(args.items()))
            text = ("{{ adapter.dispatch('test_" + test.split(".")[-1] + "', 'dbt')(model=ref('"
                    + owner + "'), column_name='" + column.replace("'", "") + "'"
                    + (", " + kwargs if kwargs else "") + ") }}")
            node = ModelNode(name=test_id, path=path, raw_sql=text, fqn=(project.name, test_id))
            rendered = renderer.render_node(node, extra)
            tests.append(DataTest(test_id, (owner,), rendered.refs, rendered.sql,
                                  str(config.get("severity", "error")).lower(), path))
    return tests, skipped


def singular_tests(project: Project, renderer: Renderer, test_paths: list[str]) -> list[DataTest]:
    out = []
    for folder in test_paths:
        base = project.root / folder
        for file in sorted(base.rglob("*.sql")) if base.is_dir() else []:
            if "generic" in file.relative_to(base).parts:
                continue  # custom generic test definitions, not tests
            rel = file.relative_to(project.root).as_posix()
            node = ModelNode(name=file.stem, path=rel, raw_sql=file.read_text(),
                             fqn=(project.name, file.stem))
            rendered = renderer.render_node(node)
            out.append(DataTest(file.stem, rendered.refs, rendered.refs, rendered.sql, "error", rel))
    return out


def data_tests(project: Project, target: Any,
               vars: dict[str, Any] | None = None) -> tuple[list[DataTest], list[Skipped]]:
    """Every data test of the project, rendered for `target`; and the ones sqlflow cannot run."""
    renderer = Renderer(project, target, "batch", vars)
    generic, skipped = generic_tests(project, renderer)
    return generic + singular_tests(project, renderer, list(project.test_paths)), skipped
