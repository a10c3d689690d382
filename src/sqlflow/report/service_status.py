"""What `sqlflow status` prints of the stream service's state (`sqlflow.workflows.status`):
a table, or the JSON document as it is."""

from __future__ import annotations

import json
from typing import Any

from rich import box
from rich.table import Table


def status_json(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, sort_keys=True)


def status_table(doc: dict[str, Any]) -> Table:
    service = doc["service"]
    title = (f"Stream service: running (pid {service['pid']}, heartbeat {service['updated_at']})"
             if service["running"] else "Stream service: not running")
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD)
    for name in ("model", "state", "restarts", "last batch", "at (UTC)", "lag s", "in 1h",
                 "out 1h", "quarantined 1h", "dirty", "provisional", "last error"):
        table.add_column(name, no_wrap=name != "last error")
    for m in doc["models"]:
        state = f"[bold red]{m['state']}[/]" if m["state"] == "failed" else m["state"]
        table.add_row(m["name"], state, str(m["restarts"]),
                      "-" if m["last_batch_id"] is None else str(m["last_batch_id"]),
                      m["last_batch_at"] or "-",
                      "-" if m["lag_seconds"] is None else f"{m['lag_seconds']:.0f}",
                      f"{m['rows_in_1h']:,}", f"{m['rows_out_1h']:,}", f"{m['quarantined_1h']:,}",
                      str(len(m["dirty_partitions"])), str(len(m.get("provisional_partitions", []))),
                      m["last_error"] or "")
    return table
