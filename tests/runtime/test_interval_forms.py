"""Every interval spelling Spark accepts means, in the SQL sqlflow emits, what the analyst wrote
(docs/semantics.md, "Interval literals"): the value Spark gives the emitted SQL equals the bound
the plan records, and equals the value Spark gives the text as written.

The pinned sqlglot parses `t - INTERVAL 3 MINUTES 30 SECONDS` as `t - (3 min + 30 s)` but
generated it without the parentheses, `t - 150 s` to Spark, in both modes (docs/stack.md). Then
a model whose bound is such a literal: a pair 190 s apart must join in the stream run, the batch
run and a plain-Python join of the same rows.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone

import pytest

from runtime.adkit import CLICK_SCHEMA, IMP_SCHEMA, append, at, click, imp, in_ingest_chunks, setup_projects
from sqlflow.analysis.ir import InputRel
from sqlflow.analysis.passes.joins import classify_joins
from sqlflow.analysis.passes.positions import Positions
from sqlflow.analysis.passes.scopes import ScopeFacts
from sqlflow.dialect import DIALECT, parse
from sqlflow.planning.plan import spark_sql
from sqlflow.project.eventtime import EventTime
from sqlflow.runtime.dispatch import run_stream

pytestmark = pytest.mark.spark

SECOND = 1_000_000
T = "TIMESTAMP'2026-11-01 12:00:00'"

# (spelling, µs it means to Spark, worked out by hand from Spark's documentation)
FORMS = [
    ("INTERVAL 3 MINUTES 30 SECONDS", 210 * SECOND),
    ("interval 3 minute 30 second", 210 * SECOND),
    ("INTERVAL 3 MINUTES + 30 SECONDS", 210 * SECOND),
    ("INTERVAL '3:30' MINUTE TO SECOND", 210 * SECOND),
    ("INTERVAL '-3:30' MINUTE TO SECOND", -210 * SECOND),
    ("INTERVAL '1 02:03:04.000005' DAY TO SECOND", 93_784 * SECOND + 5),
    ("INTERVAL '-1 02:03:04.5' DAY TO SECOND", -93_784_500_000),
    ("INTERVAL 1 DAY 2 HOURS 3 MINUTES 4.000005 SECONDS", 93_784 * SECOND + 5),
    ("INTERVAL 2 MINUTES 500 MILLISECONDS 7 MICROSECONDS", 120_500_007),
    ("INTERVAL 1 WEEK 1 DAY", 8 * 86_400 * SECOND),
    ("INTERVAL -3 MINUTES 30 SECONDS", -150 * SECOND),  # each part has its own sign
    ("INTERVAL 1 MINUTE -30 SECONDS", 30 * SECOND),
    ("- INTERVAL 3 MINUTES 30 SECONDS", -210 * SECOND),
    ("INTERVAL 1.5 SECONDS", 1_500_000),
    ("INTERVAL '3 minutes 30 seconds'", 210 * SECOND),
    ("INTERVAL '-3 minutes -30 seconds'", -210 * SECOND),
    ("make_interval(0, 0, 0, 0, 0, 3, 30)", 210 * SECOND),
    ("make_interval(0, 0, 0, 0, 0, 3, 30.5)", 210_500_000),
    ("make_interval(0, 0, 0, 0, 0, -3, -30.000001)", -210_000_001),
    ("make_dt_interval(0, 0, 3, 30.25)", 210_250_000),
]


def plan_bound(form: str) -> tuple[int | None, int | None]:
    """The bound the compiler records for `c.t BETWEEN i.t - form AND i.t + form`."""
    ins = {"ods.imp": InputRel("ods.imp", "ods.imp", "source", True, EventTime("imp_ts")),
           "ods.clk": InputRel("ods.clk", "ods.clk", "source", True, EventTime("click_ts"))}
    sql = (f"SELECT * FROM ods.imp i JOIN ods.clk c ON i.ad = c.ad "
           f"AND c.click_ts BETWEEN i.imp_ts - {form} AND i.imp_ts + {form}")
    facts = ScopeFacts(parse(sql), ins)
    (join,) = classify_joins(facts, facts.root_info, Positions(sql, "m.sql"))
    return join.interval.lower_us, join.interval.upper_us


def spark_offsets(spark, sql: str) -> tuple[int, int]:
    """`lo`, `hi` of `SELECT T - form AS lo, T + form AS hi`, as µs from T, evaluated by Spark."""
    row = spark.sql(f"SELECT unix_micros(lo) - unix_micros({T}) AS lo, "
                    f"unix_micros(hi) - unix_micros({T}) AS hi FROM ({sql})").first()
    return row["lo"], row["hi"]


@pytest.mark.parametrize("form, us", FORMS, ids=[f for f, _ in FORMS])
def test_emitted_interval_means_what_was_written(spark, form, us):
    written = f"SELECT {T} - {form} AS lo, {T} + {form} AS hi"
    assert spark_offsets(spark, written) == (-us, us), "the table's value is not Spark's"
    # what every plan's SQL is (`spark_sql`), and the tree's plain generation (its parentheses)
    for emitted in (spark_sql(parse(written)), parse(written).sql(dialect=DIALECT)):
        assert spark_offsets(spark, emitted) == (-us, us), f"emitted as {emitted}"
    assert plan_bound(form) == (-us, us)  # an empty range when `us` < 0: still the bound written


# --- differential: a multi-unit bound joins a pair 190 s apart in both modes ------------------------

HEAD = "{{ config(materialized='streaming_table', partition_by=['dt'], stream_strategy='%s') }}\n"
BODY = """
SELECT i.req_id, i.ad_id, i.imp_ts, c.click_ts, to_date(i.imp_ts) AS dt
FROM {{ source('ods', 'imps') }} AS i
%s {{ source('ods', 'clicks') }} AS c
  ON i.req_id = c.req_id
 AND c.click_ts BETWEEN i.imp_ts - interval 3 minutes 30 seconds
                    AND i.imp_ts + interval 3 minutes 30 seconds
