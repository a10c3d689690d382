"""Time arithmetic: interval literals in microseconds, `col ± interval` terms, and the bound
a set of comparisons puts on `right.t - left.t`.

Every spelling Spark accepts for a fixed-length interval is read exactly (no float):

    >>> from sqlflow.dialect import parse
    >>> us = lambda s: interval_us(parse("SELECT " + s).expressions[0])
    >>> us("INTERVAL 20 MINUTES"), us("INTERVAL '20' MINUTE"), us("interval 1200 seconds")
    (1200000000, 1200000000, 1200000000)
    >>> us("INTERVAL '1 hour 20 minutes'"), us("INTERVAL '0 00:00:01.5' DAY TO SECOND")
    (4800000000, 1500000)
    >>> us("- INTERVAL 250 MICROSECONDS"), us("INTERVAL 1 HOUR + INTERVAL 1 MILLISECOND")
    (-250, 3600001000)

Months and years have no fixed length, so they cannot bound a join:

    >>> try:
    ...     us("INTERVAL 1 MONTH")
    ... except IntervalError as err:
    ...     print(err)
    `INTERVAL '1' MONTH` has no fixed length (months and years vary); use days, hours, minutes or seconds
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from sqlglot import exp

from sqlflow.analysis.ir import IntervalBound
from sqlflow.dialect import DIALECT

UNIT_US = {
    "MICROSECOND": 1,
    "MILLISECOND": 1_000,
    "SECOND": 1_000_000,
    "MINUTE": 60_000_000,
    "HOUR": 3_600_000_000,
    "DAY": 86_400_000_000,
    "WEEK": 7 * 86_400_000_000,
}
_UNIT_ALIASES = {"US": "MICROSECOND", "MS": "MILLISECOND", "SEC": "SECOND", "MIN": "MINUTE"}
_CALENDAR_UNITS = {"MONTH", "YEAR", "QUARTER", "DECADE", "CENTURY"}
_SPAN_ORDER = ["DAY", "HOUR", "MINUTE", "SECOND"]
_PAIR = re.compile(r"\s*([+-]?\d+(?:\.\d+)?)\s*([A-Za-z]+)\s*")


class IntervalError(ValueError):
    """An interval that is constant but cannot be expressed in microseconds."""


def unit_us(unit: str, *, spelled: str = "") -> int:
    """Microseconds in one `unit` (`MINUTES`, `minute`, `ms` ...)."""
    name = unit.upper()
    name = _UNIT_ALIASES.get(name, name)
    if name not in UNIT_US and name.endswith("S"):
        name = name[:-1]
    if name in _CALENDAR_UNITS:
        raise IntervalError(
            f"`{spelled or unit}` has no fixed length (months and years vary); "
            "use days, hours, minutes or seconds"
        )
    if name not in UNIT_US:
        raise IntervalError(f"unknown interval unit `{unit}`")
    return UNIT_US[name]


def _exact(value: Decimal, spelled: str) -> int:
    if value != value.to_integral_value():
        raise IntervalError(f"`{spelled}` is not a whole number of microseconds")
    return int(value)


def _decimal(text: str, spelled: str) -> Decimal:
    try:
        return Decimal(text.strip())
    except InvalidOperation:
        raise IntervalError(f"`{spelled}` is not a number of units") from None


def _span_us(text: str, first: str, last: str, spelled: str) -> int:
    """`'1 02:03:04.5' DAY TO SECOND` and friends: fields from `first` to `last`."""
    units = _SPAN_ORDER[_SPAN_ORDER.index(first) : _SPAN_ORDER.index(last) + 1]
    text = text.strip()
    sign = -1 if text.startswith("-") else 1
    fields = re.split(r"[ :]", text.lstrip("+-"))
    if len(fields) != len(units):
        raise IntervalError(f"`{spelled}` does not match {first} TO {last}")
    total = sum((_decimal(f, spelled) * UNIT_US[u] for f, u in zip(fields, units, strict=True)), Decimal(0))
    return sign * _exact(total, spelled)


def _literal_us(node: exp.Interval) -> int | None:
    value, unit = node.this, node.args.get("unit")
    if not isinstance(value, exp.Literal):
        return None
    spelled = node.sql(dialect=DIALECT)
    text = value.name
    if isinstance(unit, exp.IntervalSpan):
        first, last = unit.this.name.upper(), unit.expression.name.upper()
        if first in _CALENDAR_UNITS or last in _CALENDAR_UNITS:
            raise IntervalError(f"`{spelled}` has no fixed length (months and years vary)")
        return _span_us(text, _UNIT_ALIASES.get(first, first), last, spelled)
    if unit is not None:
        return _exact(_decimal(text, spelled) * unit_us(unit.name, spelled=spelled), spelled)
    pairs = _PAIR.findall(text)
    if not pairs or _PAIR.sub("", text).strip():
        raise IntervalError(f"cannot read `{spelled}` as an interval")
    total = sum((_decimal(n, spelled) * unit_us(u, spelled=spelled) for n, u in pairs), Decimal(0))
    return _exact(total, spelled)


def _int_literal(node: exp.Expr) -> int | None:
    if isinstance(node, exp.Neg):
        inner = _int_literal(node.this)
        return -inner if inner is not None else None
    if isinstance(node, exp.Paren):
        return _int_literal(node.this)
    if isinstance(node, exp.Literal) and re.fullmatch(r"[+-]?\d+", node.name):
        return int(node.name)
    return None


def interval_us(node: exp.Expr | None) -> int | None:
    """A constant interval expression in microseconds; None when `node` is not one."""
    if isinstance(node, exp.Paren):
        return interval_us(node.this)
    if isinstance(node, exp.Neg):
        inner = interval_us(node.this)
        return -inner if inner is not None else None
    if isinstance(node, (exp.Add, exp.Sub)):
        a, b = interval_us(node.this), interval_us(node.expression)
        if a is None or b is None:
            return None
        return a + b if isinstance(node, exp.Add) else a - b
    if isinstance(node, exp.Interval):
        return _literal_us(node)
    if isinstance(node, exp.MakeInterval):
        return _make_interval_us(node)
    if isinstance(node, exp.Anonymous) and node.name.lower() == "make_dt_interval":
        units = ["DAY", "HOUR", "MINUTE", "SECOND"]
        parts = [(_number_literal(a) if u == "SECOND" else _int_literal(a), u)
                 for a, u in zip(node.expressions, units, strict=False)]
        if any(v is None for v, _ in parts):
            return None
        total = sum((Decimal(v) * UNIT_US[u] for v, u in parts), Decimal(0))  # type: ignore[arg-type]
        return _exact(total, node.sql(dialect=DIALECT))
    return None


def _number_literal(node: exp.Expr) -> Decimal | None:
    """A constant number, signed and fractional (`30.5`, `-2`), exactly; None otherwise."""
    if isinstance(node, exp.Neg):
        inner = _number_literal(node.this)
        return -inner if inner is not None else None
    if isinstance(node, exp.Paren):
        return _number_literal(node.this)
    if isinstance(node, exp.Literal) and re.fullmatch(r"[+-]?(\d+(\.\d*)?|\.\d+)", node.name):
        return Decimal(node.name)
    return None


def _make_interval_us(node: exp.MakeInterval) -> int | None:
    """`make_interval(years, months, weeks, days, hours, mins, secs)`: secs may have a fraction
    (Spark reads it as a decimal to the microsecond), the other fields are whole numbers."""
    spelled = node.sql(dialect=DIALECT)
    total = Decimal(0)
    for key, value in node.args.items():
        if value is None:
            continue
        n = _number_literal(value) if key == "second" else _int_literal(value)
        if n is None:
            return None
        if key in ("year", "month"):
            if n:
                raise IntervalError("`make_interval` with months or years has no fixed length")
            continue
        total += n * UNIT_US[key.upper()]
    return _exact(total, spelled)


@dataclass(frozen=True)
class TimeTerm:
    """`alias.column + offset_us`: one side of a time comparison."""

    alias: str
    column: str
    offset_us: int = 0


Resolver = Callable[[exp.Column], "tuple[str, str] | None"]


def time_term(node: exp.Expr | None, resolve: Resolver) -> TimeTerm | None:
    """Read `node` as `alias.column ± constant interval`, or None.

        >>> from sqlflow.dialect import parse
        >>> r = lambda c: (c.table, c.name)
        >>> t = lambda s: time_term(parse("SELECT " + s).expressions[0], r)
        >>> t("i.ts + INTERVAL 20 MINUTES"), t("timestampadd(SECOND, -5, i.ts)").offset_us
        (TimeTerm(alias='i', column='ts', offset_us=1200000000), -5000000)
    """
    if isinstance(node, exp.Paren):
        return time_term(node.this, resolve)
    if isinstance(node, exp.Column):
        found = resolve(node)
        return TimeTerm(*found) if found else None
    if isinstance(node, (exp.Cast, exp.TryCast)) and node.to.is_type(*exp.DataType.TEMPORAL_TYPES):
        return time_term(node.this, resolve) if not node.to.is_type("date") else None
    if isinstance(node, (exp.Add, exp.Sub)):
        return _shifted(node, resolve)
    if isinstance(node, exp.TimestampAdd):
        n, unit = _int_literal(node.expression), node.args.get("unit")
        base = time_term(node.this, resolve)
        if base is None or n is None or unit is None:
            return None
        return TimeTerm(base.alias, base.column, base.offset_us + n * unit_us(unit.name))
    return None


def _shifted(node: exp.Add | exp.Sub, resolve: Resolver) -> TimeTerm | None:
    sign = 1 if isinstance(node, exp.Add) else -1
    shift = interval_us(node.expression)
    base = time_term(node.this, resolve) if shift is not None else None
    if base is None and sign == 1:
        shift, base = interval_us(node.this), time_term(node.expression, resolve)
        if shift is None:
            return None
    if base is None or shift is None:
        return None
    return TimeTerm(base.alias, base.column, base.offset_us + sign * shift)


@dataclass(frozen=True)
class TimeCmp:
    """`a op b` between two time terms, op one of `>=`, `>`, `<=`, `<`, `=`."""

    a: TimeTerm
    op: str
    b: TimeTerm
    node: exp.Expr


_OPS: dict[type[exp.Expr], str] = {exp.GTE: ">=", exp.GT: ">", exp.LTE: "<=", exp.LT: "<", exp.EQ: "="}
_FLIP = {">=": "<=", ">": "<", "<=": ">=", "<": ">", "=": "="}


def time_comparisons(pred: exp.Expr, resolve: Resolver) -> list[TimeCmp]:
    """The time comparisons one conjunct makes (a BETWEEN is two)."""
    if isinstance(pred, exp.Paren):
        return time_comparisons(pred.this, resolve)
    if isinstance(pred, exp.Between) and not pred.args.get("symmetric"):
        x = time_term(pred.this, resolve)
        lo, hi = time_term(pred.args.get("low"), resolve), time_term(pred.args.get("high"), resolve)
        out = []
        if x and lo:
            out.append(TimeCmp(x, ">=", lo, pred))
        if x and hi:
            out.append(TimeCmp(x, "<=", hi, pred))
        return out
    op = _OPS.get(type(pred))
    if op is None:
        return []
    a, b = time_term(pred.this, resolve), time_term(pred.expression, resolve)
    return [TimeCmp(a, op, b, pred)] if a and b else []


@dataclass(frozen=True)
class DeltaBound:
    """One comparison rewritten as a bound on `right.right_time - left.left_time`."""

    left_time: str
    right_time: str
    op: str  # >=, >, <=, <, =
    value_us: int


def orient(cmp: TimeCmp, left: str, right: str) -> DeltaBound | None:
    """Rewrite `cmp` as `right.t - left.t op value` when it relates exactly those aliases.

        >>> a, b = TimeTerm("c", "click_ts"), TimeTerm("i", "imp_ts", -300)
        >>> orient(TimeCmp(a, ">", b, None), "i", "c")
        DeltaBound(left_time='imp_ts', right_time='click_ts', op='>', value_us=-300)
        >>> orient(TimeCmp(b, ">", a, None), "i", "c")
        DeltaBound(left_time='imp_ts', right_time='click_ts', op='<', value_us=-300)
    """
    a, b = cmp.a, cmp.b
    if a.alias == right and b.alias == left:
        return DeltaBound(b.column, a.column, cmp.op, b.offset_us - a.offset_us)
    if a.alias == left and b.alias == right:
        return DeltaBound(a.column, b.column, _FLIP[cmp.op], a.offset_us - b.offset_us)
    return None


def combine(bounds: list[DeltaBound], left_time: str, right_time: str) -> IntervalBound:
    """The tightest bound all `bounds` on (left_time, right_time) give together.

        >>> bs = [DeltaBound("t", "t", ">=", -5), DeltaBound("t", "t", ">", -5),
        ...       DeltaBound("t", "t", "<=", 10), DeltaBound("t", "t", "<=", 20)]
        >>> combine(bs, "t", "t")
        IntervalBound(left_time='t', right_time='t', lower_us=-5, upper_us=10, lower_inclusive=False, upper_inclusive=True)
    """
    lower: tuple[int, bool] | None = None  # (value, inclusive)
    upper: tuple[int, bool] | None = None
    for b in bounds:
        if (b.left_time.lower(), b.right_time.lower()) != (left_time.lower(), right_time.lower()):
            continue
        if b.op in (">=", ">", "="):
            cand = (b.value_us, b.op != ">")
            if lower is None or (cand[0], not cand[1]) > (lower[0], not lower[1]):
                lower = cand
        if b.op in ("<=", "<", "="):
            cand = (b.value_us, b.op != "<")
            if upper is None or (cand[0], cand[1]) < (upper[0], upper[1]):
                upper = cand
    return IntervalBound(
        left_time,
        right_time,
        lower[0] if lower else None,
        upper[0] if upper else None,
        lower[1] if lower else True,
        upper[1] if upper else True,
    )
