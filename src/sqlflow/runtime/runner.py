"""Compile a project in batch mode and run its models, printing progress: `run` and `demo` share it."""

from __future__ import annotations

from datetime import date
from typing import Any, Sequence

from rich.console import Console
from rich.markup import escape

from sqlflow.compiler import compile_project, write_artifacts
from sqlflow.context import Context
from sqlflow.runtime.batch import DateRange, RunResult, run_models
from sqlflow.runtime.summary import progress_line, summary_table


def run_batch_project(ctx: Context, out: Console, err: Console, *,
                      select: Sequence[str] | None = None, start: date | None = None,
                      end: date | None = None, vars: dict[str, Any] | None = None) -> list[RunResult]:
    """Compile (batch), write the artifacts, run the selected models in order, print a summary.

    Raises SqlflowError for compile errors and for the first model that fails; the summary of
    what ran is printed either way.
    """
    dates = DateRange.of(start, end)
    result = compile_project(ctx.project_dir, mode="batch", select=list(select or []) or None,
                             target=ctx.target, vars=vars)
    for diag in result.warnings:
        err.print(f"[yellow]{escape(diag.format())}[/yellow]", soft_wrap=True)
    result.raise_if_errors()
    write_artifacts(result, ctx.project_dir)  # the SQL an error message points at
    plans = [p for p in result.plans.values() if p.materialized != "ephemeral"]
    done: list[RunResult] = []
    try:
        for run in run_models(ctx, plans, start=start, end=end):
            done.append(run)
            out.print(escape(progress_line(run)), soft_wrap=True)
    finally:
        not_run = [p.model for p in plans[len(done) + 1:]] if len(done) < len(plans) else []
        out.print(summary_table(done, dates, not_run))
    return done
