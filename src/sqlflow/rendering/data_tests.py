"""dbt data tests rendered for `sqlflow build` (docs/semantics.md, "sqlflow build").

Generic tests on the columns of models and seeds (yml `tests:` / `data_tests:`): dbt's four
built-ins (`unique`, `not_null`, `accepted_values`, `relationships`) render through dbt's own
macros (`adapter.dispatch('test_unique', 'dbt')`, dbt-adapters' SQL), and singular tests are
the `.sql` files of the test paths, rendered like models. Custom generic tests (a
`{% test name(model, column_name) %}` block in the macro paths, `tests/generic/` or an
installed package: the macro `test_<name>`) render like the built-ins, with `model`, the
column (none for a test on the model itself) and the test's arguments. A test's SQL selects
the failing rows; it fails when it returns any. Its config (`sqlflow.rendering.test_config`)
is dbt's: `where` filters the tested model (`model` is `(select * from <model> where ...)
dbt_subquery`, dbt's `get_where_subquery`), `limit`, `fail_calc` / `warn_if` / `error_if`,
`severity`, `store_failures` / `store_failures_as` (the failing rows kept in `relation`).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from sqlflow.errors import Location, SqlflowError
from sqlflow.project.config import project_layers
from sqlflow.project.load import ModelNode, Project
from sqlflow.project.packages import INTERNAL, PACKAGES_DIR, TEST_PREFIX
from sqlflow.rendering.render import Relation, Renderer
from sqlflow.rendering.test_config import KEYS, TestConfig, as_dict, resolve

BUILTIN = ("unique", "not_null", "accepted_values", "relationships")
_NOT_ARGS = {"config", "name", "description", "arguments", *KEYS}


@dataclass(frozen=True)
class DataTest:
    """One test: the node it is attached to, every node it reads, its SQL and config;
    `relation`: where its failing rows are stored (`store_failures`), else None."""

    name: str
    attached: tuple[str, ...]
    refs: tuple[str, ...]
    sql: str
    path: str
    config: TestConfig = TestConfig()
    relation: Relation | None = None

    @property
    def severity(self) -> str:  # "error" or "warn"
        return self.config.severity


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
    """(test name, arguments, config) of a yml test entry: dbt's config keys beside the
    arguments, then under `config:`; a custom `name:` is kept in the config as `name`."""
    if isinstance(spec, str):
        return spec, {}, {}
    if isinstance(spec, dict) and "test_name" in spec:  # {test_name: unique, name: ..., ...}
        spec = {spec["test_name"]: {k: v for k, v in spec.items() if k != "test_name"}}
    if isinstance(spec, dict) and len(spec) == 1:
        name, body = next(iter(spec.items()))
        body = body if isinstance(body, dict) else {}
        args = {k: v for k, v in body.items() if k not in _NOT_ARGS}
        args.update(body.get("arguments") or {})
        config = {k: body[k] for k in KEYS if k in body}
        config.update(body.get("config") or {})
        if isinstance(body.get("name"), str):
            config["name"] = body["name"]
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


def test_alias(test: str, owner: str, full_name: str) -> str:
    """The table dbt names a generic test's stored failures: its full name, or when that is 64
    characters or more, the test and node cut to 30 characters and the full name's md5.

    >>> test_alias("not_null", "orders", "not_null_orders_id")
    'not_null_orders_id'
    >>> test_alias("accepted_values", "customer_orders", "accepted_values_customer_orders_status__placed__shipped__completed")
    'accepted_values_customer_order_9fbd9dab141f723dc7d16373c70d5435'
    """
    if len(full_name) < 64:
        return full_name
    return f"{(test.replace('.', '_') + '_' + owner)[:30]}_{hashlib.md5(full_name.encode()).hexdigest()}"


def _fqn_base(project: Project, yml_path: str) -> tuple[str, tuple[str, ...]]:
    """The package and folders that start a generic test's fqn (dbt's `get_fqn_prefix`): the
    project its yml belongs to, and the yml's folders below that project's model path.

    >>> class P: name, model_paths = "shop", ("models",)
    >>> _fqn_base(P, "models/staging/schema.yml"), _fqn_base(P, "dbt_packages/u/models/a/x.yml")
    (('shop', ('staging',)), ('u', ('a',)))
    """
    parts = PurePosixPath(yml_path).parent.parts
    package, model_paths = project.name, project.model_paths
    if parts[:1] == (PACKAGES_DIR,) and len(parts) > 1:
        package, parts, model_paths = parts[1], parts[2:], ("models",)
    for folder in model_paths:
        base = PurePosixPath(folder).parts
        if parts[:len(base)] == base:
            return package, tuple(parts[len(base):])
    return package, ()


def _config(project: Project, fqn: tuple[str, ...], *layers: dict[str, Any]) -> TestConfig:
    tree_layers = [layer for tree in project.test_configs for layer in project_layers(tree, fqn)]
    try:
        return resolve([*tree_layers, *layers])
    except ValueError as exc:
        raise SqlflowError(f"test `{fqn[-1]}`: {exc}", hint="fix the test's config") from None


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
        package, dirs = _fqn_base(project, path)
        for column, spec in specs:
            test, args, layer = _parse_spec(spec)
            full = test_name(test, owner, {**args, **({"column_name": column} if column else {})})
            test_id = str(layer.pop("name", full))
            config = _config(project, (package, *dirs, test_id), layer)
            if not config.enabled:
                continue
            extra: dict[str, Any] = {}
            model = f"ref('{owner}')"
            if config.where:  # dbt's get_where_subquery
                extra["test_where"] = config.where
                model = f"('(select * from ' ~ {model} ~ ' where ' ~ test_where ~ ') dbt_subquery')"
            kwargs = [f"model={model}"]
            if column is not None:
                kwargs.append("column_name='" + column.replace("'", "") + "'")
            kwargs += [f"{k}={_arg_text(v, k, extra)}" for k, v in sorted(args.items())]
            text = "{{ " + _test_macro(project, test, path) + "(" + ", ".join(kwargs) + ") }}"
            node = ModelNode(name=test_id, path=path, raw_sql=text, fqn=(package, *dirs, test_id))
            rendered, _ = renderer.render_test(node, extra, as_dict(config))
            alias = config.alias or (test_id if test_id != full else test_alias(test, owner, full))
            tests.append(DataTest(test_id, (owner,), rendered.refs, rendered.sql, path, config,
                                  _stored(renderer, config, alias, node)))
    return tests, []


def _stored(renderer: Renderer, config: TestConfig, alias: str, node: ModelNode) -> Relation | None:
    return renderer.test_relation(config.schema, alias, node) if config.store_as else None


def singular_tests(project: Project, renderer: Renderer, test_paths: list[str]) -> list[DataTest]:
    out = []
    for folder in test_paths:
        base = project.root / folder
        for file in sorted(base.rglob("*.sql")) if base.is_dir() else []:
            if "generic" in file.relative_to(base).parts:
                continue  # custom generic test definitions, not tests
            rel = file.relative_to(project.root).as_posix()
            fqn = (project.name, *file.relative_to(base).parent.parts, file.stem)
            node = ModelNode(name=file.stem, path=rel, raw_sql=file.read_text(), fqn=fqn)
            rendered, calls = renderer.render_test(node)
            config = _config(project, fqn, *calls)
            if config.enabled:
                out.append(DataTest(file.stem, rendered.refs, rendered.refs, rendered.sql, rel,
                                    config, _stored(renderer, config, config.alias or file.stem, node)))
    return out


def data_tests(project: Project, target: Any,
               vars: dict[str, Any] | None = None) -> tuple[list[DataTest], list[Skipped]]:
    """Every data test of the project, rendered for `target`; and the ones sqlflow cannot run."""
    renderer = Renderer(project, target, "batch", vars)
    generic, skipped = generic_tests(project, renderer)
    return generic + singular_tests(project, renderer, list(project.test_paths)), skipped
