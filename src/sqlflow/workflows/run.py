"""Compile a project for a run and run its models, printing progress: `run` and `demo` share it."""

from __future__ import annotations

from datetime import date
from typing import Any, Sequence

from rich.console import Console
from rich.markup import escape

from sqlflow.compiler import compile_project, write_artifacts
from sqlflow.engine.context import Context
from sqlflow.planning.plan import Mode, Plan
from sqlflow.runtime.batch import DateRange, RunResult, run_models
from sqlflow.report.summary import dims_table, progress_line, summary_table


def plans_for_run(ctx: Context, mode: Mode, err: Console, *, select: Sequence[str] | None = None,
                  vars: dict[str, Any] | None = None) -> list[Plan]:
    """Compile for `mode`, print warnings, raise on errors, write the artifacts (the SQL an
    error message points at) and return the plans to run, inputs first."""
    result = compile_project(ctx.project_dir, mode=mode, select=list(select or []) or None,
                             target=ctx.target, vars=vars)
    for diag in result.warnings:
        err.print(f"[yellow]{escape(diag.format())}[/yellow]", soft_wrap=True)
    result.raise_if_errors()
    write_artifacts(result, ctx.project_dir)
    return [p for p in result.plans.values() if p.materialized != "ephemeral"]


def run_batch_plans(ctx: Context, plans: Sequence[Plan], out: Console, *,
                    start: date | None = None, end: date | None = None) -> list[RunResult]:
    """Run batch plans in order with a progress line each and a summary table at the end,
    printed even when a model fails (its SqlflowError propagates)."""
    dates = DateRange.of(start, end)
    done: list[RunResult] = []
    try:
        for run in run_models(ctx, plans, start=start, end=end):
            done.append(run)
            out.print(escape(progress_line(run)), soft_wrap=True)
    finally:
        not_run = [p.model for p in plans[len(done) + 1:]] if len(done) < len(plans) else []
        out.print(summary_table(done, dates, not_run))
        dims = dims_table(done)
        if dims is not None:
            out.print(dims)
        routed = [p.model for p in plans if type(p).__name__ == "RoutedPlan"]
        if routed:
            from sqlflow.runtime.routed.routing import files_table, last_report
            out.print(files_table([last_report[g] for g in routed if g in last_report]))
    return done


def run_batch_project(ctx: Context, out: Console, err: Console, *,
                      select: Sequence[str] | None = None, start: date | None = None,
                      end: date | None = None, vars: dict[str, Any] | None = None) -> list[RunResult]:
    """`sqlflow run --mode batch`: compile, then run every selected model in order."""
    DateRange.of(start, end)  # refuse a bad range before compiling
    plans = plans_for_run(ctx, "batch", err, select=select, vars=vars)
    return run_batch_plans(ctx, plans, out, start=start, end=end)
