"""Which partition columns need no per-row check (`planning.partition_safety`): only a
`date_format` of a fixed pattern of date letters and separators whose longest value still
makes one directory name; anything that could carry text from the data is checked."""

from __future__ import annotations

import pytest
from sqlglot import parse_one

from sqlflow.planning.partition_safety import safe_partitions


def _safe(select_list: str, columns: tuple[str, ...] = ("p",)) -> tuple[str, ...]:
    return safe_partitions(parse_one(f"SELECT {select_list} FROM t", read="spark"), columns)


@pytest.mark.parametrize("expr", ["date_format(ts, 'yyyy-MM-dd')", "date_format(ts, 'HH')",
                                  "date_format(ts, 'yyyy/MM/dd HH:mm:ss.SSS')",
                                  "DATE_FORMAT(t.ts, 'EEEE MMMM d')"])
def test_a_fixed_date_pattern_is_safe(expr):
    assert _safe(f"{expr} AS p") == ("p",)


@pytest.mark.parametrize("expr", [
    "tag",                                     # data
    "date_format(ts, fmt)",                    # a pattern from the data
    "date_format(ts, concat('yyyy', tag))",
    "date_format(ts, 'yyyy''x''')",            # quoted text in the pattern
    "date_format(ts, 'VV')",                   # a zone id: long, with '/'
    "date_format(ts, 'yyyy-MM-dd-HH-mm-ss-SSS-EEEE-MMMM')",  # longer than the bound allows
    "concat(date_format(ts, 'yyyy'), tag)",
    "cast(date_format(ts, 'yyyy') AS string) || tag",
])
def test_anything_the_data_can_shape_is_checked(expr):
    assert _safe(f"{expr} AS p") == ()


def test_the_bound_counts_the_column_name():
    long_name = "c" * 80  # escaped at most 3 bytes a character: 240 + '=' + the value > 255
    assert _safe(f"date_format(ts, 'yyyy') AS {long_name}", (long_name,)) == ()
    assert _safe("date_format(ts, 'yyyy') AS dt", ("dt",)) == ("dt",)


def test_only_the_top_level_select_list_counts():
    union = parse_one("SELECT date_format(ts, 'yyyy') AS p FROM t UNION ALL SELECT tag AS p FROM u",
                      read="spark")
    assert safe_partitions(union, ("p",)) == ()
    assert _safe("date_format(ts, 'yyyy') AS q, tag AS p") == ()  # matched by name, not position
    assert _safe("date_format(ts, 'yyyy') AS P") == ("p",)  # names are case-insensitive
