"""The package's import rules (docs/design.md, "Layout"), checked on the source with `ast`.

- no import circle between modules, counting imports inside functions;
- no underscore-private name imported from another module;
- the compile side (project, rendering, analysis, planning, compiler, dialect, errors) never
  imports the runtime, the engine, the workflows, the report, the CLI or the demo;
- the runtime never imports the CLI, the workflows, the report or the demo;
- only the CLI imports the CLI.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "sqlflow"
COMPILE_SIDE = ("project", "rendering", "analysis", "planning", "compiler", "dialect", "errors")


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = modules()


def imports(name: str) -> list[tuple[str, str, int]]:
    """(imported module, imported name or '', line) of every sqlflow import in `name`,
    function-level imports included."""
    path = MODULES[name]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(a.name, "", node.lineno) for a in node.names if a.name.split(".")[0] == "sqlflow"]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                base = ".".join(here[: len(here) - node.level + 1] + ([base] if base else []))
            if base.split(".")[0] == "sqlflow":
                out += [(base, a.name, node.lineno) for a in node.names]
    return out


def target(module: str, imported: str) -> str:
    """The module an import lands in: `from pkg import mod` is `pkg.mod`."""
    full = f"{module}.{imported}" if imported else module
    for candidate in (full, module):
        while candidate and candidate not in MODULES:
            candidate = candidate.rpartition(".")[0]
        if candidate:
            return candidate
    return module


def graph() -> dict[str, set[str]]:
    return {m: {target(mod, n) for mod, n, _ in imports(m)} - {m} for m in MODULES}


def stage(module: str) -> str:
    return module.split(".")[1] if module.count(".") else ""


def test_no_import_circle() -> None:
    edges = graph()
    related = lambda a, b: a.startswith(b + ".") or b.startswith(a + ".")  # noqa: E731 (a package re-exporting its own modules)
    circles = []
    for start in edges:
        stack, seen = [(start, [start])], set()
        while stack:
            node, path = stack.pop()
            for nxt in edges[node]:
                if nxt == start and not all(related(start, p) or p == start for p in path):
                    circles.append(" -> ".join(path + [start]))
                elif nxt not in seen and nxt not in path:
                    seen.add(nxt)
                    stack.append((nxt, path + [nxt]))
    assert circles == [], "\n".join(sorted(set(circles))[:10])


def test_no_private_name_imported_across_modules() -> None:
    bad = [f"{m}:{line} imports {n} from {mod}" for m in MODULES for mod, n, line in imports(m)
           if n.startswith("_") and not n.startswith("__") and f"{mod}.{n}" not in MODULES
           and target(mod, n) != m]
    assert bad == []


@pytest.mark.parametrize("side, forbidden", [
    (COMPILE_SIDE, ("runtime", "engine", "workflows", "report", "cli", "demo")),
    (("runtime",), ("cli", "workflows", "report", "demo")),
    (("report",), ("cli", "workflows", "demo")),
    (("engine",), ("runtime", "cli", "workflows", "report", "demo")),
    (("workflows", "runtime", "report", "engine", "demo", *COMPILE_SIDE), ("cli",)),
])
def test_stage_rules(side: tuple[str, ...], forbidden: tuple[str, ...]) -> None:
    bad = [f"{m}:{line} imports {target(mod, n)}" for m in MODULES if stage(m) in side
           for mod, n, line in imports(m) if stage(target(mod, n)) in forbidden]
    assert bad == []


def test_the_rules_see_a_violation(tmp_path: Path) -> None:
    """The checker itself can fail: a function-level import closing a circle is found."""
    global MODULES
    saved = dict(MODULES)
    try:
        a, b = tmp_path / "a.py", tmp_path / "b.py"
        a.write_text("def f():\n    from sqlflow.b import _g\n")
        b.write_text("import sqlflow.a\n")
        MODULES.update({"sqlflow.a": a, "sqlflow.b": b})
        with pytest.raises(AssertionError):
            test_no_import_circle()
        with pytest.raises(AssertionError):
            test_no_private_name_imported_across_modules()
    finally:
        MODULES.clear()
        MODULES.update(saved)
