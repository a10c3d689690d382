"""`sqlflow ctl pause|resume M`, `sqlflow ctl rate M SOURCE ROWS_PER_S`: steer a running stream
service through its control file (`sqlflow.runtime.control`; no JVM). The service applies a
change at its next poll (half a second): a paused model's query stops, the others run on."""

from __future__ import annotations

import click

from sqlflow.cli.support import console, context, error_handler
from sqlflow.errors import SqlflowError


@click.group("ctl")
def command() -> None:
    """Pause, resume or rate-limit one model of a running stream service."""


def _check(model: str) -> None:
    from sqlflow.runtime import heartbeat

    beat = heartbeat.read(context().project_dir)
    if beat is not None and model not in beat.get("models", {}):
        known = ", ".join(sorted(beat.get("models", {}))) or "none"
        raise SqlflowError(f"`{model}` is not a model of the stream service (its models: {known})",
                           hint="name a stream model as `sqlflow status` lists it")


@command.command("pause")
@click.argument("model")
@error_handler
def pause(model: str) -> None:
    """Stop MODEL's query until `sqlflow ctl resume MODEL` (its checkpoint keeps its place)."""
    from sqlflow.runtime import control

    _check(model)
    control.pause(context().project_dir, model)
    console.print(f"{model}: pause requested")


@command.command("resume")
@click.argument("model")
@error_handler
def resume(model: str) -> None:
    """Start MODEL's query again from its checkpoint."""
    from sqlflow.runtime import control

    _check(model)
    control.resume(context().project_dir, model)
    console.print(f"{model}: resume requested")


@command.command("rate")
@click.argument("model")
@click.argument("source")
@click.argument("rows_per_s", type=click.FloatRange(min=0))
@error_handler
def rate(model: str, source: str, rows_per_s: float) -> None:
    """Read at most ROWS_PER_S rows per second of SOURCE (a table, e.g. ods.imps) in MODEL;
    0 removes the limit. Refused while the service runs over Spark Connect."""
    from sqlflow.engine.connect_limits import connect_error
    from sqlflow.runtime import control, heartbeat

    _check(model)
    beat = heartbeat.read(context().project_dir)
    if beat is not None and beat.get("running") and beat.get("connect"):
        raise connect_error(beat["connect"], "rate")  # docs/deploy.md, "The stream service over Connect"
    control.set_rate(context().project_dir, model, source, rows_per_s)
    console.print(f"{model}: {source} limited to {rows_per_s:g} rows/s" if rows_per_s > 0
                  else f"{model}: {source} unlimited")
