"""The Jinja sandbox models, macros, sources.yml and profiles are rendered in.

A model is untrusted input (docs/semantics.md, "What the Jinja sandbox guarantees"): whatever a
template can reach is an allow-list. `modules` offers dbt's documented names as plain objects
(classes and functions, never a module), and the environment refuses, whatever the attribute is
called, any value that is a module, a frame, a code object, a traceback, a function's globals, a
class reached outside that allow-list, or one of sqlflow's own objects beyond the attributes it
publishes. Jinja's underscore rule stays as a first line, not the only one. `include`, `import`
and `extends` load nothing: there is no loader, and asking for one is refused.
"""

from __future__ import annotations

import builtins
import datetime
import itertools
import re
import types
from types import SimpleNamespace
from typing import Any

import jinja2
from jinja2.exceptions import SecurityError
from jinja2.sandbox import SandboxedEnvironment


class SafeNamespace(SimpleNamespace):
    """A namespace whose attributes are allow-listed values (classes and functions allowed)."""


def _pick(module: Any, names: tuple[str, ...]) -> SafeNamespace:
    return SafeNamespace(**{name: getattr(module, name) for name in names if hasattr(module, name)})


# What dbt documents for `modules` (https://docs.getdbt.com/reference/dbt-jinja-functions/modules),
# each a class, function or constant, copied out of its module.
MODULES = SafeNamespace(
    datetime=_pick(datetime, ("date", "datetime", "time", "timedelta", "timezone", "tzinfo",
                              "MINYEAR", "MAXYEAR")),
    re=_pick(re, ("compile", "escape", "findall", "finditer", "fullmatch", "match", "search",
                  "split", "sub", "subn", "purge", "A", "ASCII", "I", "IGNORECASE", "M",
                  "MULTILINE", "S", "DOTALL", "X", "VERBOSE", "error")),
    itertools=_pick(itertools, ("accumulate", "chain", "combinations",
                                "combinations_with_replacement", "compress", "count", "cycle",
                                "dropwhile", "filterfalse", "groupby", "islice", "pairwise",
                                "permutations", "product", "repeat", "starmap", "takewhile",
                                "tee", "zip_longest")),
)

# Values no template may hold, whatever path led to them.
_FORBIDDEN_TYPES = (types.ModuleType, types.FrameType, types.CodeType, types.TracebackType,
                    types.GeneratorType, types.CoroutineType, types.AsyncGeneratorType,
                    jinja2.Environment, jinja2.runtime.Context)
# Attribute names that lead to the interpreter's internals without a leading underscore.
_FORBIDDEN_ATTRS = frozenset({
    "mro", "func_globals", "func_code", "func_closure", "im_func", "im_self", "im_class",
    "gi_frame", "gi_code", "gi_yieldfrom", "cr_frame", "cr_code", "cr_await", "ag_frame",
    "ag_code", "ag_await", "f_globals", "f_locals", "f_builtins", "f_back", "f_code",
    "tb_frame", "tb_next", "environment", "environ", "globals", "modules", "builtins",
    "subclasses", "os", "sys", "subprocess", "importlib", "loader", "spec",
})
# Builtins a template must never call even if one leaked into reach.
_FORBIDDEN_CALLABLES = frozenset(id(getattr(builtins, name)) for name in (
    "eval", "exec", "compile", "open", "__import__", "getattr", "setattr", "delattr", "globals",
    "locals", "vars", "input", "breakpoint", "help", "memoryview", "type", "object", "super",
    "classmethod", "staticmethod", "property") if hasattr(builtins, name))
_DANGEROUS_MODULES = ("os", "posix", "nt", "sys", "subprocess", "shutil", "importlib", "builtins",
                      "socket", "ctypes", "pickle", "marshal", "pty", "io", "_io", "pathlib",
                      "runpy", "code", "codeop", "inspect", "gc")


def _is_forbidden_value(value: Any) -> bool:
    if isinstance(value, _FORBIDDEN_TYPES):
        return True
    # a function's or a class's internals are never data a model needs
    return isinstance(value, dict) and "__builtins__" in value


def _publishes(obj: Any, attr: str) -> bool:
    """sqlflow's own objects show only the attributes their class lists in `sandbox_attrs`."""
    module = getattr(type(obj), "__module__", "") or ""
    if not module.startswith("sqlflow"):
        return True
    if isinstance(obj, SimpleNamespace):
        return True
    return attr in getattr(type(obj), "sandbox_attrs", ())


class Sandbox(SandboxedEnvironment):
    """Jinja's sandbox with allow-list checks on every attribute, item and call."""

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        if not super().is_safe_attribute(obj, attr, value):
            return False
        if attr in _FORBIDDEN_ATTRS or isinstance(obj, _FORBIDDEN_TYPES):
            return False
        if _is_forbidden_value(value) or not _publishes(obj, attr):
            return False
        if isinstance(value, type) and not isinstance(obj, SafeNamespace):
            return False  # classes are reachable through `modules` only
        return True

    def is_safe_callable(self, obj: Any) -> bool:
        if not super().is_safe_callable(obj) or _is_forbidden_value(obj):
            return False
        if id(obj) in _FORBIDDEN_CALLABLES:
            return False
        owner = getattr(obj, "__self__", None)
        if isinstance(owner, types.ModuleType) and owner.__name__ in _DANGEROUS_MODULES:
            return False
        if isinstance(obj, (types.FunctionType, types.BuiltinFunctionType)):
            module = (getattr(obj, "__module__", None) or "").split(".")[0]
            if module in _DANGEROUS_MODULES:
                return False
        return True

    def getitem(self, obj: Any, argument: Any) -> Any:
        value = super().getitem(obj, argument)
        if _is_forbidden_value(value):
            return self.unsafe_undefined(obj, str(argument))
        return value

    def getattr(self, obj: Any, attribute: str) -> Any:
        value = super().getattr(obj, attribute)
        if _is_forbidden_value(value):
            return self.unsafe_undefined(obj, attribute)
        return value

    def _load_template(self, name: Any, globals: Any) -> Any:  # noqa: A002 - jinja's signature
        raise SecurityError(
            f"`include`, `import` and `extends` cannot load {name!r}: sqlflow templates load no "
            "files; define a macro under macros/ and call it")
