"""The `sqlflow` command line: the group and its options; every command is a module of
`sqlflow.cli.commands`. Commands are thin: parse options, call the library, print.

A user mistake (SqlflowError) prints one red line per problem with a hint and exits 1;
`--debug` re-raises it with the traceback instead.
"""

from __future__ import annotations

from pathlib import Path

import click

from sqlflow.cli.commands import COMMANDS


@click.group()
@click.option("--project-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Project root (default: the nearest folder with dbt_project.yml).")
@click.option("--target", "-t", default=None, help="Target in profiles/profiles.yml (default: the profile's).")
@click.option("--debug", is_flag=True, help="Show full tracebacks.")
@click.version_option(package_name="sqlflow")
@click.pass_context
def main(ctx: click.Context, project_dir: Path | None, target: str | None, debug: bool) -> None:
    """sqlflow: dbt-style SQL models compiled to Spark streaming or backfill plans."""
    ctx.obj = {"project_dir": project_dir, "target": target}


for _command in COMMANDS:
    main.add_command(_command)


if __name__ == "__main__":  # pragma: no cover
    main()
