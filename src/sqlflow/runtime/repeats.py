"""Whether a failed micro-batch fails again on every run (docs/semantics.md, "When a stream
query stops").

A restarted query replays the micro-batch its checkpoint holds, with the same rows. A failure
caused by those rows or by the query itself (Spark refusing a value: a cast, a division by zero,
an overflow; Spark refusing the SQL; sqlflow's own code failing on the rows) happens again on
every run, so "run again" is no advice for it: the message says what to fix instead. Anything
else (a killed process, a lost executor, an I/O error of the environment) may pass, and the
checkpoint resumes the query.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_STATE = re.compile(r"SQLSTATE: ([0-9A-Z]{5})")
_CONDITION = re.compile(r"\[([A-Z][A-Z0-9_]+(?:\.[A-Z0-9_]+)?)\]")
# Spark's SQLSTATE classes of a value the query cannot compute, and of a query Spark refuses
_DATA, _QUERY = ("22",), ("42", "0A")
# Python errors of sqlflow's own code on the batch's rows: the replay hits them again
_PYTHON = (ValueError, TypeError, LookupError, AttributeError, AssertionError, ArithmeticError,
           NotImplementedError)


@dataclass(frozen=True)
class Repeats:
    """Why a failure repeats: `kind` is `data`, `query` or `internal`; `detail` names Spark's
    error condition (or the Python error type)."""

    kind: str
    detail: str

    def hint(self, rebuild: str | None) -> str:
        again = "running again replays the same micro-batch and fails the same way"
        if self.kind == "data":
            fix = (f"a value in this micro-batch's input makes the model's SQL fail ({self.detail}): "
                   "handle it in the model (e.g. `try_cast`, `try_divide`, or a `WHERE` that "
                   "filters the row out) and run again")
        elif self.kind == "query":
            fix = f"Spark refuses the model's query ({self.detail}): fix the model's SQL and run again"
        else:
            fix = (f"sqlflow failed on this micro-batch's rows ({self.detail}): report it with "
                   "the output of --debug")
        rebuilt = f"; `{rebuild}` rebuilds the model from its input" if rebuild and self.kind != "internal" else ""
        return f"{again}; {fix}{rebuilt}"


def repeats(exc: BaseException) -> Repeats | None:
    """Why `exc`, raised by a micro-batch or its query, fails every run again; None when a
    new run may succeed."""
    states: list[str | None] = [_state(exc), *_STATE.findall(str(exc))]
    for state in filter(None, states):
        if state.startswith(_DATA):
            return Repeats("data", _condition(exc) or f"SQLSTATE {state}")
        if state.startswith(_QUERY):
            return Repeats("query", _condition(exc) or f"SQLSTATE {state}")
    if isinstance(exc, _PYTHON) and not _from_jvm(exc):
        return Repeats("internal", f"{type(exc).__name__}: {str(exc).strip()[:200]}")
    return None


def _state(exc: BaseException) -> str | None:
    try:
        return exc.getSqlState()  # type: ignore[attr-defined]
    except Exception:  # not a Spark error, or the JVM is gone
        return None


_WRAPPERS = {"TASK_WRITE_FAILED", "STREAM_FAILED", "FOREACH_BATCH_USER_FUNCTION_ERROR"}


def _condition(exc: BaseException) -> str | None:
    """Spark's error condition, past the conditions that only wrap the cause."""
    try:
        own = exc.getCondition()  # type: ignore[attr-defined]
    except Exception:
        own = None
    found = [own] + _CONDITION.findall(str(exc))
    return next((c for c in found if c and c not in _WRAPPERS), None)


def _from_jvm(exc: BaseException) -> bool:
    return type(exc).__module__.startswith(("py4j", "pyspark.errors"))
