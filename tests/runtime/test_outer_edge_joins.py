"""Outer interval joins at the edges of the contract (docs/semantics.md, "Outer interval joins
in stream mode"), differentially: the stream run, the batch run and a plain-Python join of the
same rows give the same rows.

- An empty range (lower bound above upper): legal, never matches; every clean left row is
  emitted padded, in both modes (the stream run used to die with `StopIteration`).
- A left outer self join: two aliases of one input are two stream sides reading one table.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone

import pytest

from runtime.adkit import CLICK_SCHEMA, IMP_SCHEMA, append, in_ingest_chunks, random_rows, setup_projects
from sqlflow.runtime.dispatch import run_stream
from sqlflow.runtime.incremental import microbatch

pytestmark = pytest.mark.spark

MINUTE = 60_000_000
LATENESS, TOLERANCE = 10 * MINUTE, 5 * MINUTE  # ad_sources_yml
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)

HEAD = "{{ config(materialized='streaming_table', partition_by=['dt'], stream_strategy='%s') }}\n"
EMPTY = """
SELECT i.req_id, i.ad_id, i.imp_ts, c.click_ts, to_date(i.imp_ts) AS dt
FROM {{ source('ods', 'imps') }} AS i
LEFT JOIN {{ source('ods', 'clicks') }} AS c
  ON i.req_id = c.req_id
 AND c.click_ts BETWEEN i.imp_ts + INTERVAL 5 MINUTES AND i.imp_ts + INTERVAL 1 MINUTE
"""
SELF = """
SELECT a.req_id, a.ad_id, a.imp_ts, b.imp_ts AS next_ts, to_date(a.imp_ts) AS dt
FROM {{ source('ods', 'imps') }} AS a
LEFT JOIN {{ source('ods', 'imps') }} AS b
  ON a.ad_id = b.ad_id
 AND b.imp_ts BETWEEN a.imp_ts + INTERVAL 1 SECOND AND a.imp_ts + INTERVAL 30 MINUTES
"""
MODELS = {"empty_incremental.sql": HEAD % "incremental" + EMPTY,
          "empty_stateful.sql": HEAD % "stateful" + EMPTY,
          "self_incremental.sql": HEAD % "incremental" + SELF}


@pytest.fixture
def setup(spark, tmp_path, request):
    yield from setup_projects(spark, tmp_path, request, "rt_edge_", MODELS)


def us(t: datetime | None) -> int | None:
    return None if t is None else (t - EPOCH) // timedelta(microseconds=1)


def clean(rows) -> list[tuple]:
    """Rows the quarantine keeps (semantics.md, "Quarantine"): event time present, not late,
    not future; their event time and ingest time in µs (the row's last two fields: ingest, dt)."""
    out = []
    for r in rows:
        t, ingest = us(r[-3]), us(r[-2])
        if t is not None and not (t < ingest - LATENESS or t > ingest + TOLERANCE):
            out.append(r)
    return out


def left_join(left, right, match) -> list[tuple]:
    """Each left row with every right row `match`es, or padded (None) when there is none."""
    out = []
    for a in left:
        hits = [b for b in right if match(a, b)]
        out += [(a, b) for b in hits] or [(a, None)]
    return out


def collected(spark, table, columns) -> list[tuple]:
    cols = ", ".join(f"unix_micros({c})" if c.endswith("_ts") else c for c in columns)
    return sorted((tuple(r) for r in spark.sql(f"SELECT {cols} FROM {table}").collect()), key=repr)


def load(spark, s, seed):
    rnd = random.Random(seed)
    imps, clicks = random_rows(seed, n=24, keys=8)
    for table, chunk, schema in (in_ingest_chunks(rnd, imps, f"{s.ods}.imps", IMP_SCHEMA)
                                 + in_ingest_chunks(rnd, clicks, f"{s.ods}.clicks", CLICK_SCHEMA)):
        append(spark, table, chunk, schema)
    return imps, clicks


def check(spark, s, model, want, columns):
    truth, _ = s.truth(model)
    assert collected(spark, truth, columns) == want
    plan = s.one_file_per_batch(model)
    run_stream(s.stream, plan)
    assert collected(spark, plan.sink.table, columns) == want


@pytest.mark.parametrize("strategy", ["incremental", "stateful"])
def test_empty_range_left_join_pads_every_left_row_in_both_modes(spark, setup, strategy):
    imps, clicks = load(spark, setup, seed=7)
    pairs = left_join(clean(imps), clean(clicks), lambda i, c: (
        i[0] is not None and i[0] == c[0] and us(i[2]) + 5 * MINUTE <= us(c[1]) <= us(i[2]) + MINUTE))
    want = sorted(((i[0], i[1], us(i[2]), None if c is None else us(c[1])) for i, c in pairs), key=repr)
    assert want and all(row[-1] is None for row in want)
    check(spark, setup, f"empty_{strategy}", want, ("req_id", "ad_id", "imp_ts", "click_ts"))


def test_left_self_join_streams_like_the_batch_plan(spark, setup, monkeypatch):
    """A left self join streams like the batch plan, and its small micro-batches keep code
    generation: an outer join's padding reads pending rows no count covers (`small_plan`,
    docs/semantics.md "Stream runs")."""
    plans: list[tuple[bool, bool]] = []  # `small_plan`'s (small, interpreted) per sink step
    small_plan = microbatch.small_plan

    def planned(spark_, small, interpreted=False):
        plans.append((small, interpreted))
        return small_plan(spark_, small, interpreted)

    monkeypatch.setattr(microbatch, "small_plan", planned)
    imps, _ = load(spark, setup, seed=11)
    rows = clean(imps)
    pairs = left_join(rows, rows, lambda a, b: (
        a[1] == b[1] and us(a[2]) + 1_000_000 <= us(b[2]) <= us(a[2]) + 30 * MINUTE))
    want = sorted(((a[0], a[1], us(a[2]), None if b is None else us(b[2])) for a, b in pairs), key=repr)
    assert any(row[-1] is None for row in want) and any(row[-1] is not None for row in want)
    check(spark, setup, "self_incremental", want, ("req_id", "ad_id", "imp_ts", "next_ts"))
    assert plans and all(p == (True, False) for p in plans), plans
