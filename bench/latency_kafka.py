"""`bench/latency.py --source kafka`: the same latency measure with the model's inputs arriving
as Kafka records (issue 23, item 1: "Delta tables, and Kafka topics").

sqlflow runs the way `sqlflow --target kafka run --mode stream --trigger T` does, in this
process (`workflows.run.run_stream_plans`): each topic archived to its source table by a query
of its own, the staging models `stg_ad_impressions` and `stg_ad_clicks` streamed from the
archives, and `dwd_ad_clicks_attributed` streamed from them. A row's latency therefore spans
three hops (archive, staging, join), each a micro-batch with its Delta commits: what a user of
the Kafka target waits for. The hand-written baseline reads the two topics with Spark's Kafka
source, parses the JSON, and runs the stateful join straight into its Delta sink: one hop, no
archive, no quarantine, nothing a backfill could read again.

A broker is started on a free port, its state in the bench's temp folder. Every run gets topics
of its own (`ad_impression_<n>`, `ad_click_<n>`) and a copy of the project of its own (its
checkpoints), so no run reads another's records. The rows every run wrote are compared with
the batch join of everything its two topics hold (read with Spark's Kafka source as a batch).
"""

from __future__ import annotations

import io
import json
import random
import re
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import yaml

from interval_join import MODEL, joined

STAGING = ("stg_ad_impressions", "stg_ad_clicks")
WARM_UP_TICK = 999_999  # a tick no producer reaches: its rows are in every table, never measured
_SCHEMA = ("req_id STRING, ad_id BIGINT, user_id BIGINT, {ts} TIMESTAMP, dt STRING, hour STRING")
_BATCH = re.compile(rf"^{MODEL} batch \d+: in (?P<ins>.*?); out .*\((?P<s>[\d.]+)s\)\s*$")


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


class Topics:
    """The broker, and a producer that appends a tick's rows to a run's two topics as JSON
    records whose Kafka timestamp is the ingest time (the same rows `latency.Producer` appends
    to Delta: request ids, ads, users and disorder alike)."""

    def __init__(self, folder: Path, seed: int, disorder: float) -> None:
        from kafka import KafkaProducer

        from sqlflow.engine import broker

        self.folder, self.seed, self.disorder = folder / "kafka", seed, disorder
        self.broker = broker.start(self.folder, broker.free_port())
        self.address = self.broker.address
        self.producer = KafkaProducer(bootstrap_servers=self.address, linger_ms=5,
                                      batch_size=256 * 1024, acks=1)
        self.imps, self.clicks = "", ""

    def use(self, n: int) -> tuple[str, str]:
        self.imps, self.clicks = f"ad_impression_{n}", f"ad_click_{n}"
        return self.imps, self.clicks

    def append(self, tick: int, n: int, now: float, click: bool, src: int) -> None:
        """`n` records of one side for `tick` (clicks of the impressions of tick `src`), sent
        and acknowledged (`flush`) before this returns."""
        rand = random.Random(self.seed + tick * 2 + int(click))
        ts, topic = ("click_ts", self.clicks) if click else ("imp_ts", self.imps)
        ingest = datetime.fromtimestamp(now, timezone.utc)
        dt, hour, stamp = ingest.strftime("%Y-%m-%d"), ingest.strftime("%H"), int(now * 1000)
        for i in range(n):
            record = {"req_id": f"{src}-{i}", "ad_id": i % 97, "user_id": i % 1009 + (7 if click else 0),
                      ts: _iso(now - rand.random() * self.disorder), "dt": dt, "hour": hour}
            self.producer.send(topic, json.dumps(record).encode(), timestamp_ms=stamp)
        self.producer.flush()

    def warm_up(self) -> None:
        """One impression and its click before the clock starts: the topics exist, so the
        queries can start on them."""
        now = time.time()
        self.append(WARM_UP_TICK, 1, now, False, WARM_UP_TICK)
        self.append(WARM_UP_TICK, 1, now, True, WARM_UP_TICK)

    def read(self, spark, topic: str, ts: str, *, stream: bool):
        """A topic's records as the model's input rows (the JSON parsed, the Kafka timestamp as
        `ingest_ts`), read as a stream or, from earliest to latest, as a batch."""
        from pyspark.sql import functions as F

        reader = spark.readStream if stream else spark.read
        raw = (reader.format("kafka").option("kafka.bootstrap.servers", self.address)
               .option("subscribe", topic).option("startingOffsets", "earliest").load())
        v = F.from_json(F.col("value").cast("string"), _SCHEMA.format(ts=ts))
        return raw.select(v.alias("v"), F.col("timestamp").alias("ingest_ts")).select(
            "v.req_id", "v.ad_id", "v.user_id", f"v.{ts}", "ingest_ts", "v.dt", "v.hour")

    def truth(self, spark):
        """The batch join of everything the run's two topics hold."""
        return joined(self.read(spark, self.clicks, "click_ts", stream=False),
                      self.read(spark, self.imps, "imp_ts", stream=False))

    def close(self) -> None:
        from sqlflow.engine import broker

        self.producer.close()
        broker.stop(self.folder)


