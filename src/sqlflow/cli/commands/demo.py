"""`sqlflow demo` and `sqlflow demo generate`: the README's main job and its data."""

from __future__ import annotations

import sys

import click

from sqlflow.cli.support import console, context, error_handler


@click.group("demo", invoke_without_command=True)
@click.option("--rows", type=click.IntRange(min=100), default=None,
              help="Impressions to generate (events scale with it). Default: a few-minute demo "
                   "(20,000 over Kafka, 200,000 Delta-only).")
@click.option("--seed", type=int, default=None, help="Random seed; the same seed gives the same data.")
@click.option("--days", type=click.IntRange(min=1, max=31), default=None, help="Days of data.")
@click.pass_context
@error_handler
def demo(click_ctx: click.Context, rows: int | None, seed: int | None, days: int | None) -> None:
    """Run the pipeline end to end (the README's main job): without --target, over Kafka (a
    broker, the events produced, every model streamed, then compared with the backfill);
    with a target that names no Kafka cluster (--target local), the Delta-only demo
    (generate, then backfill every model)."""
    if click_ctx.invoked_subcommand is not None:
        return
    from sqlflow.demo.run import run_demo

    if not run_demo(context(), console, rows=rows, seed=seed, days=days):
        sys.exit(1)


@demo.command("generate")
@click.option("--rows", type=click.IntRange(min=100), default=None, help="Impressions to generate.")
@click.option("--seed", type=int, default=None, help="Random seed; the same seed gives the same data.")
@click.option("--days", type=click.IntRange(min=1, max=31), default=None, help="Days of data.")
@error_handler
def demo_generate(rows: int | None, seed: int | None, days: int | None) -> None:
    """Write the demo's ODS and dimension Delta tables (deterministic for a seed)."""
    from sqlflow.demo.run import generate_demo

    generate_demo(context(), console, rows=rows, seed=seed, days=days)


@demo.command("produce")
@click.option("--rows", type=click.IntRange(min=100), default=None, help="Impressions to produce.")
@click.option("--rate", type=click.FloatRange(min=0, min_open=True), default=None,
              help="At most this many records a second over all topics (default: as fast as possible).")
@click.option("--seed", type=int, default=None, help="Random seed; the same seed gives the same records.")
@click.option("--days", type=click.IntRange(min=1, max=31), default=None, help="Days of data.")
@error_handler
def demo_produce(rows: int | None, rate: float | None, seed: int | None, days: int | None) -> None:
    """Send the demo's impressions, clicks and user events to Kafka (run with `--target kafka`
    after `sqlflow kafka up`); the dimensions go to the target's warehouse."""
    from sqlflow.demo.run import produce_demo

    produce_demo(context(), console, rows=rows, rate=rate, seed=seed, days=days)


command = demo
