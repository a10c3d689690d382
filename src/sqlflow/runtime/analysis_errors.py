"""Spark's analysis errors of a plan's SQL, reported at the model file's line and column.

Spark analyses the plan's SQL, which sqlglot generated from the model's tree: it is not the
text the analyst wrote (relations are bound to views, formatting and quoting differ, Jinja is
gone). Spark 4's error carries an error condition, message parameters (`objectName` of an
unresolved column, `routineName` of an unknown function...) and usually a query context: the
fragment of the SQL it rejected with its start index. That fragment is found again in the
model's rendered SQL by comparing sqlglot tokens (not characters, so formatting and quoting do
not matter), and the rendered position is mapped to the model file through the render's
source map (`sqlflow.rendering.sourcemap`), so Jinja that adds or removes lines above it does not shift it.

When the fragment appears several times, the occurrence Spark pointed at in the plan's SQL
picks the one in the model (the delta rule repeats the model's statement, so occurrence k of
the plan is occurrence k mod n of the model). When nothing can be found, the caller's own
message (file, no line) stands: a wrong line would be worse than none.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Protocol

from sqlglot.errors import SqlglotError

from sqlflow.dialect import DIALECT
from sqlflow.errors import Location, SqlflowError


@dataclass(frozen=True)
class SparkProblem:
    """What Spark said, read off its exception: condition, parameters, rejected fragment."""

    condition: str
    params: dict[str, str] = field(default_factory=dict)
    message: str = ""
    fragment: str | None = None
    start: int | None = None  # index of `fragment` in the SQL Spark analysed


def problem_of(exc: BaseException) -> SparkProblem | None:
    """The structured error of a pyspark exception (or anything with its methods), or None.

    Only a query context of the main statement counts (`objectType` empty: not inside a view
    the statement reads) and of SQL text (not a DataFrame call site)."""
    try:
        condition = exc.getCondition()  # type: ignore[attr-defined]
        if not condition:
            return None
        params = dict(exc.getMessageParameters() or {})  # type: ignore[attr-defined]
        message = exc.getMessage() or str(exc)  # type: ignore[attr-defined]
        fragment = start = None
        for ctx in exc.getQueryContext() or ():  # type: ignore[attr-defined]
            kind = ctx.contextType()
            if getattr(kind, "name", str(kind)).upper().endswith("SQL") and not ctx.objectType():
                fragment, start = ctx.fragment(), ctx.startIndex()
                break
        return SparkProblem(str(condition), params, str(message), fragment, start)
    except Exception:  # not a Spark error, or the JVM is gone: the caller's message stands
        return None


# --- finding the fragment in the model ------------------------------------------------------------

_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class _Tok:
    key: tuple[str, str]  # what must match: words case-insensitively, quoting ignored
    start: int  # character offset in the text tokenized


def _tokens(sql: str) -> list[_Tok] | None:
    try:
        raw = DIALECT().tokenize(sql)
    except (SqlglotError, ValueError):
        return None
    out = []
    for t in raw:
        text = t.text
        if _WORD.match(text) or t.token_type.name in ("VAR", "IDENTIFIER"):
            key = ("word", text.lower())
        elif t.token_type.name == "STRING":
            key = ("string", text)
        else:
            key = (t.token_type.name, text.lower())
        out.append(_Tok(key, t.start))
    return out


def _occurrences(tokens: list[_Tok], needle: list[tuple[str, str]]) -> list[int]:
    """Character offsets where the token sequence `needle` starts in `tokens`."""
    n = len(needle)
    return [tokens[i].start for i in range(len(tokens) - n + 1)
            if all(tokens[i + j].key == needle[j] for j in range(n))]


def _needles(problem: SparkProblem) -> list[tuple[str, int | None]]:
    """Texts to look for, best first: Spark's fragment (with where it was), then the name in
    the message parameters (an unresolved column, function or table)."""
    out: list[tuple[str, int | None]] = []
    if problem.fragment:
        out.append((problem.fragment, problem.start))
    for key in ("objectName", "routineName", "functionName", "relationName"):
        name = problem.params.get(key)
        if name:
            out.append((name, None))
    return out


def find_in_model(problem: SparkProblem, plan_sql: str, rendered_sql: str) -> int | None:
    """Character offset in the rendered model of what Spark rejected in `plan_sql`, or None."""
    plan_tokens, model_tokens = _tokens(plan_sql), _tokens(rendered_sql)
    if plan_tokens is None or model_tokens is None:
        return None
    for text, start in _needles(problem):
        needle = _tokens(text)
        if not needle:
            continue
        keys = [t.key for t in needle]
        in_model = _occurrences(model_tokens, keys)
        if not in_model:
            continue
        in_plan = _occurrences(plan_tokens, keys)
        k = in_plan.index(start) if start is not None and start in in_plan else 0
        if len(in_plan) % len(in_model) == 0:  # the plan holds whole copies of the statement
            k %= len(in_model)
        elif k >= len(in_model):  # the plan added occurrences: the model's first one
            k = 0
        return in_model[k]
    return None


def _line_col(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


# --- the message ----------------------------------------------------------------------------------


def _plain(message: str) -> str:
    """Spark's message without its `[CONDITION]` prefix and `SQLSTATE` suffix, first line only."""
    text = re.sub(r"^\[[A-Z_.]+\]\s*", "", message.strip())
    text = re.sub(r"\s*SQLSTATE: \w+.*$", "", text, flags=re.S)
    return text.splitlines()[0].strip() if text else "Spark rejected the SQL"


