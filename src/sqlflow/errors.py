"""Errors a user can cause, shaped so the CLI prints one line (or one line each) with a fix."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Location:
    """A place in a project file, 1-based line and column; line 0 means the whole file."""

    path: str
    line: int = 0
    col: int = 0

    def __str__(self) -> str:
        if self.line <= 0:
            return self.path
        if self.col <= 0:
            return f"{self.path}:{self.line}"
        return f"{self.path}:{self.line}:{self.col}"


@dataclass(frozen=True)
class Diagnostic:
    """One problem found in a project: where, what is wrong, and what to do about it."""

    message: str
    location: Location | None = None
    hint: str = ""
    severity: str = "error"  # "error" | "warning"

    def format(self) -> str:
        where = f"{self.location}: " if self.location else ""
        hint = f"; {self.hint}" if self.hint else ""
        return f"{where}{self.severity}: {self.message}{hint}"


class SqlflowError(Exception):
    """A mistake the user can fix (bad SQL, bad config, missing Java). Never a bug of ours.

    Carries one or more diagnostics; the CLI prints each on its own line and exits 1.
    """

    def __init__(
        self,
        message: str | None = None,
        *,
        location: Location | None = None,
        hint: str = "",
        diagnostics: list[Diagnostic] | None = None,
    ) -> None:
        diags = list(diagnostics or [])
        if message is not None:
            diags.insert(0, Diagnostic(message, location, hint))
        if not diags:
            raise ValueError("SqlflowError needs a message or diagnostics")
        self.diagnostics: list[Diagnostic] = diags
        super().__init__("\n".join(d.format() for d in diags))


class CompilerError(SqlflowError):
    """`exceptions.raise_compiler_error` in a model's Jinja: a macro rejecting what its caller
    passed (reported at the caller's line)."""


def relpath(path: str | Path, root: str | Path | None = None) -> str:
    """A path as the user would type it: relative to the project root when inside it."""
    p = Path(path)
    if root is not None:
        try:
            return str(p.resolve().relative_to(Path(root).resolve()))
        except ValueError:
            pass
    return str(p)


@dataclass
class DiagnosticSink:
    """Collects every problem of a run so the user sees all of them, not just the first."""

    items: list[Diagnostic] = field(default_factory=list)

    def error(self, message: str, location: Location | None = None, hint: str = "") -> None:
        self.items.append(Diagnostic(message, location, hint, "error"))

    def warning(self, message: str, location: Location | None = None, hint: str = "") -> None:
        self.items.append(Diagnostic(message, location, hint, "warning"))

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.items if d.severity == "error"]

    @property
    def warnings(self) -> list[Diagnostic]:
        return [d for d in self.items if d.severity == "warning"]

    def raise_if_errors(self) -> None:
        if self.errors:
            raise SqlflowError(diagnostics=self.errors)


def did_you_mean(name: str, known: list[str] | set[str] | tuple[str, ...]) -> str:
    """A hint naming the closest known name, or listing the valid ones when none is close."""
    import difflib

    choices = sorted(known)
    close = difflib.get_close_matches(name, choices, n=1, cutoff=0.6)
    if close:
        return f"did you mean `{close[0]}`?"
    if not choices:
        return "none are defined"
    shown = ", ".join(f"`{c}`" for c in choices[:12])
    more = f" (and {len(choices) - 12} more)" if len(choices) > 12 else ""
    return f"valid choices: {shown}{more}"