def project_for(folder: Path, imps: str, clicks: str, *,
                copy: Callable[[Path], Path]) -> Path:
    """A copy of the project whose two ad sources read `imps` and `clicks`."""
    folder.mkdir(parents=True)
    project = copy(folder)
    path = project / "models" / "sources.yml"
    doc = yaml.safe_load(path.read_text())
    topics = {"ods_ad_impressions": imps, "ods_ad_clicks": clicks}
    for source in doc["sources"]:
        for table in source.get("tables", []):
            kafka = table.get("config", {}).get("meta", {}).get("sqlflow", {}).get("kafka")
            if kafka is not None and table["name"] in topics:
                kafka["topic"] = topics[table["name"]]
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return project


class Service:
    """sqlflow's stream service over the run's project (archives, staging, the join), started
    in a thread; `drain` waits until the sink holds every row of the batch truth."""

    def __init__(self, spark, project: Path, trigger: str) -> None:
        from rich.console import Console

        from sqlflow.compiler import compile_project
        from sqlflow.engine.context import Context
        from sqlflow.workflows.run import run_stream_plans

        for db in ("ods", "dw"):  # the previous run's archives and models
            spark.sql(f"DROP DATABASE IF EXISTS {db} CASCADE")
        self.spark = spark
        ctx = Context.with_session(spark, project, "kafka")
        plans = compile_project(project, mode="stream", target=ctx.target)
        plans.raise_if_errors()
        chosen = [plans.plans[m] for m in (*STAGING, MODEL)]
        self.table = plans.plans[MODEL].sink.table
        self.out, self.stop = io.StringIO(), threading.Event()
        self.rows: list = []
        self.thread = threading.Thread(target=self._run, daemon=True, args=(
            run_stream_plans, ctx, chosen, Console(file=self.out, width=400), trigger))
        self.thread.start()

    def _run(self, run, ctx, plans, out, trigger) -> None:
        self.rows = run(ctx=ctx, plans=plans, out=out, trigger=trigger, stop=self.stop)

    def wait_started(self, timeout_s: float = 600) -> None:
        deadline = time.monotonic() + timeout_s
        while not self.spark.catalog.tableExists(self.table):
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the stream service did not create the sink: "
                                   + (self.out.getvalue().strip().splitlines() or ["no output"])[-1])
            time.sleep(0.5)

    def drain(self, expected: int, rows_now: Callable[[], int], timeout_s: float) -> None:
        """Until the sink holds `expected` rows (`rows_now()` counts them without a Spark job,
        `latency.sink_rows`: polling must not slow the queries it waits for)."""
        deadline = time.monotonic() + timeout_s
        while rows_now() < expected:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the sink did not reach the batch truth's {expected:,} rows "
                                   f"within {timeout_s:.0f}s")
            time.sleep(1)

    def close(self) -> str | None:
        """Stop the service; its first failed model's error, if any."""
        self.stop.set()
        self.thread.join(timeout=300)
        failed = [r for r in self.rows if getattr(r, "error", None)]
        return f"{failed[0].model}: {failed[0].error}" if failed else None

    def batches(self) -> list[tuple[int, float]]:
        """(input rows, seconds) of each of the join model's micro-batches, from its lines."""
        out = []
        for line in self.out.getvalue().splitlines():
            if m := _BATCH.match(line.strip()):
                rows = sum(int(x.replace(",", "")) for x in re.findall(r"\+([\d,]+)", m["ins"]))
                out.append((rows, float(m["s"])))
        return out


def hand_query(spark, topics: Topics, table: str, checkpoint: Path, trigger: str, lateness: str):
    """The hand-written stateful join reading the two topics directly."""
    clicks = topics.read(spark, topics.clicks, "click_ts", stream=True).withWatermark("click_ts", lateness)
    imps = topics.read(spark, topics.imps, "imp_ts", stream=True).withWatermark("imp_ts", lateness)
    return (joined(clicks, imps).writeStream.format("delta").partitionBy("dt", "hour")
            .outputMode("append").option("checkpointLocation", str(checkpoint))
            .trigger(processingTime=trigger).toTable(table))