def explain(problem: SparkProblem, written: str = "") -> tuple[str, str]:
    """(message, hint) in plain words for the conditions analysts hit most, Spark's own words
    for the rest. `written`: the word at the model's location, so a function name reads as the
    analyst spelled it (sqlglot upper-cases function names in the plan's SQL)."""
    p, cond = problem.params, problem.condition
    if cond.startswith("UNRESOLVED_COLUMN"):
        name = p.get("objectName", "?")
        proposal = p.get("proposal")
        hint = (f"Spark suggests {proposal}" if proposal else
                "check the name against the columns of the tables the query reads")
        return f"column {name} does not exist", hint
    if cond.startswith("UNRESOLVED_ROUTINE"):
        name = p.get("routineName", "?")
        if written and name.strip("`").split("`.`")[-1].lower() == written.lower():
            name = f"`{written}`"
        return (f"function {name} does not exist",
                "check the spelling; a Python UDF must be defined under udfs/ with this name")
    if cond.startswith("TABLE_OR_VIEW_NOT_FOUND"):
        return (f"table {p.get('relationName', '?')} does not exist",
                "read models with {{ ref('model') }} and sources with {{ source('name', 'table') }}")
    if cond.startswith("WRONG_NUM_ARGS"):
        return (f"{p.get('functionName', 'the function')} takes {p.get('expectedNum', '?')} "
                f"arguments, not {p.get('actualNum', '?')}", "fix the arguments of the call")
    if cond.startswith("DATATYPE_MISMATCH"):
        return (f"type mismatch: {_plain(problem.message)}",
                "cast the argument to the type Spark expects, e.g. CAST(x AS BIGINT)")
    return _plain(problem.message), "fix the SQL at this place"


# --- what the runtimes use ------------------------------------------------------------------------


class PlanSql(Protocol):
    """What is read of a plan or a routed target: its model, its SQL and its mode (and, when it has
    them, `source_map` and the routed `group`)."""

    @property
    def model(self) -> str: ...
    @property
    def sql(self) -> str: ...
    @property
    def mode(self) -> str: ...


def analysis_error(exc: BaseException, plan: PlanSql, sql: str | None = None) -> SqlflowError | None:
    """A SqlflowError at the model line:col for Spark's error `exc` raised by `sql` (default
    `plan.sql`; another form of it, such as a small micro-batch's hash-join SQL), or None when
    it cannot be located (no source map, no fragment, not found in the model)."""
    source_map = getattr(plan, "source_map", None)
    problem = problem_of(exc)
    if source_map is None or problem is None:
        return None
    rendered = "\n".join(source_map.rendered_lines)
    offset = find_in_model(problem, plan.sql if sql is None else sql, rendered)
    if offset is None:
        return None
    where: Location = source_map.locate(*_line_col(rendered, offset))
    word = re.match(r"[A-Za-z_][A-Za-z0-9_]*", rendered[offset:])
    message, hint = explain(problem, word.group() if word else "")
    return SqlflowError(
        f"model `{plan.model}`: {message}", location=where,
        hint=f"{hint} (Spark [{problem.condition}] on {_artifact(plan)})")


def _artifact(plan: PlanSql) -> str:
    """Where `sqlflow compile` wrote the SQL Spark analysed: the plan's own file, or for a
    routed target its group's (`group` attribute)."""
    return f"target/sqlflow/{plan.mode}/{getattr(plan, 'group', None) or plan.model}.sql"


@contextmanager
def model_errors(plan: PlanSql, sql: str | None = None) -> Iterator[None]:
    """Around `spark.sql(plan.sql)` (or `spark.sql(sql)`, another form of it): Spark's analysis
    error becomes a SqlflowError at the model line when it can be located; anything else
    propagates unchanged."""
    try:
        yield
    except SqlflowError:
        raise
    except Exception as exc:
        located = analysis_error(exc, plan, sql)
        if located is None:
            raise
        raise located from exc
