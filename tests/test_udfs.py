"""The project's spmid UDFs: through Spark SQL in the shared session, and as pure Python."""

from __future__ import annotations

import importlib.util
import string
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]


def _load_spmid_module():
    spec = importlib.util.spec_from_file_location("udfs_spmid_under_test", ROOT / "udfs" / "spmid.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


split_spmid = _load_spmid_module().split_spmid

# input -> (department, page, module, position), or None when malformed
CASES = [
    ("main.home.card.1", ("main", "home", "card", "1")),
    (" Live.Room.Gift.3 ", ("live", "room", "gift", "3")),
    ("live . room . gift . 3", ("live", "room", "gift", "3")),
    ("game-center.detail_page.list.20", ("game-center", "detail_page", "list", "20")),
    (None, None),
    ("", None),
    ("a.b", None),
    ("a..c.d", None),
    ("a.b.c.d.e", None),
    ("a.b.c.", None),
    ("main home card 1", None),
    ("main.h@me.card.1", None),
]


@pytest.fixture(scope="module")
def parsed(spark):
    """Every case through both SQL functions, in one query: input -> (struct, department)."""
    df = spark.createDataFrame([(i, s) for i, (s, _) in enumerate(CASES)], "i int, s string")
    df.createOrReplaceTempView("spmid_cases")
    rows = spark.sql("SELECT i, parse_spmid(s) AS p, spmid_department(s) AS d FROM spmid_cases").collect()
    return {r["i"]: (r["p"], r["d"]) for r in rows}


@pytest.mark.parametrize("i", range(len(CASES)), ids=[repr(c[0]) for c in CASES])
def test_parse_spmid_in_sql(parsed, i):
    expected = CASES[i][1]
    struct, department = parsed[i]
    if expected is None:
        assert struct.asDict() == {"department": None, "page": None, "module": None, "position": None}
        assert department is None
    else:
        assert tuple(struct) == expected
        assert struct["department"] == department == expected[0]


def test_sql_result_type(spark):
    schema = spark.sql("SELECT parse_spmid('a.b.c.d') AS p").schema
    assert schema["p"].dataType.simpleString() == (
        "struct<department:string,page:string,module:string,position:string>")


_PART = st.text(alphabet=string.ascii_lowercase + string.digits + "_-", min_size=1, max_size=12)


@given(st.lists(_PART, min_size=4, max_size=4), st.sampled_from(["", " ", "  ", "\t"]), st.booleans())
def test_four_valid_parts_round_trip(parts, pad, upper):
    text = pad + ".".join(p.upper() if upper else p for p in parts) + pad
    assert split_spmid(text) == tuple(parts)


@given(st.text(max_size=40))
def test_anything_else_is_none(text):
    result = split_spmid(text)
    stripped_parts = [p.strip() for p in text.strip().split(".")]
    if len(stripped_parts) != 4 or not all(stripped_parts):
        assert result is None
    if result is not None:
        assert len(result) == 4 and all(result)
        assert split_spmid(".".join(result)) == result  # parsing is idempotent


@given(st.lists(_PART, min_size=0, max_size=8).filter(lambda ps: len(ps) != 4))
def test_wrong_number_of_parts_is_none(parts):
    assert split_spmid(".".join(parts)) is None
