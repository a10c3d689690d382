"""Map positions in a model's rendered SQL back to the model file the analyst wrote.

Render marks every line of the model's literal text: a Jinja extension inserts an invisible
marker after each newline of the template's data tokens (after whitespace control, so the
output is otherwise unchanged), and the markers are stripped from the output. A rendered line
that starts with a marker comes from that model line (column mapped by aligning the two lines,
with Jinja spans masked out so an expression's output points at its `{{`); a line without one
was produced by an expression or macro and maps to the line of the call that produced it.
Loops, `{% if %}` and multi-line macro output are therefore mapped exactly, not guessed.
"""

from __future__ import annotations

import difflib
import re
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, replace

import jinja2
import jinja2.ext
from jinja2.lexer import Token

from sqlflow.errors import CompilerError, Location, SqlflowError, did_you_mean

MODEL_PREFIX = "model:"
_OPEN, _CLOSE = "\x1e", "\x1f"
_MARK = re.compile(f"{_OPEN}(\\d+){_CLOSE}")
_JINJA_SPAN = re.compile(r"\{\{.*?(?:\}\}|$)|\{%.*?(?:%\}|$)|\{#.*?(?:#\}|$)")
_BLOCK_OPENERS = {"macro", "call", "filter"}
_BLOCK_CLOSERS = {"endmacro", "endcall", "endfilter", "endset"}


def _marker(line: int) -> str:
    return f"{_OPEN}{line}{_CLOSE}"


class LineMarkers(jinja2.ext.Extension):
    """Marks the start of every literal line of templates named `model:<path>`.

    Text inside `{% set x %}`, `{% macro %}`, `{% call %}` and `{% filter %}` blocks is left
    alone: it may be compared or transformed as a value rather than written out.
    """

    def filter_stream(self, stream: jinja2.lexer.TokenStream) -> Iterator[Token]:
        if not (stream.name or "").startswith(MODEL_PREFIX):
            yield from stream
            return
        yield Token(1, "data", _marker(1))
        depth = 0
        tag: list[Token] = []
        for token in stream:
            if tag or token.type == "block_begin":
                tag.append(token)
                if token.type == "block_end":
                    depth = max(0, depth + _block_delta(tag))
                    yield from tag
                    tag = []
                continue
            if token.type == "data" and depth == 0 and "\n" in token.value:
                token = Token(token.lineno, "data", _mark_newlines(token.value, token.lineno))
            yield token
        yield from tag


def _block_delta(tag: list[Token]) -> int:
    """+1 when a tag opens a block whose text is a value, -1 when it closes one."""
    names = [t.value for t in tag if t.type == "name"]
    if not names:
        return 0
    if names[0] in _BLOCK_OPENERS:
        return 1
    if names[0] in _BLOCK_CLOSERS:
        return -1
    if names[0] == "set" and not any(t.type == "assign" for t in tag):
        return 1
    return 0


def _mark_newlines(text: str, lineno: int) -> str:
    parts = text.split("\n")
    return parts[0] + "".join(f"\n{_marker(lineno + i)}{part}"
                              for i, part in enumerate(parts[1:], start=1))


@dataclass(frozen=True)
class SourceMap:
    """Rendered line -> model line; `locate` maps a rendered (line, col) to a Location."""

    path: str
    raw_lines: tuple[str, ...]
    rendered_lines: tuple[str, ...]
    origins: tuple[int, ...]  # 1-based model line of each rendered line
    literal: tuple[bool, ...]  # the rendered line starts with the model's own text

    def locate(self, line: int, col: int = 0) -> Location:
        """The model-file Location of rendered `line` (1-based) and `col` (1-based, 0 = none)."""
        if not self.origins:
            return Location(self.path, 1 if line else 0)
        idx = min(max(line, 1), len(self.origins)) - 1
        raw_line = self.origins[idx]
        if col <= 0:
            return Location(self.path, raw_line)
        raw = self.raw_lines[raw_line - 1] if 0 < raw_line <= len(self.raw_lines) else ""
        if self.literal[idx]:
            raw_col = _align_column(raw, self.rendered_lines[idx], col - 1)
        else:
            raw_col = _call_column(raw)
        return Location(self.path, raw_line, raw_col + 1)


