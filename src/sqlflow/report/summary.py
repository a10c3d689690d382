"""The run summary `sqlflow run` prints: per model, what was written and what was quarantined;
a stream run's progress lines and summary; a routed group's file budgets.

Pure formatting of the runtime's results (`sqlflow.runtime.results`); nothing here touches
Spark, and nothing in the runtime prints.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from rich import box
from rich.console import JustifyMethod
from rich.table import Table

from sqlflow.runtime.quarantine import REASONS
from sqlflow.runtime.results import DateRange, RunResult, StreamRow

_REASON_LABELS = {"late": "late", "future": "future", "null_event_time": "null time",
                  "malformed": "malformed", "dim_missing": "dim missing",
                  "null_partition": "null partition", "bad_partition": "bad partition",
                  "oversized": "oversized", "bad_json": "bad json", "wrong_type": "wrong type"}


def progress_line(result: RunResult) -> str:
    """One line as a model finishes, e.g.
    `samples: overwrite range, 1,204 rows into 3 partitions (dt 2026-11-01 .. 2026-11-03),
    17 quarantined (4.2s)`."""
    parts = [f"{result.model}: {_write_label(result)}"]
    if result.sink.write != "view":
        n = len(result.sink.partitions)
        span = f" ({_partition_span(result)})" if n else ""
        parts.append(f"{result.sink.rows:,} rows into {n} partition{'s' * (n != 1)}{span}")
    if result.quarantine is not None:
        parts.append(f"{sum(q.rows for q in result.quarantined):,} quarantined")
    return ", ".join(parts) + f" ({result.seconds:.1f}s)"


def summary_table(results: Sequence[RunResult], dates: DateRange | None = None,
                  not_run: Sequence[str] = ()) -> Table:
    """One row per model: rows and partitions written, quarantined rows by reason (`-` for a
    model without event inputs), seconds. The kind of write is in `progress_line`."""
    span = f" for {dates.start} .. {dates.end}" if dates else ""
    caption = f"{sum(r.seconds for r in results):.1f}s in all"
    if not_run:
        caption += f"; not run: {', '.join(not_run)}"
    table = Table(title=f"Batch run{span}", title_justify="left", caption=caption,
                  caption_justify="left", box=box.SIMPLE_HEAD)
    table.add_column("model", no_wrap=True)
    table.add_column("rows", justify="right")
    table.add_column("partitions", justify="right")
    table.add_column("quarantined")
    table.add_column("seconds", justify="right")
    for r in results:
        written = r.sink.write != "view"
        table.add_row(r.model, f"{r.sink.rows:,}" if written else "view",
                      f"{len(r.sink.partitions):,}" if written else "-",
                      _quarantine_label(r), f"{r.seconds:.1f}")
    return table


def _quarantine_label(result: RunResult) -> str:
    """`1 late, 2 future, 1 null time` (reasons with rows), `0`, or `-` without event inputs."""
    if result.quarantine is None:
        return "-"
    counts = result.quarantined_by_reason()
    found = [f"{counts[k]:,} {_REASON_LABELS[k]}" for k in REASONS if counts[k]]
    return ", ".join(found) or "0"


def _write_label(result: RunResult) -> str:
    sink = result.sink
    if sink.write == "overwrite_partitions":
        return "overwrite range" if result.dates else "overwrite partitions"
    if sink.skipped:
        return "skipped (batch already written)"
    return {"replace": "replace table", "view": "view"}.get(sink.write, sink.write)


def _partition_span(result: RunResult) -> str:
    """`dt 2026-11-01 .. 2026-11-03`: the values of the first partition column written."""
    parts = result.sink.partitions
    name = parts[0].values[0][0]
    firsts = sorted({str(p.values[0][1]) for p in parts})
    return f"{name} {firsts[0]}" if len(firsts) == 1 else f"{name} {firsts[0]} .. {firsts[-1]}"


def dims_table(results: Sequence[RunResult]) -> Table | None:
    """Per model, output partition and dimension: rows per chosen dimension partition (p*),
    the deepest fallback in days and the rows quarantined as `dim_missing` (docs/design.md §2.3).
    None when no model joined a dimension."""
    uses = [(r.model, u) for r in results for u in r.dims]
    if not uses:
        return None
    table = Table(title="Dimension partitions used", title_justify="left", box=box.SIMPLE_HEAD)
    for name, justify in (("model", "left"), ("partition", "left"), ("dimension", "left"),
                          ("rows by chosen partition", "left"), ("fallback days", "right"),
                          ("dim missing", "right")):
        table.add_column(name, justify=cast(JustifyMethod, justify), no_wrap=name == "model")
    for model, u in uses:
        chosen = ", ".join(f"{p or 'none'}: {n:,}" for p, n in sorted(u.rows.items(), key=str)) or "-"
        table.add_row(model, u.partition, u.dim, chosen, str(u.fallback_days), f"{u.dim_missing:,}")
    return table


def event_line(event: Any) -> str:
    """One progress line of a stream run: a `--full-refresh` removal, a micro-batch report
    (`.line()`), or a batch plan's `RunResult`."""
    if isinstance(event, RunResult):
        return progress_line(event)
    removed = getattr(event, "removed", None)
    if removed is not None:
        return f"{event.model}: full refresh, removed " + (", ".join(removed) or "nothing")
    return str(event.line())


def stream_table(rows: Sequence[StreamRow], trigger: str | None) -> Table:
    """One row per model: kind, micro-batches, rows written, rows quarantined, seconds, and
    the output partitions found dirty (`sqlflow repair` rewrites them); for the stream
    service, also how each model's region ended and its restarts."""
    table = Table(title=f"Stream run ({trigger or 'configured triggers'})", title_justify="left",
                  box=box.SIMPLE_HEAD)
    service = any(r.state for r in rows)
    columns = [("model", "left"), ("plan", "left"), ("batches", "right"), ("rows", "right"),
               ("quarantined", "right"), ("seconds", "right"), ("dirty", "right")]
    if service:
        columns += [("state", "left"), ("restarts", "right")]
    for name, justify in columns:
        table.add_column(name, justify=cast(JustifyMethod, justify), no_wrap=name == "model")
    for r in rows:
        cells = [r.model, r.kind, str(r.batches) if r.kind == "stream" else "-", f"{r.rows:,}",
                 f"{r.quarantined:,}", f"{r.seconds:.1f}",
                 f"[bold red]{r.dirty}[/]" if r.dirty else "0"]
        if service:
            cells += [f"[bold red]{r.state}[/]" if r.state == "failed" else r.state or "-",
                      str(r.restarts)]
        table.add_row(*cells)
    return table


def files_table(reports: Sequence[Any]) -> Table:
    """The run summary of file budgets: per target, partitions written, files, budget, bytes
    per file."""
    table = Table(title="Routed writes (file budget)", title_justify="left", box=box.SIMPLE_HEAD)
    for name in ("group", "target", "partitions", "files", "budget", "max files/partition",
                 "bytes/file"):
        table.add_column(name, justify="left" if name in ("group", "target") else "right")
    for r in reports:
        per: dict[str, list[Any]] = {}
        for t in r.targets:
            per.setdefault(t.model, []).extend(t.partitions)
        for model, parts in per.items():
            files = sum(p.files for p in parts)
            table.add_row(r.group, model, str(len(parts)), str(files), str(sum(p.budget for p in parts)),
                          str(max((p.files for p in parts), default=0)),
                          f"{sum(p.bytes for p in parts) // files:,}" if files else "-")
    return table
