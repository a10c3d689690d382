"""Shared kit of the Spark runtime tests over the ad sources (impressions, clicks): row
builders, the edge cases of the interval-join contract, random rows, arrival in chunks, and a
fixture body that builds the same models as a batch project and a stream project."""

from __future__ import annotations

import dataclasses
import random
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

from helpers import ad_sources_yml, make_project
from rowdiff import row_diff
from sqlflow.compiler import compile_project
from sqlflow.engine.context import Context
from sqlflow.runtime.batch import run_batch

UTC = timezone.utc
DAY1 = datetime(2026, 11, 1, tzinfo=UTC)
IMP_SCHEMA = "req_id string, ad_id bigint, imp_ts timestamp, ingest_ts timestamp, dt string"
CLICK_SCHEMA = "req_id string, click_ts timestamp, ingest_ts timestamp, dt string"


def at(day, hh, mm, ss=0, us=0):
    return DAY1 + timedelta(days=day - 1, hours=hh, minutes=mm, seconds=ss, microseconds=us)


def imp(req, ad, ts, ingest=None):
    """An impression row; ingest time defaults to the event time, `dt` is the ingest day."""
    ingest = ingest or ts
    return (req, ad, ts, ingest, (ingest or DAY1).strftime("%Y-%m-%d"))


def click(req, ts, ingest=None):
    ingest = ingest or ts
    return (req, ts, ingest, (ingest or DAY1).strftime("%Y-%m-%d"))


def edge_cases():
    """Bounds to the µs and one µs outside, null keys, duplicates, late, future, no time."""
    imps = [
        imp("lower", 1, at(1, 10, 0)), imp("upper", 1, at(1, 11, 0)),
        imp("below", 1, at(1, 12, 0)), imp("above", 1, at(1, 13, 0)),
        imp(None, 2, at(1, 14, 0)),
        imp("dup", 3, at(1, 15, 0)), imp("dup", 3, at(1, 15, 0)),
        imp("late", 4, at(1, 16, 0), at(1, 16, 10, us=1)),  # 10 min + 1 µs late
        imp("in-time", 4, at(1, 17, 0), at(1, 17, 10)),  # exactly 10 min late: kept
        imp("future", 5, at(1, 18, 5, us=1), at(1, 18, 0)),  # 5 min + 1 µs ahead
        imp("no-time", 5, None, at(1, 19, 0)),
        imp("zero-ad", 0, at(1, 20, 0)),
        imp("midnight", 6, at(1, 23, 55)),
    ]
    clicks = [
        click("lower", at(1, 10, 0)), click("upper", at(1, 11, 20)),
        click("below", at(1, 12, 0) - timedelta(microseconds=1)),
        click("above", at(1, 13, 20, us=1)),
        click(None, at(1, 14, 1)),
        click("dup", at(1, 15, 1)), click("dup", at(1, 15, 1)),
        click("late", at(1, 16, 1)),
        click("in-time", at(1, 17, 1), at(1, 17, 30)),  # itself 19 min late: quarantined
        click("future", at(1, 18, 6)),
        click("midnight", at(2, 0, 10)),
    ]
    return imps, clicks


def random_rows(seed, n=30, keys=20):
    """`n` impressions over two days on `keys` request ids, 0-2 clicks each within 25 minutes,
    ingest times up to 6 minutes early or 12 minutes late (some late, some future)."""
    rnd = random.Random(seed)
    imps, clicks = [], []
    for k in range(n):
        ts = DAY1 + timedelta(microseconds=rnd.randrange(2 * 86_400_000_000))
        req = f"r{k % keys}"
        imps.append(imp(req, rnd.randrange(-1, 3), ts, ts + timedelta(seconds=rnd.randint(-360, 720))))
        for _ in range(rnd.choice([0, 1, 2])):
            cts = ts + timedelta(microseconds=rnd.randrange(25 * 60_000_000))
            clicks.append(click(req, cts, cts + timedelta(seconds=rnd.randint(-360, 720))))
    return imps, clicks


def profiles(schema):
    return f"""\
sqlflow:
  target: local
  outputs:
    local: {{type: spark, method: session, host: NA, schema: {schema}}}
"""


# --- arrival ------------------------------------------------------------------------------------

def call_counter(spark, folder: Path, name: str, returns: str) -> Path:
    """Register `name` as a Python function that returns its argument and appends a byte to
    the returned file each time Spark runs it (the Python workers run on this machine in
    local mode): how often a model's rows were computed. Non-deterministic, so Spark never
    evaluates it twice per row within one plan."""
    from pyspark.sql import functions as F

    calls = folder / f"{name}.calls"
    calls.write_bytes(b"")

    def counted(value, path=str(calls)):
        with open(path, "ab") as f:
            f.write(b"x")
        return value

    spark.udf.register(name, F.udf(counted, returns, useArrow=False).asNondeterministic())
    return calls


def append(spark, table, rows, schema, files=1):
    """One commit of `files` files of consecutive rows (fewer when it has fewer rows): with
    one file, one micro-batch of a `max_files_per_trigger=1` reader."""
    frame = (spark.createDataFrame(rows, schema).coalesce(1) if files == 1
             else spark.createDataFrame(spark.sparkContext.parallelize(rows, files), schema))
    frame.write.format("delta").mode("append").saveAsTable(table)


