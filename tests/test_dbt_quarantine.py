"""The quarantine rule under `dbt run` equals sqlflow's at its edges, row for row.

A tiny project reads one event source twice (a union) whose event time is a STRING column,
so every reason can occur: exactly at the lateness and future bounds (kept), one microsecond
beyond (late / future), NULL (null_event_time), unparseable (malformed), and a NULL ingest
time (kept: nothing says when it arrived). sqlflow's batch runtime and real dbt build it into
two schemas; the model table and its quarantine table must be equal, every column.

A second model of the same project and run, `d`, joins visits with a daily dimension through
an inner `dim_join` (max_fallback 1; docs/design.md §2.3): days with no ready dimension partition in
range go to `d__quarantine` as `dim_missing` under dbt as under sqlflow. One partition is
ready by the commit log, one by a `_SUCCESS` marker (which sqlflow's run records in the log
before dbt runs), one is written but not ready.
"""

from __future__ import annotations

import os
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest

from helpers import make_project, table_names
from sqlflow.compiler import compile_project
from sqlflow.engine.context import Context
from sqlflow.runtime.delta import commitlog as C
from sqlflow.runtime.delta.markers import mark_ready, table_location
from sqlflow.runtime.dispatch import run_models

pytestmark = [pytest.mark.spark, pytest.mark.dbt]

ROOT = Path(__file__).resolve().parents[1]
SRC, SF, DBT = "t_dbtq_src", "t_dbtq_sf", "t_dbtq_dbt"

ROWS = """
  (1, '2026-11-01 10:00:00',        TIMESTAMP'2026-11-01 10:01:00', '2026-11-01'),
  (2, '2026-11-01 09:50:00',        TIMESTAMP'2026-11-01 10:00:00', '2026-11-01'),
  (3, '2026-11-01 09:49:59.999999', TIMESTAMP'2026-11-01 10:00:00', '2026-11-01'),
  (4, '2026-11-01 10:05:00',        TIMESTAMP'2026-11-01 10:00:00', '2026-11-01'),
  (5, '2026-11-01 10:05:00.000001', TIMESTAMP'2026-11-01 10:00:00', '2026-11-01'),
  (6, NULL,                         TIMESTAMP'2026-11-01 10:00:00', '2026-11-01'),
  (7, 'not a time',                 TIMESTAMP'2026-11-01 10:00:00', '2026-11-01'),
  (8, '2026-11-02 03:00:00',        NULL,                           '2026-11-02')
"""
EXPECTED = {3: "late", 5: "future", 6: "null_event_time", 7: "malformed"}

MODEL = """{{ config(materialized='streaming_table', partition_by=['dt']) }}
select a.id, a.ev_ts, 'a' as side, a.dt from {{ source('raw', 'events') }} as a
union all
select b.id, b.ev_ts, 'b' as side, b.dt from {{ source('raw', 'events') }} as b
"""
# visits: (id, user, visit time, ingest time). Ready dim_user days: 11-01 (commit log) and
# 11-03 (marker); 11-04 is written, not ready. max_fallback 1.
VISITS = """
  (1, 1, TIMESTAMP'2026-10-31 10:00:00', TIMESTAMP'2026-10-31 10:00:05'),
  (2, 1, TIMESTAMP'2026-11-01 10:00:00', TIMESTAMP'2026-11-01 10:00:05'),
  (3, 2, TIMESTAMP'2026-11-02 23:59:59.999999', TIMESTAMP'2026-11-03 00:00:05'),
  (4, 1, TIMESTAMP'2026-11-03 00:00:00', TIMESTAMP'2026-11-03 00:00:05'),
  (5, 1, TIMESTAMP'2026-11-04 10:00:00', TIMESTAMP'2026-11-04 10:00:05'),
  (6, 2, TIMESTAMP'2026-11-05 00:00:00', TIMESTAMP'2026-11-05 00:00:05'),
  (7, 3, TIMESTAMP'2026-11-01 10:00:00', TIMESTAMP'2026-11-01 10:00:05'),
  (8, 1, TIMESTAMP'2026-11-05 10:00:00', TIMESTAMP'2026-11-09 10:00:00'),
  (9, 1, TIMESTAMP'2026-11-06 09:00:00', NULL)
"""
DIM_USER = """
  (1, 11, '2026-11-01'), (2, 21, '2026-11-01'), (1, 13, '2026-11-03'), (2, 23, '2026-11-03'),
  (1, 14, '2026-11-04'), (2, 24, '2026-11-04')
"""
# 1, 6, 9: no ready day within one day before; 7: user 3 is not in the dimension (an ordinary
# inner-join miss); 8: late
DIM_EXPECTED = {1: "dim_missing", 6: "dim_missing", 9: "dim_missing", 8: "late"}
DIM_JOINED = {(2, 11, "2026-11-01", "2026-11-01"), (3, 21, "2026-11-01", "2026-11-02"),
              (4, 13, "2026-11-03", "2026-11-03"), (5, 13, "2026-11-03", "2026-11-04")}

