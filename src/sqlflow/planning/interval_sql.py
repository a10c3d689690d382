"""Constant intervals in time arithmetic, emitted as one single-unit literal (docs/semantics.md,
"Interval literals").

Every plan's SQL goes through `normalize_intervals`: in `t ± <constant interval>`, an interval
that is not already one literal (`INTERVAL 3 MINUTES 30 SECONDS`, `make_interval(...)`,
`INTERVAL 1 MINUTE + INTERVAL 30 SECONDS` in parentheses, `-INTERVAL ...`) becomes the one
literal of the same length, in microseconds read exactly (`sqlflow.analysis.passes.timecols`), spelled
in the coarsest unit that is exact. So the SQL Spark runs means the bound the plan records, and
Spark's stream-stream join finds its state bound in the condition (it reads a literal, not a
sum of literals or a function call; a stateful outer join with `t + (INTERVAL 3 MINUTES +
INTERVAL 30 SECONDS)` is refused by Spark for want of "an appropriate range condition").

    >>> from sqlflow.dialect import parse
    >>> sql = lambda s: normalize_intervals(parse("SELECT " + s)).sql("spark")
    >>> sql("t - INTERVAL 3 MINUTES 30 SECONDS"), sql("t + make_interval(0, 0, 0, 0, 0, 0, 1.5)")
    ("SELECT t - INTERVAL '210' SECOND", "SELECT t + INTERVAL '1500' MILLISECOND")
    >>> sql("t + -INTERVAL 1 DAY"), sql("t + INTERVAL 20 MINUTES")
    ("SELECT t + INTERVAL '-1' DAY", "SELECT t + INTERVAL '20' MINUTES")
    >>> sql("INTERVAL 1 MINUTE 1 SECOND")
    "SELECT (INTERVAL '1' MINUTE + INTERVAL '1' SECOND)"

An interval that is only a value (selected, compared with another interval) keeps its spelling:
its type (`INTERVAL MINUTE TO SECOND`) is the analyst's.
"""

from __future__ import annotations

from sqlglot import exp

from sqlflow.analysis.passes.timecols import IntervalError, interval_us

_UNITS = (("DAY", 86_400_000_000), ("HOUR", 3_600_000_000), ("MINUTE", 60_000_000),
          ("SECOND", 1_000_000), ("MILLISECOND", 1_000), ("MICROSECOND", 1))


def normalize_intervals(tree: exp.Expr) -> exp.Expr:
    """A copy of `tree` whose constant intervals added to or subtracted from a time are single
    literals (the tree itself is not changed)."""
    return tree.transform(_normalize)


def interval_literal(us: int) -> exp.Interval:
    """`INTERVAL 'n' UNIT`, the coarsest unit in which `us` is whole."""
    unit, size = next((u, s) for u, s in _UNITS if us % s == 0) if us else ("SECOND", 1)
    return exp.Interval(this=exp.Literal.string(str(us // size)), unit=exp.var(unit))


def _normalize(node: exp.Expr) -> exp.Expr:
    if not isinstance(node, (exp.Add, exp.Sub)):
        return node
    this, other = _constant(node.this), _constant(node.expression)
    if (this is None) == (other is None):
        return node  # time ± time, or interval ± interval: a value, not a shift
    side, us = ("this", this) if this is not None else ("expression", other)
    if _single_literal(node.args[side]):
        return node
    assert us is not None  # exactly one side is a constant
    node.set(side, interval_literal(us))
    return node


def _constant(node: exp.Expr | None) -> int | None:
    try:
        return interval_us(node)
    except IntervalError:
        return None  # months or years: not a fixed length, left as written


def _single_literal(node: exp.Expr) -> bool:
    return isinstance(node, exp.Interval) and isinstance(node.this, exp.Literal)
