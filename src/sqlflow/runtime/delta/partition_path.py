"""Partition values are data, not paths (docs/semantics.md, "Partition values").

A partition of a table is spelled as its Hive path, `dt=2026-11-01/hour=03/event_type=pv`,
everywhere sqlflow writes or reads one: the commit log's `partition`, the file budget's keys,
`_SUCCESS` markers, notifications, compaction's `WHERE`. Each column name and value is escaped
exactly as Spark writes the directory (`ExternalCatalogUtils.escapePathName`, Hive's
`FileUtils.escapePathName`): the characters below become `%XX` (upper-case hex), a NULL or
empty value is `__HIVE_DEFAULT_PARTITION__`. So `a/b=c%d` is the one level `a%2Fb%3Dc%25d`,
`../../tmp/x` cannot climb out of the table's folder, and `parse(spec(v)) == v` for every value.

Spark escapes no NUL character (the directory cannot be made) and a file system refuses a
directory name longer than 255 bytes: `problem` names such values, and the NULL of a level that
needs a value, so the runtime quarantines their rows instead of failing the write. (A value
that is literally `__HIVE_DEFAULT_PARTITION__` is one too: Spark would read it back as NULL.)
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F

DEFAULT = "__HIVE_DEFAULT_PARTITION__"
# Spark 4.2 on Linux, checked by writing a partitioned Delta and parquet table with every ASCII
# character (tests/runtime/test_partition_path.py keeps checking it)
ESCAPED = frozenset([chr(c) for c in range(0x01, 0x20)] + list("\"#%'*/:=?\\\x7f{[]^"))
MAX_NAME_BYTES = 255  # NAME_MAX of the usual file systems: one directory name `col=value`

NULL_PARTITION = "null_partition"  # a NULL (or empty) value where a level needs one
BAD_PARTITION = "bad_partition"  # a value no directory can hold: NUL, or a name over 255 bytes


def escape(text: str) -> str:
    """`a/b=c%d` -> `a%2Fb%3Dc%25d` (Spark's and Hive's escapePathName)."""
    return "".join(f"%{ord(c):02X}" if c in ESCAPED else c for c in text)


def unescape(text: str) -> str:
    """The inverse of `escape`: `%XX` (two hex digits) -> the character; anything else as is."""
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c == "%" and i + 2 < len(text) and _hex(text[i + 1:i + 3]):
            out.append(chr(int(text[i + 1:i + 3], 16)))
            i += 3
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _hex(pair: str) -> bool:
    return len(pair) == 2 and all(c in "0123456789abcdefABCDEF" for c in pair)


def value_text(value: Any) -> str:
    """One level's directory value: escaped, `__HIVE_DEFAULT_PARTITION__` for NULL or empty."""
    if value is None or value == "":
        return DEFAULT
    return escape(str(value))


def spec(values: Mapping[str, Any] | Iterable[tuple[str, Any]]) -> str:
    """`{"dt": date(2026, 11, 1), "tag": "a/b"}` -> `dt=2026-11-01/tag=a%2Fb` (the given order)."""
    items = values.items() if isinstance(values, Mapping) else values
    return "/".join(f"{escape(k)}={value_text(v)}" for k, v in items)


def parse(text: str) -> dict[str, str | None]:
    """`dt=2026-11-01/tag=a%2Fb` -> `{"dt": "2026-11-01", "tag": "a/b"}`; `""` -> `{}`; the
    default partition is None. A level without `=` is a ValueError (not a spec sqlflow wrote)."""
    if not text:
        return {}
    out: dict[str, str | None] = {}
    for part in text.split("/"):
        key, sep, value = part.partition("=")
        if not sep or not key:
            raise ValueError(f"`{text}` is not a partition like dt=2026-11-01/hour=3")
        out[unescape(key)] = None if value == DEFAULT else unescape(value)
    return out


def key(columns: Iterable[str]) -> Column:
    """The `spec` of a row's partition columns as one Spark column (the same text, computed
    by Spark: file budgets group and shape rows by it)."""
    return F.concat_ws("/", *[F.concat(F.lit(escape(c) + "="), _value(c)) for c in columns])


_ANY_ESCAPED = "[" + "".join(f"\\x{ord(c):02X}" for c in sorted(ESCAPED)) + "]"  # a Java regex


def _value(column: str) -> Column:
    text = F.col(f"`{column}`").cast("string")
    # '%' first: the other replacements add '%'s that must stay as they are. One `aggregate`
    # over the characters, not ~50 nested `replace` calls: a Spark Connect client cannot
    # encode an expression nested that deep (docs/deploy.md, "Spark Connect"). `hex` of an
    # ASCII character is its two upper-case digits, as `escape` writes them.
    # The characters come as one JSON literal (Spark folds it to a constant array): an
    # `array(lit, lit, ...)` would cost a py4j round trip per character, per column, per
    # write, thousands in a routed group's micro-batch.
    order = constant(["%", *sorted(ESCAPED - {"%"})], "array<string>")
    escaped = F.aggregate(order, text, lambda acc, c: F.replace(acc, c, F.concat(F.lit("%"), F.hex(c))))
    # one regex test spares the ~50 replacements to the values that need none (nearly all)
    return (F.when(text.isNull() | (text == ""), F.lit(DEFAULT))
            .when(text.rlike(_ANY_ESCAPED), escaped).otherwise(text))


def constant(value: Any, ddl: str) -> Column:
    """`value` (JSON-able: a list or a dict of plain values) as one constant Spark column of
    type `ddl`, built in one expression whatever its size: the optimizer folds the
    `from_json` of a literal into a literal (`{"dt=2026-11-01": 2}` as `map<string,int>`)."""
    return F.from_json(F.lit(json.dumps(value)), ddl)


def problem(columns: Iterable[str], required: Iterable[str] = ()) -> Column:
    """A Spark column: NULL for a row whose partition values can be directories, else the
    quarantine reason (`null_partition` for a NULL or empty value of a `required` level,
    `bad_partition` for a NUL character, a directory name over 255 bytes, or the value
    `__HIVE_DEFAULT_PARTITION__` itself, which Spark reads back as NULL)."""
    need = {c.lower() for c in required}
    # one flat CASE, the levels in order (a level's NULL before its bad value): as shallow
    # for a Spark Connect client as for Spark (docs/deploy.md, "Spark Connect")
    branches: list[tuple[Column, Column]] = []
    for c in columns:
        text = F.col(f"`{c}`").cast("string")
        if c.lower() in need:
            branches.append((text.isNull() | (text == ""), F.lit(NULL_PARTITION)))
        name = F.concat(F.lit(escape(c) + "="), _value(c))
        # the literal default name would be read back as NULL: not the row's value
        bad = text.contains("\x00") | (F.octet_length(name) > MAX_NAME_BYTES) | (text == DEFAULT)
        branches.append((bad, F.lit(BAD_PARTITION)))
    if not branches:
        return F.lit(None).cast("string")
    out = F.when(*branches[0])
    for condition, reason in branches[1:]:
        out = out.when(condition, reason)
    return out


def directory(location: str, partition: str) -> str:
    """`<location>/<partition>`, the folder of one partition of the table at `location`;
    refuses a `partition` that is not a spec of escaped levels (it could leave the folder)."""
    levels = partition.split("/") if partition else []
    for level in levels:
        name, sep, value = level.partition("=")
        if not sep or not name or any(c in ESCAPED - {"%"} for c in name + value):
            raise ValueError(f"`{partition}` is not an escaped partition path")
    return "/".join([location.rstrip("/"), *levels])
