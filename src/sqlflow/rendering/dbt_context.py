"""The dbt Jinja subset sqlflow renders with: the sandboxed environment and its helpers.

Everything a template can call that does not depend on which model is rendered lives here:
`var`, `env_var`, `return`, `log`, `exceptions`, `modules`, and relations as dbt-spark prints
them. Model-specific helpers (`ref`, `source`, `config`, `this`) are in render.py.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from functools import lru_cache
from types import SimpleNamespace
from typing import Any

import jinja2

from sqlflow.errors import CompilerError, Location, SqlflowError, did_you_mean
from sqlflow.project.packages import macro_environment_extensions
from sqlflow.rendering.sourcemap import LineMarkers
from sqlflow.sandbox import Sandbox
from sqlflow.secrets import is_secret, prefixes

log = logging.getLogger("sqlflow.rendering.render")
MISSING = object()


@dataclass(frozen=True)
class Relation:
    """A table as dbt-spark renders it: `schema.identifier`, unquoted (no database level)."""

    schema: str
    identifier: str
    sandbox_attrs = ("schema", "identifier", "name", "database", "render")

    def __str__(self) -> str:
        return f"{self.schema}.{self.identifier}" if self.schema else self.identifier

    @property
    def name(self) -> str:
        return self.identifier

    @property
    def database(self) -> None:
        return None

    def render(self) -> str:
        return str(self)


class MacroReturn(Exception):
    """dbt's `return(value)`: ends the macro, which then returns `value` itself."""

    def __init__(self, value: Any) -> None:
        super().__init__("return")
        self.value = value


# --- the Jinja environment and compiled templates -------------------------------------------------


class _Environment(Sandbox):
    """The sandbox (sandbox.py), plus dbt's `return()`: a macro that calls it evaluates to the value.

    Calls between macros of one file bypass the globals, so `return` is handled here, where
    every template call passes, rather than only in the macro proxies.
    """

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
        try:
            return super().call(__context, __obj, *args, **kwargs)
        except MacroReturn as ret:
            if isinstance(__obj, jinja2.runtime.Macro):
                return ret.value
            raise


def _environment() -> Sandbox:
    env = _Environment(extensions=[*macro_environment_extensions(), LineMarkers],
                       undefined=jinja2.StrictUndefined)
    env.filters.update({"as_text": lambda x: x, "as_bool": lambda x: x,
                        "as_native": lambda x: x, "as_number": lambda x: x})
    return env


ENV = _environment()


@lru_cache(maxsize=16384)
def compile_template(kind: str, path: str, source: str) -> jinja2.Template:
    """Compile a template once per (kind, path, text); rendering reuses the code object."""
    try:
        code = ENV.compile(source, name=f"{kind}:{path}", filename=path)
    except jinja2.TemplateSyntaxError as exc:
        raise SqlflowError(f"Jinja syntax error: {exc.message}",
                           location=Location(path, exc.lineno or 0),
                           hint="fix the template syntax") from None
    return ENV.template_class.from_code(ENV, code, ENV.make_globals(None))


# --- small helpers ---------------------------------------------------------------------------------


class Var:
    """`var('name', default)`: CLI vars over project vars; a missing var without default fails."""

    sandbox_attrs = ("has_var",)

    def __init__(self, values: dict[str, Any]) -> None:
        self.values = values

    def __call__(self, name: str, default: Any = MISSING) -> Any:
        if name in self.values:
            return self.values[name]
        if default is MISSING:
            known = [k for k in self.values if k != "sqlflow_mode"]
            raise SqlflowError(f"var `{name}` is not defined", hint=(
                f"{did_you_mean(name, known)} (define it under `vars:` in dbt_project.yml or "
                f"pass it with --vars, or give a default: var('{name}', ...))"))
        return default

    def has_var(self, name: str) -> bool:
        return name in self.values


def env_var(name: str, default: Any = MISSING) -> Any:
    if is_secret(name):  # docs/deploy.md, "Secrets": as dbt, secrets belong in profiles only
        raise SqlflowError(
            f"env_var('{name}'): secret environment variables ({', '.join(prefixes())}*) can "
            "only be used in profiles/profiles.yml",
            hint="pass the secret through the profile's server_side_parameters, never into a "
                 "model's SQL, config or a source")
    if name in os.environ:
        return os.environ[name]
    if default is MISSING:
        raise SqlflowError(f"environment variable `{name}` is not set",
                           hint=f"export {name}=... or write env_var('{name}', 'default')")
    return default


def return_(value: Any) -> None:
    raise MacroReturn(value)


def log_(message: Any, info: bool = False) -> str:
    (log.info if info else log.debug)("%s", message)
    return ""


def _raise_compiler_error(message: str) -> None:
    raise CompilerError(str(message), hint="raised by the model's Jinja")


def _warn(message: str) -> str:
    log.warning("%s", message)
    return ""


def no_warehouse(name: str) -> Any:
    def fail(*args: Any, **kwargs: Any) -> None:
        raise SqlflowError(f"`{name}` needs a warehouse; sqlflow renders models without one",
                           hint="compute the value ahead of time and pass it with --vars")
    return fail


EXCEPTIONS = SimpleNamespace(raise_compiler_error=_raise_compiler_error, warn=_warn)