DIM_MODEL = """{{ config(materialized='streaming_table', partition_by=['dt']) }}
select v.id, v.user_id, u.vip, u.dt as user_dt, date_format(v.visit_ts, 'yyyy-MM-dd') as dt
from {{ source('raw', 'visits') }} as v
{{ dim_join('inner', source('raw', 'dim_user'), 'u', 'v', keys=['user_id'],
            fact_date='to_date(v.visit_ts)', partition_column='dt', max_fallback=1) }}
"""
# The same join over a model (its event and ingest time come from the source it reads), with
# the documented difference: dbt quarantines dim_missing rows before the model's WHERE on the
# fact table (sqlflow after it), and warns.
STAGED_VISITS = """{{ config(materialized='streaming_table', partition_by=['dt']) }}
select id, user_id, visit_ts, ingest_ts, date_format(visit_ts, 'yyyy-MM-dd') as dt
from {{ source('raw', 'visits') }}
"""
FILTERED_MODEL = (DIM_MODEL.replace("source('raw', 'visits')", "ref('sv')")
                  + "where v.id <> 6\n")
SOURCES = f"""version: 2
sources:
  - name: raw
    schema: {SRC}
    tables:
      - name: events
        meta:
          sqlflow: {{event_time: ev_ts, ingest_time: ingest_ts, allowed_lateness: 10 minutes, future_tolerance: 300 s}}
      - name: visits
        meta:
          sqlflow: {{event_time: visit_ts, ingest_time: ingest_ts, allowed_lateness: 1 day, future_tolerance: 1 hour}}
      - name: dim_user
        meta:
          sqlflow: {{partition_column: dt, ready_marker: _SUCCESS}}
"""
PROFILES = f"""sqlflow:
  target: sf
  outputs:
    sf: {{type: spark, method: session, host: NA, schema: {SF}}}
    dbt: {{type: spark, method: session, host: NA, schema: {DBT}}}
"""


def rows(spark, table: str) -> Counter:
    """Every row, every column; a dim_missing row's `origin` names the commit-log version each
    run pinned (`commit_log@v<n>`: sqlflow's own run appends to the log before dbt runs), so it
    is checked for that form and compared without the number."""
    df = spark.table(table)
    cols = sorted(df.columns)
    out = Counter()
    for r in df.select(*cols).collect():
        values = r.asDict()
        if values.get("reason") == "dim_missing":
            assert re.fullmatch(r"commit_log@v\d+", values["origin"]), values["origin"]
            values["origin"] = "commit_log@v"
        out[tuple(values[c] for c in cols)] += 1
    return out


@pytest.fixture(scope="module")
def built(spark, tmp_path_factory):
    os.environ.setdefault("DBT_SEND_ANONYMOUS_USAGE_STATS", "false")
    for schema in (SRC, SF, DBT):
        spark.sql(f"DROP DATABASE IF EXISTS {schema} CASCADE")
        spark.sql(f"CREATE DATABASE {schema}")
    spark.sql(f"CREATE TABLE {SRC}.events (id INT, ev_ts STRING, ingest_ts TIMESTAMP, dt STRING) "
              "USING delta")
    spark.sql(f"INSERT INTO {SRC}.events VALUES {ROWS}")
    spark.sql(f"CREATE TABLE {SRC}.visits (id INT, user_id BIGINT, visit_ts TIMESTAMP, "
              "ingest_ts TIMESTAMP) USING delta")
    spark.sql(f"INSERT INTO {SRC}.visits VALUES {VISITS}")
    spark.sql(f"CREATE TABLE {SRC}.dim_user (user_id BIGINT, vip INT, dt STRING) USING delta "
              "PARTITIONED BY (dt)")
    spark.sql(f"INSERT INTO {SRC}.dim_user VALUES {DIM_USER}")
    C.append(spark, [C.Entry(f"{SRC}.dim_user", "dt=2026-11-01", "commit", "manual")])
    mark_ready(spark, table_location(spark, f"{SRC}.dim_user"), "dt", "2026-11-03")
    root = make_project(tmp_path_factory.mktemp("dbtq") / "p", models={"m.sql": MODEL, "d.sql": DIM_MODEL, "sv.sql": STAGED_VISITS,
                                                        "dw.sql": FILTERED_MODEL},
                        yml={"sources.yml": SOURCES}, profiles_yml=PROFILES,
                        macros={n: (ROOT / "macros" / n).read_text()
                                for n in ("dim_join.sql", "interval_join.sql", "sqlflow_commit_log.sql")})
    shutil.copytree(ROOT / "macros" / "materializations", root / "macros" / "materializations")

    ctx = Context.with_session(spark, root, "sf")
    result = compile_project(root, mode="batch", target=ctx.target)
    result.raise_if_errors()
    list(run_models(ctx, list(result.plans.values())))

    from dbt.cli.main import dbtRunner

    dbt = dbtRunner().invoke(["run", "--project-dir", str(root), "--profiles-dir",
                              str(root / "profiles"), "--target", "dbt", "--target-path",
                              str(root / "target"), "--log-path", str(root / "logs")])
    assert dbt.success, dbt.exception
    return root


