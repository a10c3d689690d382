"""What `sqlflow audit` (and `sqlflow demo`, which ends with an audit) prints: one row per
audited output table (a model's sink, each routed target, the quarantine) with its rows on both
sides, and the differing partitions on their own (docs/semantics.md, "Auditing a live stream").

Pure formatting of the audit's reports (`sqlflow.workflows.audit.AuditReport`, passed as they
are: the report never imports the workflows); nothing here touches Spark.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich import box
from rich.markup import escape
from rich.table import Table


def outputs_table(reports: Sequence[Any], *, title: str) -> Table:
    """One row per output table of each audited model: partitions compared, rows of the batch
    plan and of the live table, missing and extra rows, and `equal` / `DIFFERS` / `not audited`."""
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD)
    for name in ("model", "table", "partitions", "batch rows", "stream rows", "missing", "extra", ""):
        table.add_column(name, justify="left" if name in ("model", "table", "") else "right")
    for report in reports:
        if report.skipped:
            table.add_row(escape(report.model), "", "", "", "", "", "", "[yellow]not audited[/yellow]")
            continue
        names = list(dict.fromkeys(p.table for p in report.partitions)) or ["(no closed partition)"]
        for name in names:
            parts = [p for p in report.partitions if p.table == name]
            repaired = {f"{p.table}: {p.partition}" for p in parts} & set(report.repaired)
            bad = any(not p.ok for p in parts) or report.problems
            status = "[red]DIFFERS[/red]" if bad else "[green]equal[/green]"
            if repaired:
                status += f" ({len(repaired)} repaired)"
            table.add_row(escape(report.model), escape(name), f"{len(parts):,}",
                          f"{sum(p.batch_rows for p in parts):,}", f"{sum(p.stream_rows for p in parts):,}",
                          f"{sum(p.missing for p in parts):,}", f"{sum(p.extra for p in parts):,}", status)
    return table


def differences_table(report: Any) -> Table | None:
    """The partitions of one model that differ (or were repaired), None when there are none."""
    rows = sorted((p for p in report.partitions
                   if not p.ok or f"{p.table}: {p.partition}" in report.repaired),
                  key=lambda p: (p.table, p.partition))
    if not rows:
        return None
    table = Table(title=f"{report.model}: differing partitions", title_justify="left",
                  box=box.SIMPLE_HEAD)
    for name in ("table", "partition", "batch rows", "stream rows", "missing", "extra"):
        table.add_column(name, justify="left" if name in ("table", "partition") else "right")
    for p in rows:
        fixed = f"{p.table}: {p.partition}" in report.repaired
        table.add_row(escape(p.table), escape(p.partition) + (" (repaired)" if fixed else ""),
                      f"{p.batch_rows:,}", f"{p.stream_rows:,}", f"{p.missing:,}", f"{p.extra:,}",
                      style=None if p.ok else "red")
    return table


def inputs_line(report: Any) -> str:
    """`stg_ad_clicks: input ods.ods_ad_clicks@v3; closed before 2026-11-02`."""
    inputs = ", ".join(f"{r}@v{v}" for r, v in report.pinned.items())
    closed = f"closed before {report.closed_before}" if report.closed_before else "every partition"
    return f"{report.model}: input {inputs}; {closed}"
