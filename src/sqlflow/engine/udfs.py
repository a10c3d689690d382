"""Python UDFs from the project's `udfs/` folder, registered in every session sqlflow makes.

A UDF is a plain Python function marked with `@sql_function("<Spark SQL return type>")`;
its SQL name is the function name. `register_udfs` imports each `udfs/*.py` file and
registers what it marks, so models call them like built-ins: `parse_spmid(spmid).department`.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlflow.errors import Location, SqlflowError

_MARK = "__sqlflow_udf__"


@dataclass(frozen=True)
class UdfSpec:
    name: str
    return_type: str
    fn: Callable[..., Any]
    path: str


def sql_function(return_type: str, name: str | None = None):
    """Mark `fn` as a SQL function with the given Spark SQL return type (DDL string)."""

    def mark(fn):
        setattr(fn, _MARK, (name or fn.__name__, return_type))
        return fn

    return mark


def discover_udfs(project_dir: Path) -> list[UdfSpec]:
    """Every marked function in `udfs/*.py`, sorted by name; a broken file is a user error."""
    specs: list[UdfSpec] = []
    folder = project_dir / "udfs"
    for path in sorted(folder.glob("*.py")) if folder.is_dir() else []:
        if path.name.startswith("_"):
            continue
        module = _import(path, project_dir)
        for value in vars(module).values():
            mark = getattr(value, _MARK, None)
            if mark and callable(value):
                specs.append(UdfSpec(mark[0], mark[1], value, str(path.relative_to(project_dir))))
    names = [s.name for s in specs]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise SqlflowError(f"UDF `{dupes[0]}` is defined twice under udfs/",
                           hint="give each SQL function a unique name")
    return sorted(specs, key=lambda s: s.name)


def _import(path: Path, project_dir: Path):
    mod_name = f"sqlflow_project_udfs.{path.stem}"
    if mod_name in sys.modules and getattr(sys.modules[mod_name], "__file__", None) == str(path):
        return sys.modules[mod_name]
    spec = importlib.util.spec_from_file_location(mod_name, path)
    assert spec is not None and spec.loader is not None  # a .py file has a source loader
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        line = getattr(exc, "lineno", 0) or 0
        raise SqlflowError(
            f"UDF file failed to import: {type(exc).__name__}: {exc}",
            location=Location(str(path.relative_to(project_dir)), line),
            hint="fix the Python error in that file",
        ) from exc
    sys.modules[mod_name] = module
    # Workers cannot import project files by name: ship the UDF code with the function.
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(module)
    return module


def register_udfs(spark, project_dir: Path) -> list[UdfSpec]:
    """Register the project's UDFs as temporary functions of `spark`; returns what it did."""
    specs = discover_udfs(project_dir)
    for s in specs:
        spark.udf.register(s.name, s.fn, s.return_type)
    return specs
