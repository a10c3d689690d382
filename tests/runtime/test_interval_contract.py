"""The interval-join contract (docs/design.md §2.1, §2.2), differentially: small random inputs (few keys and
NULL keys, event times on and one µs beside the bounds, duplicates, late and future rows by the
lateness rule, NULL event times) are run through the batch plan and, by `sqlflow.workflows.verify.run`, through
the stream plan in random orders and splits; both must equal a plain-Python reference of the
contract written here without the compiler. For inner, left and right joins, both strategies.

Also: verify itself can fail (a stream plan with a corrupted SQL is reported per partition and
the command exits 1), and its user errors.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from helpers import ad_sources_yml, make_project
from sqlflow.compiler import compile_project
from sqlflow.engine.context import Context
from sqlflow.errors import SqlflowError
from sqlflow.workflows.verify.run import drop_scratch, verify_model

pytestmark = pytest.mark.spark

DB = "t_icontract"
ODS, DW = f"{DB}_ods", f"{DB}_dw"
US = 1
MINUTE = 60_000_000 * US
LOWER, UPPER = -1 * MINUTE, 2 * MINUTE  # c.click_ts BETWEEN i.imp_ts - 1 minute AND i.imp_ts + 2 minutes
LATENESS, TOLERANCE = 10 * MINUTE, 5 * MINUTE  # ad_sources_yml: allowed_lateness, future_tolerance
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
T0 = int((datetime(2026, 11, 1, 23, 58, tzinfo=timezone.utc) - EPOCH) / timedelta(microseconds=1))
KEYS = ("a", "b", None)

JOINS = {"inner": ("JOIN", "i.imp_ts"), "left": ("LEFT JOIN", "i.imp_ts"),
         "right": ("RIGHT JOIN", "c.click_ts")}
STRATEGIES = ("incremental", "stateful")
# Each example costs about 30 s (a batch run and a verify run), so the suite runs one per join
# and strategy, the same one every run: the edge rows below plus Hypothesis's first derandomized
# draw (three impressions with a NULL event time). SQLFLOW_CONTRACT_EXAMPLES=N draws N new random
# examples each, every one with the edge rows (a soak before merging a runtime change); a
# failure prints the example and seed.
EXAMPLES = int(os.environ.get("SQLFLOW_CONTRACT_EXAMPLES") or 0)


def model_sql(how: str, strategy: str) -> str:
    keyword, day_of = JOINS[how]
    return (f"{{{{ config(materialized='streaming_table', partition_by=['dt'], "
            f"stream_strategy='{strategy}') }}}}\n"
            f"SELECT i.req_id, i.ad_id, i.imp_ts, c.req_id AS c_req_id, c.click_id, c.click_ts,\n"
            f"       to_date({day_of}) AS dt\n"
            "FROM {{ source('ods', 'imps') }} AS i\n"
            f"{keyword} {{{{ source('ods', 'clicks') }}}} AS c\n"
            "  ON i.req_id = c.req_id\n"
            " AND c.click_ts BETWEEN i.imp_ts - INTERVAL 1 MINUTE AND i.imp_ts + INTERVAL 2 MINUTES\n")


MODELS = {f"{how}_{strategy}.sql": model_sql(how, strategy) for how in JOINS for strategy in STRATEGIES}
MODELS["plain.sql"] = "{{ config(materialized='table') }}\nSELECT * FROM {{ source('ods', 'imps') }}\n"


# --- the reference: docs/design.md §2.1 and §2.2 in plain Python --------------------------------------------

def reason(event: int | None, ingest: int | None) -> str | None:
    """2.1: NULL event time; late iff event < ingest - lateness; future iff event > ingest +
    tolerance; a row without ingest time is neither."""
    if event is None:
        return "null_event_time"
    if ingest is None:
        return None
    if event < ingest - LATENESS:
        return "late"
    if event > ingest + TOLERANCE:
        return "future"
    return None


def day(us: int) -> str:
    return (EPOCH + timedelta(microseconds=us)).date().isoformat()


def reference(how: str, imps: list[tuple], clicks: list[tuple]) -> Counter:
    """2.2 over the clean rows: inclusive bounds to the µs, NULL keys never match, an outer join
    pads each unmatched row of its preserved side once; duplicates are kept (a multiset)."""
    imps = [r for r in imps if reason(r[2], r[3]) is None]
    clicks = [r for r in clicks if reason(r[2], r[3]) is None]
    out: Counter = Counter()
    imp_matched, click_matched = [False] * len(imps), [False] * len(clicks)
    for a, (key, ad, t, _) in enumerate(imps):
        for b, (ckey, cid, ct, _) in enumerate(clicks):
            if key is not None and key == ckey and t + LOWER <= ct <= t + UPPER:
                imp_matched[a] = click_matched[b] = True
                out[(key, ad, t, ckey, cid, ct, day(ct if how == "right" else t))] += 1
    if how == "left":
        out.update((key, ad, t, None, None, None, day(t))
                   for (key, ad, t, _), hit in zip(imps, imp_matched, strict=True) if not hit)
    if how == "right":
        out.update((None, None, None, ckey, cid, ct, day(ct))
                   for (ckey, cid, ct, _), hit in zip(clicks, click_matched, strict=True) if not hit)
    return out


def reference_quarantine(imps: list[tuple], clicks: list[tuple]) -> Counter:
    return Counter((f"{ODS}.{name}", reason(r[2], r[3]), r[2], r[3])
                   for name, rows in (("imps", imps), ("clicks", clicks))
                   for r in rows if reason(r[2], r[3]) is not None)


# --- random inputs ----------------------------------------------------------------------------------

def ingest_near(draw, event: int | None) -> int | None:
    """An ingest time on, or one µs beside, the late and future thresholds, or in between."""
    base = event if event is not None else T0
    offset = draw(st.sampled_from([0, LATENESS, LATENESS + 1, -TOLERANCE, -TOLERANCE - 1, None, "any"]))
    if offset is None:
        return None if draw(st.integers(0, 3)) == 0 else base
    if offset == "any":
        return base + draw(st.integers(-TOLERANCE, LATENESS))
    return base + offset


@st.composite
def inputs(draw):
    """(imps, clicks, seed): imps (req_id, ad_id, imp_us, ingest_us), clicks (req_id, click_id,
    click_us, ingest_us). Times cluster around 23:58-00:04, so output spans two dates."""
    imps = []
    for ad in range(draw(st.integers(3, 10))):
        t = T0 + draw(st.integers(0, 6 * MINUTE))
        t = None if draw(st.integers(0, 15)) == 0 else t
        imps.append((draw(st.sampled_from(KEYS)), ad, t, ingest_near(draw, t)))
    clicks = []
    for key, _, t, _ in imps:
        for _ in range(draw(st.integers(0, 3))):
            base = t if t is not None else T0
            anchor = draw(st.sampled_from(["lower", "upper", "inside", "any"]))
            if anchor == "any":
                at = base + draw(st.integers(LOWER - MINUTE, UPPER + MINUTE))
            else:  # on a bound, or one µs beside it
                at = base + {"lower": LOWER, "upper": UPPER, "inside": 0}[anchor] \
                    + draw(st.sampled_from([-1, 0, 0, 1]))
            same = draw(st.integers(0, 4)) > 0
            clicks.append((key if same else draw(st.sampled_from(KEYS)), len(clicks), at,
                           ingest_near(draw, at)))
    imps += draw(st.lists(st.sampled_from(imps), max_size=3))  # exact duplicates
    if clicks:
        clicks += draw(st.lists(st.sampled_from(clicks), max_size=3))
    return imps, clicks, draw(st.integers(0, 10**6))


# Bounds to the µs and one µs outside, duplicates, a NULL key, late, future and just-in-time rows.
EDGE_IMPS = [("a", 1, T0, T0), ("a", 1, T0, T0), (None, 2, T0, T0),
             ("b", 3, T0 + MINUTE, T0 + MINUTE + LATENESS + 1),  # late by 1 µs
             ("b", 4, T0 + 2 * MINUTE, T0 + 2 * MINUTE - TOLERANCE - 1),  # future by 1 µs
             ("b", 5, T0 + 3 * MINUTE, T0 + 3 * MINUTE + LATENESS)]  # exactly the allowed lateness
EDGE_CLICKS = [("a", 0, T0 + UPPER, T0 + UPPER), ("a", 1, T0 + UPPER + 1, T0 + UPPER),
               ("a", 2, T0 + LOWER, T0), ("a", 3, T0 + LOWER - 1, T0), (None, 4, T0, T0),
               ("b", 5, T0 + 3 * MINUTE + UPPER, T0 + 3 * MINUTE + UPPER),
               ("b", 6, T0 + 3 * MINUTE, T0 + 3 * MINUTE + LATENESS + 1)]  # late by 1 µs
EDGE_ID = 100  # added to the edge rows' ad and click ids in an example: drawn ids stay below it


def with_edges(imps: list[tuple], clicks: list[tuple]) -> tuple[list[tuple], list[tuple]]:
    """An example's rows plus the edge rows (their ids apart from the drawn ones), so every
    example runs the edge cases too: one verify run a join and strategy instead of two."""
    return (imps + [(k, ad + EDGE_ID, t, i) for k, ad, t, i in EDGE_IMPS],
            clicks + [(k, cid + EDGE_ID, t, i) for k, cid, t, i in EDGE_CLICKS])


def test_the_reference_on_a_hand_computed_case():
    """The reference itself, against rows worked out by hand (no Spark)."""
    d1, d2 = "2026-11-01", "2026-11-02"  # T0 is 23:58, so T0 + UPPER is midnight
    pairs = [(("a", 1, T0, "a", 0, T0 + UPPER), 2, d1, d2), (("a", 1, T0, "a", 2, T0 + LOWER), 2, d1, d1),
             (("b", 5, T0 + 3 * MINUTE, "b", 5, T0 + 3 * MINUTE + UPPER), 1, d2, d2)]
    inner = Counter({row + (by_imp,): n for row, n, by_imp, _ in pairs})
    assert reference("inner", EDGE_IMPS, EDGE_CLICKS) == inner
    assert reference("left", EDGE_IMPS, EDGE_CLICKS) == inner + Counter({(None, 2, T0, None, None, None, d1): 1})
    assert reference("right", EDGE_IMPS, EDGE_CLICKS) == Counter(
        {row + (by_click,): n for row, n, _, by_click in pairs}) + Counter(
        {(None, None, None, "a", 1, T0 + UPPER + 1, d2): 1, (None, None, None, "a", 3, T0 + LOWER - 1, d1): 1,
         (None, None, None, None, 4, T0, d1): 1})
    assert reference_quarantine(EDGE_IMPS, EDGE_CLICKS) == Counter({
        (f"{ODS}.imps", "late", T0 + MINUTE, T0 + MINUTE + LATENESS + 1): 1,
        (f"{ODS}.imps", "future", T0 + 2 * MINUTE, T0 + 2 * MINUTE - TOLERANCE - 1): 1,
        (f"{ODS}.clicks", "late", T0 + 3 * MINUTE, T0 + 3 * MINUTE + LATENESS + 1): 1})


# --- fixtures -----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def contract(spark, tmp_path_factory):
    for db in (ODS, DW):
        spark.sql(f"DROP DATABASE IF EXISTS {db} CASCADE")
    spark.sql(f"CREATE DATABASE {ODS}")
    load(spark, [], [])
    root = make_project(tmp_path_factory.mktemp("contract"), models=MODELS,
                        yml={"sources.yml": ad_sources_yml(ODS)},
                        profiles_yml=f"sqlflow:\n  target: local\n  outputs:\n    local: "
                                     f"{{type: spark, method: session, host: NA, schema: {DW}}}\n")
    ctx = Context.with_session(spark, root)
    plans = {}
    for mode in ("batch", "stream"):
        result = compile_project(root, mode=mode, target=ctx.target)
        result.raise_if_errors()
        plans[mode] = result.plans
    yield ctx, plans
    for db in (ODS, DW):
        spark.sql(f"DROP DATABASE IF EXISTS {db} CASCADE")


def load(spark, imps, clicks) -> None:
    """Replace the two ODS tables: times as µs, stored as TIMESTAMP, `dt` the ingest date."""
    for name, rows, cols in (("imps", imps, ("req_id", "ad_id", "imp_ts")),
                             ("clicks", clicks, ("req_id", "click_id", "click_ts"))):
        df = spark.createDataFrame(rows, f"{cols[0]} string, {cols[1]} bigint, t bigint, i bigint")
        df = df.selectExpr(cols[0], cols[1], f"timestamp_micros(t) AS {cols[2]}",
                           "timestamp_micros(i) AS ingest_ts",
                           "date_format(timestamp_micros(i), 'yyyy-MM-dd') AS dt")
        df.writeTo(f"{ODS}.{name}").using("delta").createOrReplace()


def output_rows(spark, table: str) -> Counter:
    return Counter(tuple(r) for r in spark.sql(
        f"SELECT req_id, ad_id, unix_micros(imp_ts), c_req_id, click_id, unix_micros(click_ts), "
        f"CAST(dt AS STRING) FROM {table}").collect())


def quarantine_rows(spark, table: str, copies: dict[str, str] | None = None) -> Counter:
    """(input, reason, event µs, ingest µs); `copies` names a copied input by its original."""
    if not spark.catalog.tableExists(table):
        return Counter()
    rows = spark.sql(f"SELECT input, reason, unix_micros(event_time), unix_micros(ingest_time) FROM {table}")
    return Counter(((copies or {}).get(r[0], r[0]), *r[1:]) for r in rows.collect())


def diff(got: Counter, want: Counter) -> str:
    return f"missing {sorted((want - got).items(), key=str)}, unexpected {sorted((got - want).items(), key=str)}"


# --- the differential test --------------------------------------------------------------------------

@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("how", list(JOINS))
def test_batch_and_stream_plans_equal_the_reference(spark, contract, how, strategy):
    ctx, plans = contract
    model = f"{how}_{strategy}"

    @settings(max_examples=EXAMPLES or 1, deadline=None, derandomize=not EXAMPLES, database=None,
              phases=[Phase.explicit, Phase.generate],  # no shrinking: each example costs seconds
              suppress_health_check=list(HealthCheck))
    @given(inputs())
    def check(case):
        imps, clicks, seed = case
        imps, clicks = with_edges(imps, clicks)
        load(spark, imps, clicks)
        report = verify_model(ctx, plans["batch"][model], plans["stream"][model], runs=1, seed=seed,
                              keep=True, max_chunks=3, max_rounds=2)
        try:
            run = report.runs[0]
            want, want_q = reference(how, imps, clicks), reference_quarantine(imps, clicks)
            batch, stream = output_rows(spark, report.batch_table), output_rows(spark, run.sink_table)
            assert batch == want, f"batch plan: {diff(batch, want)}"
            assert stream == want, f"stream plan ({run.order} order, {run.commits} commits): {diff(stream, want)}"
            batch_q = quarantine_rows(spark, report.batch_quarantine)
            assert batch_q == want_q, f"batch quarantine: {diff(batch_q, want_q)}"
            stream_q = quarantine_rows(spark, run.quarantine_table, dict(run.copies))
            assert stream_q == want_q, f"stream quarantine: {diff(stream_q, want_q)}"
            assert report.ok, [p for p in run.partitions if not p.ok] or run.problems
        finally:
            drop_scratch(ctx, report.scratch)

    check()


# --- verify can fail, and says where ------------------------------------------------------------------

def corrupt(plan):
    """The stream plan with `AND i.req_id <> 'a'` in every SELECT, in its SQL and in the hash-join
    form a small micro-batch runs: it loses the rows of key `a`."""
    import dataclasses

    from sqlglot import exp

    from sqlflow.dialect import DIALECT, parse
    from sqlflow.planning.plan import spark_sql

    def without_a(sql):
        tree = parse(sql)
        for select in list(tree.find_all(exp.Select)):
            if select.parent_select is None:  # each branch of the delta rule's UNION ALL
                select.where("i.req_id <> 'a'", dialect=DIALECT, copy=False)
        return spark_sql(tree)

    hashed = plan.hash_join_sql
    return dataclasses.replace(plan, sql=without_a(plan.sql),
                               hash_join_sql=without_a(hashed) if hashed is not None else None)


FIXED_IMPS = [("a", 1, T0, T0), ("b", 2, T0 + 3 * MINUTE, T0 + 3 * MINUTE), ("a", 3, T0 + 4 * MINUTE, T0 + 4 * MINUTE),
              ("b", 4, T0, T0 + LATENESS + 1)]
FIXED_CLICKS = [("a", 0, T0 + UPPER, T0 + UPPER), ("b", 1, T0 + 3 * MINUTE + LOWER, T0 + 3 * MINUTE),
                ("a", 2, T0 + 4 * MINUTE, T0 + 4 * MINUTE), ("a", 3, T0 + 4 * MINUTE, T0 + 4 * MINUTE)]


def invoke(ctx, *args):
    from click.testing import CliRunner

    from sqlflow.cli.main import main

    return CliRunner().invoke(main, ["--project-dir", str(ctx.project_dir), "verify", *args])


def test_verify_reports_a_stream_that_differs_per_partition_and_exits_1(spark, contract, monkeypatch):
    ctx, _ = contract
    load(spark, FIXED_IMPS, FIXED_CLICKS)
    good = invoke(ctx, "--select", "inner_incremental", "--runs", "1", "--seed", "7")
    assert good.exit_code == 0, good.output
    assert "verify: OK" in good.output and "inner_incremental run 1: equal" in good.output
    assert re.search(r"sink\s+dt=2026-11-01\s+1\s+1\s+0\s+0", good.output), good.output
    assert re.search(r"sink\s+dt=2026-11-02\s+3\s+3\s+0\s+0", good.output), good.output
    assert re.search(r"quarantine\s+dt=2026-11-01\s+1\s+1\s+0\s+0", good.output), good.output

    import sqlflow.workflows.verify.run as V

    real = V.rebind
    monkeypatch.setattr(V, "rebind", lambda plan, *a, **kw: corrupt(real(plan, *a, **kw)))
    bad = invoke(ctx, "--select", "inner_incremental", "--runs", "1", "--seed", "7")
    assert bad.exit_code == 1, bad.output
    assert "verify: FAILED" in bad.output and "inner_incremental run 1: DIFFERS" in bad.output
    # the corrupted stream loses key `a`: its one match of 2026-11-01 and two of 2026-11-02
    assert re.search(r"sink\s+dt=2026-11-01\s+1\s+0\s+1\s+0", bad.output), bad.output
    assert re.search(r"sink\s+dt=2026-11-02\s+3\s+1\s+2\s+0", bad.output), bad.output
    assert re.search(r"quarantine\s+dt=2026-11-01\s+1\s+1\s+0\s+0", bad.output), bad.output
    assert not [d for d in spark.catalog.listDatabases() if d.name.startswith("sqlflow_verify_")]


def test_verify_user_errors(spark, contract, tmp_path):
    ctx, _ = contract
    unknown = invoke(ctx, "--select", "nope")
    assert unknown.exit_code == 1 and "no model named `nope`" in unknown.output
    plain = invoke(ctx, "--select", "plain")
    assert plain.exit_code == 1 and "nothing to verify" in plain.output and "`plain`" in plain.output
    root = make_project(tmp_path, models={"inner.sql": model_sql("inner", "incremental")},
                        yml={"sources.yml": ad_sources_yml(f"{DB}_nowhere")})
    with pytest.raises(SqlflowError, match=rf"input table `{DB}_nowhere.imps` does not exist.*demo generate"):
        from sqlflow.workflows.verify.run import verify_project
        verify_project(Context.with_session(spark, root))
