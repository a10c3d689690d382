"""`sqlflow kafka up|down`: a single-node Kafka broker on 127.0.0.1 for the project
(`sqlflow.engine.broker`; state under `.sqlflow/kafka/`)."""

from __future__ import annotations

import click

from sqlflow.cli.support import console, context, error_handler


@click.group("kafka")
def kafka() -> None:
    """Start or stop the project's local Kafka broker (KRaft, no Docker)."""


@kafka.command("up")
@click.option("--port", type=click.IntRange(min=1024, max=65534), default=9092, show_default=True,
              help="The broker's port on 127.0.0.1 (the controller takes port + 1).")
@error_handler
def up(port: int) -> None:
    """Start the broker in the background and print its address."""
    from sqlflow.engine import broker

    folder = context().state_dir / "kafka"
    already = broker.running(folder)
    started = broker.start(folder, port)
    note = " (already running)" if already else ""
    console.print(f"kafka broker at {started.address}{note}; state in {folder}")


@kafka.command("down")
@error_handler
def down() -> None:
    """Stop the broker (its topics stay in `.sqlflow/kafka/data` for the next `up`)."""
    from sqlflow.engine import broker

    stopped = broker.stop(context().state_dir / "kafka")
    console.print(f"kafka broker at {stopped.address} stopped" if stopped else "no kafka broker runs")


command = kafka
