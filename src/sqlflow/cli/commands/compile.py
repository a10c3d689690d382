"""`sqlflow compile`: print each model's plan and write its artifacts."""

from __future__ import annotations

import click

from sqlflow.cli.support import (
    SELECT_HELP,
    console,
    context,
    err_console,
    error_handler,
    escape,
    exclude_option,
    parse_vars,
)
from sqlflow.project.runmode import Mode


@click.command("compile")
@click.option("--mode", type=click.Choice(["stream", "batch"]), required=True,
              help="stream: Structured Streaming plans; batch: backfill plans.")
@click.option("--select", "-s", "select", multiple=True,
              help=f"Models to compile. {SELECT_HELP}")
@exclude_option
@click.option("--format", "fmt", type=click.Choice(["sql", "json"]), default="sql", help="What to print.")
@click.option("--vars", "vars_text", default=None, help="YAML mapping of vars, overriding dbt_project.yml.")
@error_handler
def compile_cmd(mode: Mode, select: tuple[str, ...], exclude: tuple[str, ...], fmt: str,
                vars_text: str | None) -> None:
    """Compile models to Spark plans; print them and write target/sqlflow/<mode>/<model>.sql|json."""
    from sqlflow.compiler import compile_project, plan_json_text, plan_sql_text, write_artifacts
    from sqlflow.secrets import mask

    ctx = context()
    result = compile_project(ctx.project_dir, mode=mode, select=list(select) or None,
                             target=ctx.target, vars=parse_vars(vars_text), exclude=exclude)
    for diag in result.warnings:
        err_console.print(f"[yellow]{escape(diag.format())}[/yellow]", soft_wrap=True)
    result.raise_if_errors()
    written = write_artifacts(result, ctx.project_dir)
    for name, plan in result.plans.items():
        text = plan_sql_text(plan) if fmt == "sql" else plan_json_text(plan, result.irs.get(name))
        text = mask(text)  # docs/deploy.md, "Secrets"
        console.print(escape(text), end="" if text.endswith("\n") else "\n", soft_wrap=True)
    err_console.print(f"compiled {len(result.plans)} model(s) in {mode} mode; "
                      f"wrote {len(written)} files to target/sqlflow/{mode}/")


command = compile_cmd