def chunks(rnd, rows, table, schema):
    """The rows in a random order, cut into random chunks (one commit each)."""
    rows = list(rows)
    rnd.shuffle(rows)
    out = []
    while rows:
        n = rnd.randint(max(1, len(rows) // 3), len(rows))
        out.append((table, rows[:n], schema))
        rows = rows[n:]
    return out


def in_ingest_chunks(rnd, rows, table, schema, most=4):
    """The rows in ingest order (ties shuffled), cut into at most `most` random chunks: one
    commit each, so one micro-batch each of a `one_file_per_batch` run. The cuts are at random
    points; the last chunk takes the rest (uncapped, the chunks shrank to one row each at the
    end: 11 micro-batches of about 5 s for 24 rows)."""
    assert most >= 1, most
    rows = list(rows)
    rnd.shuffle(rows)
    rows.sort(key=lambda r: r[-2])
    out = []
    while rows:
        last = len(out) == most - 1
        n = len(rows) if last else rnd.randint(max(1, len(rows) // 4), max(1, len(rows) // 2))
        out.append((table, rows[:n], schema))
        rows = rows[n:]
    return out


def assert_same(spark, got_table, want_table, drop=()):
    """The same rows as a multiset, every column (minus `drop`), one job (`rowdiff`); not vacuously."""
    got, want = spark.table(got_table).drop(*drop), spark.table(want_table).drop(*drop)
    diff = row_diff(want, got)
    assert diff.equal, f"{got_table}: missing {diff.missing}, unexpected {diff.extra}"
    assert diff.want_rows > 0


# --- the same models as a batch project and a stream project --------------------------------------

@dataclasses.dataclass
class Setup:
    ods: str
    batch: Context
    stream: Context
    batch_plans: dict
    stream_plans: dict

    def truth(self, model):
        """Run the batch plan; its sink and quarantine tables."""
        run_batch(self.batch, self.batch_plans[model])
        return self.batch_plans[model].sink.table, self.batch_plans[model].quarantine

    def one_file_per_batch(self, model):
        plan = self.stream_plans[model]
        return dataclasses.replace(plan, sources=tuple(
            dataclasses.replace(b, max_files_per_trigger=1) for b in plan.sources))


def setup_projects(spark, tmp_path: Path, request, prefix: str, models: dict):
    """Fixture body: empty `imps`/`clicks` Delta sources in a fresh schema, `models` compiled as
    a batch project and a stream project writing two more schemas; all dropped afterwards."""
    name = prefix + re.sub(r"\W", "_", request.node.name.removeprefix("test_"))[-24:]
    ods, dw_b, dw_s = f"{name}_ods", f"{name}_b", f"{name}_s"
    for db in (ods, dw_b, dw_s):
        spark.sql(f"DROP DATABASE IF EXISTS {db} CASCADE")
    spark.sql(f"CREATE DATABASE {ods}")
    spark.createDataFrame([], IMP_SCHEMA).write.format("delta").saveAsTable(f"{ods}.imps")
    spark.createDataFrame([], CLICK_SCHEMA).write.format("delta").saveAsTable(f"{ods}.clicks")
    contexts, plans = [], []
    for schema, mode in ((dw_b, "batch"), (dw_s, "stream")):
        root = make_project(tmp_path / mode, models=models, yml={"sources.yml": ad_sources_yml(ods)},
                            profiles_yml=profiles(schema))
        ctx = Context.with_session(spark, root)
        result = compile_project(root, mode=mode, target=ctx.target)
        result.raise_if_errors()
        contexts.append(ctx)
        plans.append(result.plans)
    yield Setup(ods, contexts[0], contexts[1], plans[0], plans[1])
    for db in (ods, dw_b, dw_s):
        spark.sql(f"DROP DATABASE IF EXISTS {db} CASCADE")


def batch_project(spark, tmp_path: Path, ods: str, dw: str, models: dict):
    """Fixture body: fresh `ods` and `dw` schemas, an empty `clicks` source, `models` in a
    project writing `dw`; both schemas dropped afterwards. The test loads `imps` itself."""
    for db in (ods, dw):
        spark.sql(f"DROP DATABASE IF EXISTS {db} CASCADE")
        spark.sql(f"CREATE DATABASE {db}")
    spark.createDataFrame([], CLICK_SCHEMA).write.format("delta").saveAsTable(f"{ods}.clicks")
    yield make_project(tmp_path, models=models, yml={"sources.yml": ad_sources_yml(ods)},
                       profiles_yml=profiles(dw))
    for db in (ods, dw):
        spark.sql(f"DROP DATABASE IF EXISTS {db} CASCADE")


def held_in_spark(monkeypatch) -> None:
    """Have a running query hold its older rows in Spark's caches, as on a cluster target,
    rather than on the driver looked up by key (`runtime.incremental.keyed`), which the
    embedded `local` target of these tests would otherwise do."""
    from sqlflow.runtime.incremental import microbatch

    monkeypatch.setattr(microbatch, "_embedded", lambda spark: False)


def own_file_reads(monkeypatch) -> list[tuple[int, int]]:
    """The (batch id, input index) of every micro-batch input whose new rows were read from
    the input's own data files (`MicroBatch._own_rows`), appended as the query runs."""
    from sqlflow.runtime.incremental import microbatch

    own: list[tuple[int, int]] = []
    own_rows = microbatch.MicroBatch._own_rows

    def spied(self, spark, batch_id, k):
        found = own_rows(self, spark, batch_id, k)
        if found is not None:
            own.append((batch_id, k))
        return found

    monkeypatch.setattr(microbatch.MicroBatch, "_own_rows", spied)
    return own
