"""What the foreachBatch functions of the stream runtimes share (`microbatch`, `stateful`,
`routing`): keep the exception a micro-batch raised, and turn a failed query into the error
the user sees.

Spark wraps an exception raised inside foreachBatch in a StreamingQueryException whose text is
a Java trace. Each function keeps the original (`error`), so the runner re-raises a
SqlflowError exactly as the micro-batch raised it (file, line, hint) and names the model for
anything else."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.sql import DataFrame

from sqlflow.errors import Location, SqlflowError
from sqlflow.runtime.env_errors import environment_problem
from sqlflow.runtime.repeats import repeats


class BatchFunction:
    """Base of a foreachBatch callable: subclasses implement `_run`."""

    error: BaseException | None = None

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        try:
            self._run(df, batch_id)
        except BaseException as exc:  # kept: Spark wraps it in a StreamingQueryException
            self.error = exc
            raise

    def _run(self, df: DataFrame, batch_id: int) -> None:
        raise NotImplementedError


# Delta's error for a checkpoint whose input table was dropped and created again since.
RECREATED_INPUT = "DIFFERENT_DELTA_TABLE_READ_BY_STREAMING_SOURCE"


def query_failed(what: str, path: str, error: BaseException | None, exc: BaseException,
                 rebuild: str | None = None, written: tuple[str, ...] = ()) -> SqlflowError:
    """The error to raise for a query that failed with `exc`: the micro-batch's own SqlflowError
    as it was raised, else one naming `what` (e.g. "model `x`") with the first line of the cause.
    `rebuild`: the command that rebuilds the query's tables, the fix when an input table was
    created again (running again would fail the same way). A failure of the machine (disk
    full, permission denied...: `env_errors`) names it, its path and the fix; `written`: the
    paths the query writes, named when Spark's text has none. A failure that repeats on every
    run (`repeats`) says what to fix; only one that may pass says "run again"."""
    cause = error or exc
    if isinstance(cause, SqlflowError):
        return cause
    problem = environment_problem(cause, written) or (
        environment_problem(exc, written) if exc is not cause else None)
    if problem is not None:
        return SqlflowError(f"{what}: stream query failed: {problem.message}",
                            location=Location(path), hint=problem.fix)
    text = str(cause).strip()
    first = text.splitlines()[0][:300] if text else type(cause).__name__
    if RECREATED_INPUT in text and rebuild:
        return SqlflowError(
            f"{what}: stream query failed: an input table was dropped and created again since "
            "this query's checkpoint (e.g. by a --full-refresh of the model that writes it), so "
            f"the checkpoint cannot resume ({RECREATED_INPUT})", location=Location(path),
            hint=f"rebuild this model from the new input with `{rebuild}`; to refresh a model "
                 "and the stream models reading it together, select it with its descendants "
                 "(`--select name+`)")
    again = repeats(cause) or (repeats(exc) if exc is not cause else None)
    if again is not None:  # the replay fails the same way: say what to fix, not "run again"
        return SqlflowError(f"{what}: stream query failed: {first}", location=Location(path),
                            hint=again.hint(rebuild))
    return SqlflowError(f"{what}: stream query failed: {first}", location=Location(path),
                        hint="run again to resume from the checkpoint; --debug shows Spark's error")


class Phases:
    """Wall time per phase of one micro-batch (`with phases("sink"): ...`), in the order the
    phases first ran: the breakdown `bench/` prints. Spark is lazy, so a phase's time is that
    of the jobs its actions ran (the sink write runs the join)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        began = time.monotonic()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.monotonic() - began

    def items(self) -> tuple[tuple[str, float], ...]:
        return tuple(self.seconds.items())

