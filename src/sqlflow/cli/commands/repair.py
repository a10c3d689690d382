"""`sqlflow repair [--select M]`: rewrite every dirty or provisional partition (docs/design.md §2.7)
with the model's batch plan, partition-scoped; see `sqlflow.runtime.repair`."""

from __future__ import annotations

from typing import cast

import click

from sqlflow.cli.support import (
    console,
    context,
    err_console,
    error_handler,
    escape,
    exclude_option,
    parse_vars,
)


@click.command("repair")
@click.option("--select", "-s", "select", multiple=True, help="Models to repair (default: all).")
@exclude_option
@click.option("--vars", "vars_text", default=None, help="YAML mapping of vars, overriding dbt_project.yml.")
@error_handler
def command(select: tuple[str, ...], exclude: tuple[str, ...], vars_text: str | None) -> None:
    """Recompute provisional and dirty partitions with the batch plan."""
    from sqlflow.planning.plan import BatchPlan, RoutedPlan
    from sqlflow.report.summary import progress_line
    from sqlflow.runtime.dispatch import repair
    from sqlflow.workflows.run import plans_for_run

    ctx = context()
    plans = cast(list[BatchPlan | RoutedPlan],  # batch mode plans no StreamPlan
                 plans_for_run(ctx, "batch", err_console, select=select, vars=parse_vars(vars_text),
                               exclude=exclude))
    results = repair(ctx, plans, on_run=lambda r: console.print(escape(progress_line(r)), soft_wrap=True))
    for r in results:
        if not r.found:
            continue
        line = f"{r.model}: {len(r.found)} open partition(s), {len(r.repaired)} repaired"
        if r.still_open:
            waiting = ", ".join(s.partition for s in r.still_open)
            line += f"; still provisional or dirty: {waiting} (a dimension day is not ready yet)"
        console.print(escape(line), soft_wrap=True)
    if not any(r.found for r in results):
        console.print("nothing to repair: no dirty or provisional partitions")
