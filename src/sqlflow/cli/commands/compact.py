"""`sqlflow compact`: Delta OPTIMIZE on the committed partitions of the selected models."""

from __future__ import annotations

import click

from sqlflow.cli.support import console, context, err_console, error_handler, escape, exclude_option


@click.command("compact")
@click.option("--select", "-s", "select", multiple=True, required=True,
              help="Models to compact (a routed group by its members: path:models/routed): name, tag:x, path:dir.")
@exclude_option
@click.option("--where", default=None,
              help="Narrow to partitions matching this predicate on partition columns, "
                   "e.g. \"dt >= '2026-11-01'\".")
@error_handler
def command(select: tuple[str, ...], exclude: tuple[str, ...], where: str | None) -> None:
    """Bin-pack the files of committed partitions (commit log) up to target_file_size.

    Open partitions (hours not yet committed) are left alone: their stream still writes them.
    """
    from sqlflow.compiler import compile_project
    from sqlflow.planning.fusion import DEFAULT_TARGET_FILE_SIZE
    from sqlflow.runtime.delta.compaction import compact

    ctx = context()
    result = compile_project(ctx.project_dir, mode="batch", select=list(select), target=ctx.target,
                             exclude=list(exclude) or None)
    result.raise_if_errors()
    todo = []
    for plan in result.plans.values():
        if hasattr(plan, "targets"):
            todo += [(t.model, t.sink.table, t.target_file_size) for t in plan.targets]
        elif plan.sink.write != "view":
            size = result.rendered[plan.model].config.target_file_size
            todo.append((plan.model, plan.sink.table, size or DEFAULT_TARGET_FILE_SIZE))
    for model, table, size in todo:
        done = compact(ctx.spark, table, where=where, target_file_size=size)
        if not done.partitions:
            err_console.print(escape(f"{model}: no committed partitions in {table}; nothing to compact"))
            continue
        console.print(escape(f"{model}: {table}: {done.partitions} committed partition(s), "
                             f"{done.files_removed} files rewritten into {done.files_added}"))
