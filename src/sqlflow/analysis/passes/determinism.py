"""Calls whose value depends on when, where or in which order a row is processed.

A stream and its backfill evaluate them at different times, on different files and in a
different row order, so they would give different rows (docs/design.md §2.8):

    >>> from sqlflow.dialect import parse
    >>> from sqlflow.analysis.passes.positions import Positions
    >>> sql = "SELECT rand() AS r, now(), current_date, first(x), sort_array(collect_list(y)) FROM t"
    >>> [(c.name, c.category) for c in nondeterministic_calls(parse(sql), Positions(sql, "m.sql"))]
    [('rand', 'random'), ('now', 'clock'), ('current_date', 'clock'), ('first', 'order')]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from sqlglot import exp

from sqlflow.analysis.ir import CallIR
from sqlflow.analysis.passes.positions import Positions

_BY_TYPE: dict[type, str] = {
    exp.Rand: "random",
    exp.Randn: "random",
    exp.Uuid: "random",
    exp.Shuffle: "random",
    exp.TableSample: "random",
    exp.CurrentTimestamp: "clock",
    exp.CurrentDate: "clock",
    exp.CurrentTime: "clock",
    exp.CurrentDatetime: "clock",
    exp.Localtimestamp: "clock",
    exp.First: "order",
    exp.Last: "order",
    exp.AnyValue: "order",
    exp.ArrayAgg: "order",
    exp.ArrayUniqueAgg: "order",
}
_BY_NAME = {
    "now": "clock", "current_timestamp": "clock", "current_date": "clock", "localtimestamp": "clock",
    "curdate": "clock", "uniform": "random", "randstr": "random", "random": "random",
    "input_file_name": "origin", "input_file_block_start": "origin", "input_file_block_length": "origin",
    "monotonically_increasing_id": "row_id", "spark_partition_id": "row_id",
}
# Bare `current_date` parses as a function; bare `localtimestamp` parses as a column.
_BARE_COLUMNS = {"localtimestamp", "current_timestamp", "current_date"}


def _category(node: exp.Expr) -> str | None:
    if isinstance(node, exp.Anonymous):
        return _BY_NAME.get(node.name.lower())
    if isinstance(node, exp.Column):
        bare = not node.table and not node.this.args.get("quoted")
        return "clock" if bare and node.name.lower() in _BARE_COLUMNS else None
    category = _BY_TYPE.get(type(node))
    if category == "order" and isinstance(node.parent, exp.ArraySort):
        return None  # sort_array(collect_list(x)) does not depend on row order
    if category == "order" and node.find_ancestor(exp.Window) is not None:
        return None  # reported as a window function
    return category


def _name(node: exp.Expr, pos: Positions) -> str:
    if isinstance(node, exp.TableSample):
        return "tablesample"
    if isinstance(node, exp.Column):
        return node.name.lower()
    carrier = node if "start" in node.meta else node.parent  # unix_timestamp() -> StrToUnix(now)
    if carrier is not None and "start" in carrier.meta:
        return pos.text(carrier).lower()
    # every other category node is a Func (the _BY_TYPE classes; TableSample is handled above)
    return (node.name if isinstance(node, exp.Anonymous) else cast(exp.Func, node).sql_name()).lower()


def nondeterministic_calls(
    ast: exp.Expr,
    pos: Positions,
    scope_of: Callable[[exp.Expr], tuple[str, bool]] = lambda n: ("the model query", False),
) -> list[CallIR]:
    """Every non-deterministic call in the statement, in source order."""
    out = []
    for node in ast.walk():
        category = _category(node)
        if category is None:
            continue
        name = _name(node, pos)
        label, streaming = scope_of(node)
        out.append(CallIR(name, category, label, streaming, "", pos.of(node)))  # type: ignore[arg-type]
    out.sort(key=lambda c: (c.location.line, c.location.col) if c.location else (0, 0))
    return out


def fix_for(call: CallIR, time_column: str | None) -> str:
    """A concrete replacement for a non-deterministic call."""
    ts = f"`{time_column}`" if time_column else "the row's event time"
    if call.category == "clock":
        day = f"to_date({time_column or 'event_ts'})"
        return f"use the row's event time {ts} instead (e.g. `{day}` for a date)"
    if call.category == "origin":
        return "drop it, or carry the origin in a column of the source (its ingest time or offset)"
    if call.category == "row_id":
        return "derive a stable id from the row, e.g. `xxhash64(<key columns>, <event time>)`"
    if call.category == "order":
        if call.name in ("collect_list", "collect_set", "array_agg"):
            return f"sort the result: `array_sort({call.name}(...))`"
        return f"pick the row by time: `min_by(x, {time_column or '<event time>'})` / `max_by(...)`"
    if call.name == "uuid":
        return "derive the id from the row, e.g. `sha2(concat_ws('|', <key columns>, <event time>), 256)`"
    if call.name == "tablesample":
        return "filter by a hash of the key instead, e.g. `WHERE pmod(xxhash64(<key>), 100) < 10`"
    return "derive it from the row, e.g. `pmod(xxhash64(<key columns>), 100)`"
