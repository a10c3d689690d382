"""Macro packages as dbt loads them: the project, `dbt_packages/*`, and dbt's own global macros.

dbt renders every node with three kinds of macro package (docs/semantics.md, "Macros, packages
and adapter.dispatch"): the root project, each installed package under `dbt_packages/` (what
`dbt deps` fills; each one a dbt project with its own `dbt_project.yml` and `macro-paths`),
and the internal package `dbt`: dbt-adapters' global project plus dbt-spark's macros, read
from the installed Python packages so `dbt.date_trunc` or `dbt.type_string` expand exactly
as dbt-spark expands them. A package's models, seeds and tests are loaded with the project's
(`sqlflow.project.load`).
"""

from __future__ import annotations

import importlib.util
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
import jinja2.ext
from pydantic import BaseModel, ConfigDict

from sqlflow.errors import DiagnosticSink, Location
from sqlflow.project.sources import load_yaml

INTERNAL = "dbt"  # dbt's GLOBAL_PROJECT_NAME: the namespace of its built-in macros
PACKAGES_DIR = "dbt_packages"


class MacroDef(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    path: str
    line: int


class MacroPackage(BaseModel):
    """The macros of one package: name -> definition, and each macro file's text by path."""

    model_config = ConfigDict(frozen=True)

    name: str
    macros: dict[str, MacroDef]
    files: dict[str, str]


class _SkipBlock(jinja2.ext.Extension):
    """dbt's `{% materialization %}`, `{% docs %}`, `{% snapshot %}` blocks: parsed, not callable."""

    tags = {"materialization", "docs", "snapshot"}

    def parse(self, parser: Any) -> Any:
        tag = next(parser.stream)
        while parser.stream.current.type != "block_end":
            next(parser.stream)
        parser.parse_statements((f"name:end{tag.value}",), drop_needle=True)
        return jinja2.nodes.Output([], lineno=tag.lineno)


class _TestBlock(jinja2.ext.Extension):
    """dbt's `{% test name(model, column_name) %}` block: the macro `test_<name>`, as dbt's own
    TestExtension makes it (a custom generic test, run by `sqlflow build`)."""

    tags = {"test"}

    def parse(self, parser: Any) -> Any:
        node = jinja2.nodes.Macro(lineno=next(parser.stream).lineno)
        node.name = TEST_PREFIX + parser.parse_assign_target(name_only=True).name
        parser.parse_signature(node)
        node.body = parser.parse_statements(("name:endtest",), drop_needle=True)
        return node


TEST_PREFIX = "test_"  # dbt's get_test_macro_name


def macro_environment_extensions() -> list[Any]:
    return ["jinja2.ext.do", "jinja2.ext.loopcontrols", _SkipBlock, _TestBlock]


_PARSE_ENV = jinja2.Environment(extensions=macro_environment_extensions())


def read_macro_files(name: str, files: list[tuple[str, Path]], sink: DiagnosticSink,
                     duplicates: bool = True) -> MacroPackage:
    """The macros defined in `files` ((shown path, file) pairs). `duplicates`: a macro defined
    twice is an error (a user's package); else the later one wins (dbt's adapter overrides)."""
    macros: dict[str, MacroDef] = {}
    texts: dict[str, str] = {}
    for rel, file in files:
        texts[rel] = text = file.read_text()
        try:
            ast = _PARSE_ENV.parse(text, filename=rel)
        except jinja2.TemplateSyntaxError as exc:
            sink.error(f"Jinja syntax error: {exc.message}", Location(rel, exc.lineno or 0),
                       "fix the template")
            continue
        for node in ast.body:
            if not isinstance(node, jinja2.nodes.Macro):
                continue
            macro = MacroDef(name=node.name, path=rel, line=node.lineno)
            if duplicates and macro.name in macros:
                other = macros[macro.name]
                sink.error(f"macro `{macro.name}` is defined twice (also {other.path}:{other.line})",
                           Location(macro.path, macro.line), "rename or remove one of them")
                continue
            macros[macro.name] = macro
    return MacroPackage(name=name, macros=macros, files=texts)


def sql_files(root: Path, folders: list[str] | tuple[str, ...], shown: Path) -> list[tuple[str, Path]]:
    """Every `.sql` file under `folders` of `root`, path-sorted, shown relative to `shown`."""
    out = []
    for folder in folders:
        base = root / folder
        for file in sorted(base.rglob("*.sql")) if base.is_dir() else []:
            out.append((file.relative_to(shown).as_posix(), file))
    return out


def generic_test_paths(test_paths: list[str] | tuple[str, ...]) -> list[str]:
    """Where dbt reads custom generic tests besides the macro paths: `<test path>/generic`."""
    return [f"{folder.rstrip('/')}/generic" for folder in test_paths]


def installed_packages(root: Path, sink: DiagnosticSink) -> dict[str, MacroPackage]:
    """`dbt_packages/<dir>/`: each a dbt project; keyed by the `name:` of its dbt_project.yml."""
    out: dict[str, MacroPackage] = {}
    folder = root / PACKAGES_DIR
    for pdir in sorted(folder.iterdir()) if folder.is_dir() else []:
        pfile = pdir / "dbt_project.yml"
        if not pfile.is_file():
            continue
        rel = pfile.relative_to(root).as_posix()
        data = load_yaml(pfile, rel) or {}
        name = data.get("name") if isinstance(data, dict) else None
        if not isinstance(name, str):
            sink.error("a package's dbt_project.yml needs a `name:`", Location(rel, 1),
                       "reinstall the package with `dbt deps`")
            continue
        paths = [*(data.get("macro-paths") or ["macros"]),
                 *generic_test_paths(data.get("test-paths") or ["tests"])]
        out[name] = read_macro_files(name, sql_files(pdir, paths, root), sink)
    return out


@lru_cache(maxsize=1)
def internal_package() -> MacroPackage:
    """dbt's `dbt` namespace: the global project's macros with dbt-spark's over them (dbt
    puts the adapter's internal package first). Empty when dbt is not installed."""
    files: list[tuple[str, Path]] = []
    for module in ("dbt.include.global_project", "dbt.include.spark"):
        try:
            spec = importlib.util.find_spec(module)
        except ModuleNotFoundError:
            spec = None
        for location in (spec.submodule_search_locations or []) if spec else []:
            base = Path(location)
            files += sql_files(base, ["macros"], base.parent)
    return read_macro_files(INTERNAL, files, DiagnosticSink(), duplicates=False)
