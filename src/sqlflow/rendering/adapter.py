"""`adapter` and `api` as dbt-spark offers them to templates, for rendering without a warehouse.

`adapter.dispatch(name, namespace)` searches as dbt does (docs/semantics.md, "Macros, packages
and adapter.dispatch"): the `dispatch:` search order of dbt_project.yml for that namespace if
there is one, else the root project then the namespace's package (when it is installed),
else the caller's own names; in each package `spark__name` first, then `default__name`.
`api.Column` answers as dbt-spark's `SparkColumn` (a type name stays as written; numeric is
`decimal(p,s)`). Every object here publishes only the attributes in its `sandbox_attrs`.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from sqlflow.errors import SqlflowError

PREFIXES = ("spark", "default")  # dbt-spark's adapter macro prefixes, most specific first


class MacroNamespace(SimpleNamespace):
    """A package's macros by name: `dbt_utils.star(...)`, `dbt.date_trunc(...)`."""


class _Flag:
    """A behaviour flag (`adapter.behavior.x`): false, as dbt's defaults for these flags."""

    sandbox_attrs = ("no_warn", "setting")

    def __init__(self, value: bool) -> None:
        self.setting = self.no_warn = value

    def __bool__(self) -> bool:
        return self.setting


class _Behavior:
    sandbox_attrs = ("enable_truthy_nulls_equals_macro",)

    enable_truthy_nulls_equals_macro = _Flag(False)


class Adapter:
    """`adapter` in a template rendered for package `caller`."""

    sandbox_attrs = ("dispatch", "quote", "type", "behavior", "quote_seed_column")

    def __init__(self, runtime: Any, caller: str) -> None:
        self.runtime, self.caller = runtime, caller
        self.behavior = _Behavior()

    def dispatch(self, macro_name: str, macro_namespace: str | None = None,
                 packages: Any = None) -> Any:
        if not isinstance(macro_name, str) or "." in macro_name:
            raise SqlflowError(f"`adapter.dispatch({macro_name!r})`: the macro name has no package",
                               hint="write adapter.dispatch('name', 'package')")
        attempts: list[str] = []
        for package in self.search_order(macro_namespace):
            for prefix in PREFIXES:
                name = f"{prefix}__{macro_name}"
                attempts.append(name if package is None else f"{package}.{name}")
                found = self.runtime.find(package, name, self.caller)
                if found is not None:
                    return found
        shown = ", ".join(f"'{a}'" for a in attempts)
        raise SqlflowError(
            f"In dispatch: no macro named '{macro_name}' found within namespace: "
            f"'{macro_namespace}'; searched for: {shown}",
            hint=f"define `default__{macro_name}` in one of them, or install the package that "
                 "has it under dbt_packages/")

    def search_order(self, namespace: str | None) -> list[str | None]:
        """dbt's `_get_search_packages`."""
        if namespace is None:
            return [None]
        if not isinstance(namespace, str):
            raise SqlflowError(f"`adapter.dispatch`: the namespace {namespace!r} is not a string",
                               hint="write adapter.dispatch('name', 'package')")
        project = self.runtime.renderer.project
        if namespace in project.dispatch:
            return list(project.dispatch[namespace])
        if namespace in project.packages or namespace == project.name:
            return [project.name, namespace]
        return [None]

    def quote(self, identifier: str) -> str:
        return f"`{identifier}`"

    def quote_seed_column(self, column: str, quote_config: bool | None) -> str:
        return self.quote(column) if quote_config else column

    def type(self) -> str:
        return "spark"


class _Column:
    """`api.Column`: dbt-spark's SparkColumn class methods templates call."""

    sandbox_attrs = ("translate_type", "numeric_type", "string_type")

    def translate_type(self, dtype: str) -> str:
        return dtype

    def numeric_type(self, dtype: str, precision: Any, scale: Any) -> str:
        return "decimal" if precision is None or scale is None else f"decimal({precision},{scale})"

    def string_type(self, size: int) -> str:
        return f"character varying({size})"


API = SimpleNamespace(Column=_Column())