def test_dbt_quarantines_exactly_the_rule_s_rows(spark, built):
    found = {(int(r.id), r.reason) for r in spark.sql(
        f"SELECT get_json_object(raw, '$.id') AS id, reason FROM {DBT}.m__quarantine").collect()}
    assert found == set(EXPECTED.items())
    assert spark.table(f"{DBT}.m__quarantine").count() == len(EXPECTED)  # read twice, once each
    kept = Counter(r.id for r in spark.table(f"{DBT}.m").collect())
    assert kept == {i: 2 for i in range(1, 9) if i not in EXPECTED}


def test_dbt_quarantines_the_days_without_a_ready_dimension_partition(spark, built):
    found = {(int(r.id), r.reason, r.input) for r in spark.sql(
        f"SELECT get_json_object(raw, '$.id') AS id, reason, input FROM {DBT}.d__quarantine").collect()}
    assert found == {(i, reason, f"{SRC}.dim_user" if reason == "dim_missing" else f"{SRC}.visits")
                     for i, reason in DIM_EXPECTED.items()}
    assert spark.table(f"{DBT}.d__quarantine").count() == len(DIM_EXPECTED)
    joined = {(r.id, r.vip, r.user_dt, r.dt) for r in spark.table(f"{DBT}.d").collect()}
    assert joined == DIM_JOINED and spark.table(f"{DBT}.d").count() == len(DIM_JOINED)
    # the fact row as sqlflow writes it: every column, timestamps to the microsecond
    (row,) = spark.sql(f"SELECT * FROM {DBT}.d__quarantine WHERE get_json_object(raw, '$.id') = 9").collect()
    assert (row.raw, str(row.event_time), row.ingest_time, row.dt) == (
        '{"id":9,"user_id":1,"visit_ts":"2026-11-06T09:00:00.000000Z"}', "2026-11-06 09:00:00", None, "2026-11-06")


def test_a_model_fact_and_the_where_difference(spark, built):
    """A fact that is a model: the same dim_missing rows, every column, as sqlflow's, except
    the documented difference (docs/macros.md): a WHERE on the fact table is applied to
    dim_missing rows by sqlflow only."""
    def by_id(table):
        return {int(r.id): r.asDict() for r in spark.sql(
            f"SELECT get_json_object(raw, '$.id') AS id, * FROM {table}").collect()}

    dbt, sf = by_id(f"{DBT}.dw__quarantine"), by_id(f"{SF}.dw__quarantine")
    assert set(dbt) == {1, 6, 9} and set(sf) == {1, 9}
    assert {r["reason"] for r in dbt.values()} == {"dim_missing"}
    only_dbt = rows(spark, f"{DBT}.dw__quarantine") - rows(spark, f"{SF}.dw__quarantine")
    six = {k: v for k, v in dbt[6].items() if k != "id"} | {"origin": "commit_log@v"}
    assert only_dbt == Counter({tuple(six[c] for c in sorted(six)): 1})
    assert rows(spark, f"{SF}.dw__quarantine") <= rows(spark, f"{DBT}.dw__quarantine")
    assert str(dbt[9]["ingest_time"]) == "None" and str(dbt[1]["ingest_time"]) == "2026-10-31 10:00:05"
    assert rows(spark, f"{DBT}.dw") == rows(spark, f"{SF}.dw") == rows(spark, f"{DBT}.d")
    log = (built / "logs" / "dbt.log").read_text()
    assert "model dw: under dbt the dim_missing rows" in log
    assert "model d: under dbt" not in log


@pytest.mark.parametrize("table", ["m", "m__quarantine", "d", "d__quarantine", "sv", "sv__quarantine"])
def test_dbt_and_sqlflow_write_the_same_rows(spark, built, table):
    assert rows(spark, f"{DBT}.{table}") == rows(spark, f"{SF}.{table}")


def test_dbt_leaves_no_clean_or_ready_view_behind(spark, built):
    assert not [t for t in table_names(spark, temporary=True)
                if "__sqlflow_clean__" in t or "__sqlflow_ready" in t]