def _align_column(raw: str, rendered: str, col: int) -> int:
    """0-based column in `raw` of 0-based `col` in `rendered` (Jinja spans never match text)."""
    masked = _JINJA_SPAN.sub(lambda m: "\0" * len(m.group()), raw)
    matcher = difflib.SequenceMatcher(None, masked, rendered, autojunk=False)
    prev_end, next_start = 0, len(raw)
    for a, b, size in matcher.get_matching_blocks()[:-1]:  # the last one is a size-0 sentinel
        if b <= col < b + size:
            return a + (col - b)
        if b + size <= col:
            prev_end = a + size
        else:
            next_start = a
            break
    # `col` is in text the model does not contain: output of the Jinja span in that gap
    span = masked.find("\0", prev_end, next_start)
    return span if span >= 0 else min(prev_end, max(len(raw) - 1, 0))


def _call_column(raw: str) -> int:
    """Where the Jinja expression that produced a generated line starts on its model line."""
    pos = raw.find("{{")
    if pos < 0:
        pos = raw.find("{%")
    if pos < 0:
        pos = len(raw) - len(raw.lstrip())
    return pos


def strip_markers(path: str, raw_sql: str, marked: str) -> tuple[str, SourceMap]:
    """The rendered SQL without markers, and the source map the markers described."""
    out_lines: list[str] = []
    origins: list[int] = []
    literal: list[bool] = []
    current = 1
    for line in marked.split("\n"):
        first = _MARK.match(line)
        marks = _MARK.findall(line)
        origins.append(int(first.group(1)) if first else current)
        literal.append(first is not None)
        if marks:
            current = int(marks[-1])
        out_lines.append(_MARK.sub("", line) if marks else line)
    source_map = SourceMap(path, tuple(raw_sql.split("\n")), tuple(out_lines), tuple(origins),
                           tuple(literal))
    return "\n".join(out_lines), source_map


# --- errors raised while rendering ----------------------------------------------------------------

_UNDEFINED = re.compile(r"^'([^']+)' is undefined$")


def locate_exception(exc: BaseException, model_path: str, files: set[str],
                     context: dict) -> SqlflowError:
    """A user-facing SqlflowError for anything raised while rendering a model.

    The location is the innermost template frame (model or macro file) in the traceback, which
    Jinja rewrites to template lines; a macro's error also says which model line called it.
    """
    frames = [(frame.f_code.co_filename, lineno)
              for frame, lineno in traceback.walk_tb(exc.__traceback__)
              if frame.f_code.co_filename in files]
    where = Location(*frames[-1]) if frames else Location(model_path)
    caller = next((Location(p, n) for p, n in frames if p == model_path), None)
    via = f" (called from {caller})" if caller and where.path != model_path else ""
    if isinstance(exc, SqlflowError):
        if all(d.location for d in exc.diagnostics):
            return exc  # already located, e.g. raised while rendering another model
        # raise_compiler_error in a macro rejects the caller's arguments: point at the call.
        if isinstance(exc, CompilerError) and via and caller:
            at, note = caller, f" (raised in {where})"
        else:
            at, note = where, via
        return SqlflowError(diagnostics=[
            d if d.location else replace(d, location=at, hint=d.hint + note)
            for d in exc.diagnostics])
    if type(exc).__name__ == "MacroReturn":
        return SqlflowError("`return()` outside a macro", location=where,
                            hint="output the value with {{ ... }} instead")
    if isinstance(exc, jinja2.exceptions.SecurityError):
        return SqlflowError(f"the Jinja sandbox refused this: {exc}", location=where, hint=(
            "a model reaches only dbt's documented helpers, never Python internals, files or "
            f"the environment (docs/semantics.md, the Jinja sandbox){via}"))
    if isinstance(exc, jinja2.TemplateSyntaxError):
        loc = Location(exc.filename or model_path, exc.lineno or 0)
        return SqlflowError(f"Jinja syntax error: {exc.message}", location=loc,
                            hint="fix the template syntax")
    if isinstance(exc, jinja2.UndefinedError):
        return _undefined_error(str(exc.message or exc), where, via, context)
    return SqlflowError(f"rendering failed: {exc}", location=where,
                        hint=f"fix the Jinja on this line{via}")


def _undefined_error(message: str, where: Location, via: str, context: dict) -> SqlflowError:
    match = _UNDEFINED.match(message)
    if match:
        name = match.group(1)
        known = [k for k in context if not k.startswith("_")]
        return SqlflowError(f"`{name}` is not defined (no macro, variable or helper of that name)",
                            location=where, hint=did_you_mean(name, known) + via)
    return SqlflowError(message.replace("'", "`"), location=where,
                        hint=f"check the attribute or key name{via}")
