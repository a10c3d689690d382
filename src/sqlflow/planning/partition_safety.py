"""Partition columns whose every value is a directory by construction (docs/semantics.md,
"Partition values").

A model's output row whose partition value no directory can hold (a NUL character, a
`column=value` name over 255 bytes once escaped, the literal `__HIVE_DEFAULT_PARTITION__`)
goes to its quarantine (`sqlflow.runtime.sink_partitions`). Checking a STRING partition
column costs a pass over the model's rows before the write: they are cached, then counted,
then written. A column the model's top-level SELECT computes as `date_format(<time>, '<fixed
pattern>')` cannot hold such a value: the pattern has no quoted text, so every character of
the value comes from a pattern letter (digits, a month or day name, AM/PM) or from the
pattern's own separators, and its length is bounded by the pattern's. Such a column needs no
check; a NULL (`date_format` of NULL) is written as Spark writes every NULL partition value.

    >>> from sqlglot import parse_one
    >>> q = parse_one("SELECT date_format(c.ts, 'yyyy-MM-dd') AS dt, date_format(ts, 'HH') AS hour, "
    ...               "tag AS product, date_format(ts, 'yyyy''h''') AS odd FROM t AS c", read="spark")
    >>> safe_partitions(q, ("dt", "hour", "product", "odd"))
    ('dt', 'hour')
"""

from __future__ import annotations

import re

from sqlglot import exp

from sqlflow.planning.plan import spark_sql

# pattern letters whose text is at most 9 characters ("September", "Wednesday", a 9-digit
# fraction), and separators; no quote (quoted text is arbitrary), no zone letters (a zone id
# can be long)
_PATTERN = re.compile(r"[yMdHhmsSaEDuQL\-_:. /,]{1,24}")
_MAX_LETTER, _MAX_ESCAPED = 9, 3  # bytes of one pattern letter's text; of one escaped character
MAX_NAME_BYTES = 255  # one directory name `column=value` (runtime.delta.partition_path)


def safe_partitions(select: exp.Expr, partition_by: tuple[str, ...]) -> tuple[str, ...]:
    """The columns of `partition_by` that `select` (the model's top-level query) computes as a
    `date_format` of a fixed pattern whose longest value still makes a directory name."""
    if not isinstance(select, exp.Select):
        return ()
    items = {e.alias_or_name.lower(): e for e in select.expressions}
    return tuple(c for c in partition_by if _fixed_date_text(items.get(c.lower()), c))


def _fixed_date_text(item: exp.Expr | None, column: str) -> bool:
    node = item.this if isinstance(item, exp.Alias) else item
    if not isinstance(node, exp.TimeToStr) or not isinstance(node.args.get("format"), exp.Literal):
        return False
    text = spark_sql(exp.TimeToStr(this=exp.column("x"), format=node.args["format"]))
    found = re.fullmatch(r"DATE_FORMAT\(x, '(.*)'\)", text)
    if found is None or not _PATTERN.fullmatch(found.group(1)):
        return False
    pattern = found.group(1)
    longest = sum(_MAX_LETTER if ch.isalpha() else _MAX_ESCAPED for ch in pattern)
    return _MAX_ESCAPED * len(column.encode()) + 1 + longest <= MAX_NAME_BYTES
