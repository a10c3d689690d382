"""dbt data tests rendered for `sqlflow build` (docs/semantics.md, "sqlflow build").

Generic tests on the columns of models and seeds (yml `tests:` / `data_tests:`): dbt's four
built-ins (`unique`, `not_null`, `accepted_values`, `relationships`) render through dbt's own
macros (`adapter.dispatch('test_unique', 'dbt')`, dbt-adapters' SQL), and singular tests are
the `.sql` files of the test paths, rendered like models. Custom generic tests (a
`{% test name(model, column_name) %}` block in the macro paths, `tests/generic/` or an
installed package: the macro `test_<name>`) render like the built-ins, with `model`, the
column (none for a test on the model itself) and the test's arguments. A test's SQL selects
the failing rows; it fails when it returns any.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from sqlflow.errors import Location, SqlflowError
from sqlflow.project.load import ModelNode, Project
from sqlflow.project.packages import INTERNAL, TEST_PREFIX
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


def test_name(test: str, owner: str, args: dict[str, Any]) -> str:
    """The name dbt gives a generic test node (its full name, `synthesize_generic_test_names`):
    the test (with its package), the node, then every argument value in argument-name order.

    >>> test_name("accepted_values", "orders", {"column_name": "tier", "values": ["a", "b"]})
    'accepted_values_orders_tier__a__b'
    >>> test_name("dbt_utils.at_least_one", "orders", {"column_name": "id"})
    'dbt_utils_at_least_one_orders_id'
    """
    flat: list[str] = []
    for key in sorted(args):
        value = args[key]
        parts = list(value.values()) if isinstance(value, dict) else (
            list(value) if isinstance(value, (list, tuple)) else [value])
        flat += [re.sub("[^0-9a-zA-Z_]+", "_", str(p)) for p in parts]
    return f"{test.replace('.', '_')}_{owner}_{'__'.join(flat)}"


def _test_macro(project: Project, test: str, path: str) -> str:
    """The Jinja callable of generic test `test` (`name` or `package.name`): dbt's built-ins
    through `adapter.dispatch`, a custom one (`{% test name %}`, macro `test_<name>`) from the
    project, else the first installed package defining it, as dbt resolves test macros."""
    package, _, name = test.rpartition(".")
    macro = TEST_PREFIX + name
    if not package:
        if macro in project.macros:
            return macro
        package = next((p for p, found in project.packages.items()
                        if p != INTERNAL and macro in found.macros), "")
        if not package and name in BUILTIN:
            return f"adapter.dispatch('{macro}', 'dbt')"
    elif package == project.name and macro in project.macros:
        return macro
    elif package == "dbt" and name in BUILTIN:
        return f"adapter.dispatch('{macro}', 'dbt')"
    found = project.packages.get(package)
    if found is None or macro not in found.macros:
        raise SqlflowError(f"generic test `{test}` is not defined",
                           location=Location(path),
                           hint=f"define it with `{{% test {name}(model, column_name) %}}` in macros/ "
                                "or tests/generic/, or install the package that has it (`dbt deps`)")
    return f"{package}.{macro}"


def generic_tests(project: Project, renderer: Renderer) -> tuple[list[DataTest], list[Skipped]]:
    """Every generic test on a model, a model's column or a seed's column, rendered."""
    tests: list[DataTest] = []
    owners: list[tuple[str, str, list[tuple[str | None, Any]]]] = [
        (name, node.properties.path, [(None, t) for t in node.properties.tests]
         + list(_specs(node.properties.columns)))
        for name, node in sorted(project.models.items()) if node.properties is not None]
    owners += [(name, seed.yml_path, list(_specs(seed.columns_yml)))
               for name, seed in sorted(project.seeds.items()) if seed.yml_path]
    for owner, path, specs in owners:
        for column, spec in specs:
            test, args, config = _parse_spec(spec)
            test_id = test_name(test, owner, {**args, **({"column_name": column} if column else {})})
            extra: dict[str, Any] = {}
            kwargs = [f"model=ref('{owner}')"]
            if column is not None:
                kwargs.append("column_name='" + column.replace("'", "") + "'")
            kwargs += [f"{k}={_arg_text(v, k, extra)}" for k, v in sorted(args.items())]
            text = "{{ " + _test_macro(project, test, path) + "(" + ", ".join(kwargs) + ") }}"
            node = ModelNode(name=test_id, path=path, raw_sql=text, fqn=(project.name, test_id))
            rendered = renderer.render_node(node, extra)
            tests.append(DataTest(test_id, (owner,), rendered.refs, rendered.sql,
                                  str(config.get("severity", "error")).lower(), path))
    return tests, []


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
