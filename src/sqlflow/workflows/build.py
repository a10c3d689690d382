"""`sqlflow seed` and `sqlflow build` (docs/semantics.md, "Seeds" and "sqlflow build").

`build` is `dbt build` on sqlflow's batch runtime: seeds, models and data tests in DAG order.
A test runs once every node it reads is built; a failing test (severity error) or a failing
node skips every node downstream of it, the rest of the DAG goes on, and the command fails.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from rich.console import Console
from rich.markup import escape

from sqlflow.compiler import CompileResult
from sqlflow.engine.context import Context
from sqlflow.errors import Location, SqlflowError
from sqlflow.planning.plan import BatchPlan, RoutedPlan
from sqlflow.project.load import load_project
from sqlflow.rendering.data_tests import DataTest, data_tests
from sqlflow.runtime.data_tests import run_test
from sqlflow.runtime.dispatch import run_models
from sqlflow.runtime.seeds import load_seed
from sqlflow.workflows.run import plans_for_run


@dataclass
class BuildReport:
    """What a build did, node by node (`ok`, `fail`, `skip`, `warn`), in the order it did it."""

    lines: list[tuple[str, str, str]] = field(default_factory=list)  # (kind, name, status)

    @property
    def failed(self) -> bool:
        return any(status == "fail" for _, _, status in self.lines)


def seed_project(ctx: Context, out: Console, err: Console, *, select: Sequence[str] | None = None,
                 exclude: Sequence[str] | None = None,
                 vars: dict[str, Any] | None = None) -> BuildReport:
    """`sqlflow seed`: load every selected seed."""
    compiled = _compile(ctx, err, select, vars, exclude)
    report = BuildReport()
    project = load_project(ctx.project_dir)
    for name, relation in sorted(compiled.seeds.items()):
        res = load_seed(ctx.spark, ctx.project_dir, project.seeds[name], relation)
        out.print(escape(f"seed {name}: {res.rows:,} rows into {relation} ({res.seconds:.1f}s)"),
                  soft_wrap=True)
        report.lines.append(("seed", name, "ok"))
    return report


def build_project(ctx: Context, out: Console, err: Console, *,
                  select: Sequence[str] | None = None,
                  exclude: Sequence[str] | None = None, adopt_dbt_tables: bool = False,
                  vars: dict[str, Any] | None = None, full_refresh: bool = False) -> BuildReport:
    """`sqlflow build`: seeds, models and tests of the selection in DAG order;
    `full_refresh` rebuilds `incremental` models (`dbt build --full-refresh`)."""
    compiled = _compile(ctx, err, select, vars, exclude)
    plans = plans_for_run(ctx, "batch", err, select=select, vars=vars, exclude=exclude,
                          adopt_dbt_tables=adopt_dbt_tables)
    project = load_project(ctx.project_dir)
    dag = compiled.dag
    assert dag is not None
    tests, not_run = data_tests(project, ctx.target, vars)
    selected = set(compiled.seeds) | {m for p in plans for m in _models(p)} | set(compiled.plans)
    pending = [t for t in tests if set(t.attached) & selected]
    report = BuildReport()
    done: set[str] = set()
    skipped: set[str] = set()

    def finished(name: str) -> None:
        done.add(name)
        for test in [t for t in pending if set(t.refs) <= done | (set(dag.order) - selected)]:
            pending.remove(test)
            _run_test(ctx, test, out, report, skipped, dag)

    for name, relation in sorted(compiled.seeds.items()):
        load_seed(ctx.spark, ctx.project_dir, project.seeds[name], relation)
        out.print(escape(f"seed {name}: loaded into {relation}"), soft_wrap=True)
        report.lines.append(("seed", name, "ok"))
        finished(name)
    for plan in plans:
        models = _models(plan)
        if set(models) & skipped:
            out.print(escape(f"skip {', '.join(models)}: an upstream node or test failed"),
                      soft_wrap=True)
            report.lines += [("model", m, "skip") for m in models]
            continue
        try:
            for run in run_models(ctx, [cast(BatchPlan | RoutedPlan, plan)], full_refresh=full_refresh):
                out.print(escape(f"model {run.model}: {run.sink.rows:,} rows ({run.seconds:.1f}s)"),
                          soft_wrap=True)
        except SqlflowError as exc:
            out.print(f"[red]{escape(', '.join(models))} failed: {escape(str(exc))}[/red]",
                      soft_wrap=True)
            report.lines += [("model", m, "fail") for m in models]
            for m in models:
                skipped.update(dag.descendants(m))
            continue
        report.lines += [("model", m, "ok") for m in models]
        for m in models:
            finished(m)
    for name in sorted(n for n, r in compiled.rendered.items()
                       if r.config.materialized == "ephemeral"):
        finished(name)
    for skip in not_run:
        err.print(escape(f"{skip.path}: test `{skip.name}` not run: sqlflow runs dbt's built-in "
                         "generic tests and singular tests; run it with `dbt test`"), soft_wrap=True)
    return report


def _run_test(ctx: Context, test: DataTest, out: Console, report: BuildReport,
              skipped: set[str], dag: Any) -> None:
    if set(test.refs) & skipped:
        report.lines.append(("test", test.name, "skip"))
        return
    try:
        result = run_test(ctx.spark, test.sql, test.config, test.relation)
    except ValueError as exc:  # a fail_calc / warn_if / error_if that is not SQL
        raise SqlflowError(f"test `{test.name}`: {exc}", location=Location(test.path),
                           hint="fix the test's config") from None
    status = result.status(test.severity)
    stored = f"; failing rows in {test.relation}" if test.relation is not None else ""
    out.print(escape(f"test {test.name}: {status.upper()}"
                     + (f" (got {result.failures} failures{stored})" if status != "ok" else "")),
              soft_wrap=True)
    report.lines.append(("test", test.name, status))
    if status == "fail":
        for node in test.attached:
            skipped.update(dag.descendants(node))


def _models(plan: BatchPlan | RoutedPlan | Any) -> tuple[str, ...]:
    targets = getattr(plan, "targets", None)
    if targets:
        return tuple(getattr(t, "model", str(t)) for t in targets)
    return (plan.model,)


def _compile(ctx: Context, err: Console, select: Sequence[str] | None,
             vars: dict[str, Any] | None, exclude: Sequence[str] | None = None) -> CompileResult:
    from sqlflow.compiler import compile_project

    result = compile_project(ctx.project_dir, mode="batch", select=list(select or []) or None,
                             target=ctx.target, vars=vars, exclude=list(exclude or []) or None)
    result.raise_if_errors()
    return result
