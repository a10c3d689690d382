"""The commit log's open partitions from its files, without a JVM (`sqlflow status`).

The same rules as `sqlflow.runtime.delta.commitlog` (`read`, `open_partitions`), over the rows
`logfiles.read_rows` returns: a table's rows up to its latest `refresh` row are history; a
partition is settled at its latest `repair` row or non-provisional batch/dbt `write`, and after
that a `dirty` row makes it dirty and a provisional `write` makes it provisional.
`tests/runtime/test_commitlog.py` checks both readers against one log.

>>> from datetime import datetime as t
>>> rows = [dict(table="dw.a", partition="dt=1", kind="write", mode="stream", provisional=True,
...              reason=None, committed_at=t(2026, 1, 1, 1)),
...         dict(table="dw.a", partition="dt=2", kind="dirty", mode="stream", provisional=False,
...              reason="late row", committed_at=t(2026, 1, 1, 2)),
...         dict(table="dw.a", partition="dt=2", kind="repair", mode="batch", provisional=False,
...              reason=None, committed_at=t(2026, 1, 1, 3))]
>>> [(p["partition"], p["dirty"], p["provisional"], p["reasons"]) for p in open_partitions(rows)]
[('dt=1', False, True, ['write'])]
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def counting(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows that count: each table's rows after its latest `refresh` row."""
    rows = list(rows)
    refreshed: dict[str, Any] = {}
    for r in rows:
        if r["kind"] == "refresh":
            at = refreshed.get(r["table"])
            refreshed[r["table"]] = r["committed_at"] if at is None else max(at, r["committed_at"])
    return [r for r in rows if r["table"] not in refreshed or r["committed_at"] > refreshed[r["table"]]]


def ready_partitions(rows: Iterable[dict[str, Any]], tables: Iterable[str]) -> dict[str, set[str]]:
    """READY of each of `tables` (keys lower-cased): its partitions with a `commit` row that
    counts. `rows` need `table`, `partition`, `kind` and `committed_at`; rows of other kinds
    than `commit` and `refresh` may be left out (they decide nothing here).

    >>> from datetime import datetime as t
    >>> rows = [dict(table="dim.a", partition="dt=1", kind="commit", committed_at=t(2026, 1, 1)),
    ...         dict(table="dim.b", partition="dt=1", kind="commit", committed_at=t(2026, 1, 1)),
    ...         dict(table="dim.b", partition="", kind="refresh", committed_at=t(2026, 1, 2))]
    >>> ready_partitions(rows, ["DIM.A", "dim.b"])
    {'dim.a': {'dt=1'}, 'dim.b': set()}
    """
    found: dict[str, set[str]] = {t.lower(): set() for t in tables}
    for r in counting(rows):
        if r["kind"] == "commit" and r["table"] in found:
            found[r["table"]].add(r["partition"])
    return found


def open_partitions(rows: Iterable[dict[str, Any]], tables: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """Dirty or provisional partitions not settled since, as `{table, partition, dirty,
    provisional, reasons, since}`, ordered by table and partition (`tables`: only these)."""
    wanted = None if tables is None else {t.lower() for t in tables}
    log = [r for r in counting(rows) if wanted is None or r["table"] in wanted]
    settled: dict[tuple[str, str], Any] = {}
    for r in log:
        if r["kind"] == "repair" or (r["kind"] == "write" and r["mode"] in ("batch", "dbt")
                                     and not r["provisional"]):
            key = (r["table"], r["partition"])
            settled[key] = max(settled.get(key, r["committed_at"]), r["committed_at"])
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for r in log:
        provisional = r["kind"] == "write" and bool(r["provisional"])
        key = (r["table"], r["partition"])
        if not (r["kind"] == "dirty" or provisional):
            continue
        if key in settled and not r["committed_at"] > settled[key]:
            continue
        p = found.setdefault(key, {"table": key[0], "partition": key[1], "dirty": False,
                                   "provisional": False, "reasons": set(), "since": r["committed_at"]})
        p["dirty"] |= r["kind"] == "dirty"
        p["provisional"] |= provisional
        p["reasons"].add(r["reason"] if r["reason"] is not None else r["kind"])
        p["since"] = min(p["since"], r["committed_at"])
    return [{**p, "reasons": sorted(p["reasons"])} for _, p in sorted(found.items())]
