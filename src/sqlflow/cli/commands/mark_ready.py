"""`sqlflow mark-ready TABLE --partition dt=...`: record that a partition is complete.

For tables loaded outside sqlflow (a daily dimension written by another job): appends a
`commit` row (mode `manual`) per partition to the commit log, which is READY for dimension
joins (docs/design.md §2.3, §2.5). Marking a partition twice adds a second row and changes nothing.
"""

from __future__ import annotations

import click

from sqlflow.cli.support import console, context, error_handler, escape
from sqlflow.errors import SqlflowError


@click.command("mark-ready")
@click.argument("table")
@click.option("--partition", "-p", "partitions", multiple=True, required=True,
              help="Partition to mark ready, e.g. dt=2026-11-02 (repeat for several).")
@error_handler
def command(table: str, partitions: tuple[str, ...]) -> None:
    """Mark partitions of TABLE (e.g. dim.dim_user) ready in the commit log."""
    from sqlflow.runtime.delta import commitlog as C

    specs = []
    for spec in partitions:
        try:
            parsed = C.parse_partition(spec)
        except ValueError as exc:
            raise SqlflowError(str(exc), hint="write --partition dt=2026-11-02") from None
        if not parsed or any(not v for v in parsed.values()):
            raise SqlflowError(f"`{spec}` names no partition value", hint="write --partition dt=2026-11-02")
        specs.append(C.partition_spec(parsed))
    spark = context().spark
    if not spark.catalog.tableExists(table):
        raise SqlflowError(f"table `{table}` does not exist",
                           hint="name it as <database>.<table>, e.g. dim.dim_user")
    C.append(spark, [C.Entry(table, s, "commit", "manual", reason="sqlflow mark-ready") for s in specs])
    for s in specs:
        console.print(f"{escape(table.lower())} {escape(s)}: ready")
