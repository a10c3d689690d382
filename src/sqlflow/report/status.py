"""What `sqlflow status` prints, read from the commit log (docs/semantics.md, "Partition
commit" and "Repair")."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from rich import box
from rich.table import Table

from sqlflow.planning.plan import Plan, RoutedPlan
from sqlflow.runtime.delta import commitlog as C


def output_tables(plan: Plan) -> tuple[str, ...]:
    """The tables a plan writes rows to: its sink (not a view), or every routed target."""
    return tuple(table for table, _ in plan.outputs)


def status_tables(spark: SparkSession, plans: Sequence[Plan]) -> list[Table]:
    """Open partitions of the plans' tables; per table, partitions written and committed;
    per dimension joined, its READY partitions."""
    tables = sorted({t.lower() for p in plans for t in output_tables(p)})
    out = [_open_table(C.open_partitions(spark, tables) if tables else [])]
    log = C.read(spark).where(F.col("table").isin(tables)) if tables else None
    summary = Table(title="Tables", title_justify="left", box=box.SIMPLE_HEAD)
    for name in ("table", "partitions written", "committed", "last write (UTC)"):
        summary.add_column(name)
    rows = {} if log is None else {r["table"]: r for r in log.groupBy("table").agg(
        F.countDistinct(F.when(F.col("kind") == "write", F.col("partition"))).alias("written"),
        F.countDistinct(F.when(F.col("kind") == "commit", F.col("partition"))).alias("committed"),
        F.max(F.when(F.col("kind") == "write", F.col("committed_at"))).alias("last")).collect()}
    for t in tables:
        r = rows.get(t)
        summary.add_row(t, str(r["written"]) if r else "0", str(r["committed"]) if r else "0",
                        str(r["last"])[:19] if r and r["last"] else "-")
    out.append(summary)
    dims = sorted({d.relation for p in plans if not isinstance(p, RoutedPlan) and p.dim for d in p.dim.dims})
    if dims:
        ready = Table(title="Dimensions: READY partitions", title_justify="left", box=box.SIMPLE_HEAD)
        ready.add_column("dimension")
        ready.add_column("ready")
        for d in dims:
            parts = sorted(C.ready_partitions(spark, d))
            span = (parts[0] if len(parts) == 1 else f"{parts[0]} .. {parts[-1]}") if parts else "none"
            ready.add_row(d, f"{len(parts)}: {span}")
        out.append(ready)
    return out


def _open_table(found: list[C.PartitionState]) -> Table:
    table = Table(title=f"Open partitions ({len(found)}): `sqlflow repair` rewrites them",
                  title_justify="left", box=box.SIMPLE_HEAD)
    for name in ("table", "partition", "state", "why", "since (UTC)"):
        table.add_column(name)
    for s in found:
        state = " + ".join(x for x, on in (("dirty", s.dirty), ("provisional", s.provisional)) if on)
        table.add_row(s.table, s.partition, state, "; ".join(s.reasons), str(s.since)[:19])
    return table
