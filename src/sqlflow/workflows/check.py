"""`sqlflow check`: compile models in both modes and collect every finding, without Spark.

The models checked are all of them, or (with a git ref) the models the change touches and
their descendants, whose plans read the touched models' outputs. Findings of the two modes
are merged: the same problem found in batch (a warning: the model cannot stream) and in
stream mode (an error) is reported once, as the error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlflow.compiler import compile_project
from sqlflow.errors import Diagnostic, SqlflowError
from sqlflow.project.load import load_project
from sqlflow.workflows.changes import changed_files, touched_models


@dataclass
class CheckResult:
    models: tuple[str, ...]
    diagnostics: list[Diagnostic] = field(default_factory=list)
    changed_files: tuple[str, ...] = ()

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "error"]


def models_to_check(project_dir: Path, changed_since: str | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(models, changed files): everything without a ref, else the touched models + descendants."""
    project = load_project(project_dir)
    if changed_since is None:
        return tuple(sorted(project.models)), ()
    files = changed_files(project_dir, changed_since)
    touched = touched_models(project, files)
    return tuple(sorted(touched)), tuple(sorted(files))


def check_project(project_dir: Path, *, changed_since: str | None = None, target: Any = None,
                  vars: dict[str, Any] | None = None) -> CheckResult:
    """Compile the selected models in batch and stream mode and gather every diagnostic.

    Problems that stop compilation (bad Jinja, unknown refs, unparseable SQL) are findings
    too, so a pull request sees every one of them in one run.
    """
    try:
        models, files = models_to_check(project_dir, changed_since)
    except SqlflowError as exc:
        return CheckResult((), list(exc.diagnostics))
    result = CheckResult(models, changed_files=files)
    if not models:
        return result
    selectors = [f"{m}+" for m in models]
    seen: dict[tuple, Diagnostic] = {}
    checked: set[str] = set()
    for mode in ("batch", "stream"):
        try:
            compiled = compile_project(project_dir, mode=mode, select=selectors, target=target,
                                       vars=vars)
            found = compiled.diagnostics
            checked |= set(compiled.irs) & set(compiled.rendered)
        except SqlflowError as exc:
            found = exc.diagnostics
        for d in found:
            key = (str(d.location), _finding(d.message))
            if key not in seen or (d.severity == "error" and seen[key].severity != "error"):
                seen[key] = d
    result.models = tuple(sorted(checked | set(models)))
    result.diagnostics = sorted(seen.values(), key=_order)
    return result


def _finding(message: str) -> str:
    """The finding without its model prefix: batch says "model `m` cannot stream: X" where
    stream mode says "model `m`: X"."""
    return message.split(": ", 1)[-1] if message.startswith("model `") else message


def _order(d: Diagnostic) -> tuple:
    loc = d.location
    return (loc.path if loc else "", loc.line if loc else 0, loc.col if loc else 0,
            d.severity != "error", d.message)


def format_text(d: Diagnostic) -> str:
    """`path:line:col: severity: message; hint`, the compiler's own one-line format."""
    return d.format()


def format_github(d: Diagnostic) -> str:
    """A GitHub Actions workflow command: `::error file=..,line=..,col=..::message`."""
    kind = "error" if d.severity == "error" else "warning"
    props = []
    if d.location is not None:
        props.append(f"file={_prop(d.location.path)}")
        if d.location.line > 0:
            props.append(f"line={d.location.line}")
        if d.location.col > 0:
            props.append(f"col={d.location.col}")
    text = d.message + (f"; {d.hint}" if d.hint else "")
    return f"::{kind} {','.join(props)}::{_data(text)}" if props else f"::{kind}::{_data(text)}"


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _prop(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")