"""
MODELS = {f"{how}_{strategy}.sql": HEAD % strategy + BODY % keyword
          for how, keyword in (("inner", "JOIN"), ("left", "LEFT JOIN"))
          for strategy in ("incremental", "stateful")}
BOUND = 210 * SECOND


@pytest.fixture
def setup(spark, tmp_path, request):
    yield from setup_projects(spark, tmp_path, request, "rt_iforms_", MODELS)


def rows():
    """Pairs 150, 190 and 210 s apart (in), 210 s + 1 µs apart (out), both directions."""
    imps, clicks = [], []
    for n, (gap_s, gap_us) in enumerate([(150, 0), (190, 0), (210, 0), (210, 1)]):
        for sign in (1, -1):
            key = f"k{n}{'+' if sign > 0 else '-'}"
            t = at(1, 10 + n, 0)
            imps.append(imp(key, n, t))
            clicks.append(click(key, t + sign * timedelta(seconds=gap_s, microseconds=gap_us)))
    return imps, clicks


EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def us(t: datetime) -> int:
    return (t - EPOCH) // timedelta(microseconds=1)


def reference(how: str, imps, clicks) -> list[tuple]:
    """The join in plain Python: same key, |click - imp| within 210 s inclusive (µs)."""
    out = []
    for key, ad, t, _, _ in imps:
        hits = [us(ct) for ckey, ct, _, _ in clicks if key == ckey and -BOUND <= us(ct) - us(t) <= BOUND]
        out += [(key, ad, us(t), ct) for ct in hits]
        if how == "left" and not hits:
            out.append((key, ad, us(t), None))
    return sorted(out, key=repr)


def collected(spark, table) -> list[tuple]:
    got = spark.sql(f"SELECT req_id, ad_id, unix_micros(imp_ts), unix_micros(click_ts) FROM {table}")
    return sorted((tuple(r) for r in got.collect()), key=repr)


@pytest.mark.parametrize("how", ["inner", "left"])
@pytest.mark.parametrize("strategy", ["incremental", "stateful"])
def test_multi_unit_bound_joins_alike_in_stream_batch_and_python(spark, setup, how, strategy):
    s, rnd = setup, random.Random(29)
    imps, clicks = rows()
    for table, chunk, schema in (in_ingest_chunks(rnd, imps, f"{s.ods}.imps", IMP_SCHEMA)
                                 + in_ingest_chunks(rnd, clicks, f"{s.ods}.clicks", CLICK_SCHEMA)):
        append(spark, table, chunk, schema)
    model = f"{how}_{strategy}"
    want = reference(how, imps, clicks)
    assert any(key == "k1+" and ct is not None for key, _, _, ct in want)  # the 190 s pair
    truth, _ = s.truth(model)
    assert collected(spark, truth) == want
    plan = s.one_file_per_batch(model)
    run_stream(s.stream, plan)
    assert collected(spark, plan.sink.table) == want
