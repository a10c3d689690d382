"""What every `sqlflow` command shares: consoles, the error handler, the Context, --vars.

Command modules (`sqlflow.cli.main` and `sqlflow.cli.commands.*`) import from here, never from each other.
"""

from __future__ import annotations

import functools
import sys

import click
from rich.console import Console

from sqlflow.engine.context import Context
from sqlflow.errors import SqlflowError
from sqlflow.secrets import install_log_masking, mask_exception


def _log_width(stream: object) -> int | None:
    """None (the terminal's width) on a terminal; else wide enough that a log (CI, `| tee`)
    shows every table column whole instead of rich's default of 80 columns."""
    isatty = getattr(stream, "isatty", None)
    return None if isatty is not None and isatty() else 1000


console = Console(highlight=False, width=_log_width(sys.stdout))
err_console = Console(stderr=True, highlight=False, width=_log_width(sys.stderr))


def error_handler(fn):
    """Turn known errors into red lines and exit 1; let --debug show the traceback."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        ctx = click.get_current_context()
        debug = bool(ctx.find_root().params.get("debug"))
        install_log_masking()
        try:
            return fn(*args, **kwargs)
        except SqlflowError as exc:
            mask_exception(exc)  # docs/deploy.md, "Secrets": never print a secret's value
            if debug:
                raise
            for diag in exc.diagnostics:
                err_console.print(f"[red]{escape(diag.format())}[/red]", soft_wrap=True)
            sys.exit(1)
        except Exception as exc:
            from sqlflow.engine.connect_limits import nesting_error, worker_error

            known = nesting_error(exc) or worker_error(exc)
            if known is not None and not debug:
                err_console.print(f"[red]{escape(known.diagnostics[0].format())}[/red]", soft_wrap=True)
                sys.exit(1)
            raise mask_exception(exc)  # noqa: B904 (the same exception, re-raised masked)

    return wrapper


def escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def context() -> Context:
    """The Context for the running command, discovered once from the root options."""
    obj = click.get_current_context().find_root().obj
    if "context" not in obj:
        obj["context"] = Context.discover(obj["project_dir"], obj["target"])
    return obj["context"]


SELECT_HELP = ("dbt's selection grammar: name, folder (staging, staging.*), path:dir, tag:x, "
               "config.materialized:view, resource_type:model, source:s.t, with +/N+ on either "
               "side and @; words unite, commas intersect.")


def exclude_option(fn):
    """`--exclude`, dbt's: the nodes it selects are removed from the `--select`ion."""
    return click.option("--exclude", "exclude", multiple=True,
                        help="Models to leave out, in the same grammar as --select.")(fn)


def parse_vars(text: str | None) -> dict:
    if not text:
        return {}
    import yaml

    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SqlflowError(f"--vars is not valid YAML: {exc}",
                           hint="""pass a mapping, e.g. --vars '{"start": "2026-11-01"}'""") from None
    if not isinstance(value, dict):
        raise SqlflowError("--vars must be a mapping", hint="""e.g. --vars '{"days": 2}'""")
    return value
