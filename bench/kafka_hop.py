"""What the archive hop costs: end-to-end latency of a model over a Kafka source (the topic
archived to Delta by one query, the model reading the archive) against the same model over a
Delta source appended directly, side by side in one process (docs/semantics.md, "Kafka
sources": models read the archive).

    .venv/bin/python bench/kafka_hop.py [--rate 200] [--seconds 20] [--trigger "1 second"]
                                        [--rounds 2]

The demo's `stg_ad_clicks` runs as the stream service does with an interval trigger. A
producer thread sends `--rate` click records per second for `--seconds` (every `--tick`
seconds) either to the Kafka topic `ad_click` (a broker this script starts on a free port,
state in a temp folder) or, for the baseline, as Delta appends to the source table. Latency of
a record = the moment the sink commit holding it became visible (the mtime of the sink's
`_delta_log/<version>.json`) - the moment the producer's send (flush) or append returned; for
Kafka also the moment its archive commit became visible, so the hop's share is printed.
Each round runs Kafka then Delta; the printed ratios are per round and their median. A
benchmark, not a test: nothing here asserts a time. Last line, machine-readable:

    kafka_hop: kafka_p50=<s> delta_p50=<s> archive_p50=<s> ratio_p50=<x>
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from latency import _pct, commit_times  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MODEL = "stg_ad_clicks"
SOURCE = "ods.ods_ad_clicks"


def copy_project(folder: Path, kafka: bool) -> Path:
    folder.mkdir(parents=True)
    for name in ("dbt_project.yml", "models", "macros", "profiles", "udfs"):
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, folder / name)
    if not kafka:  # the same sources, read as the Delta tables they are: no `kafka:` binding
        path = folder / "models" / "sources.yml"
        doc = yaml.safe_load(path.read_text())
        for source in doc["sources"]:
            for table in source.get("tables", []):
                table.get("config", {}).get("meta", {}).get("sqlflow", {}).pop("kafka", None)
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return folder


def record(tick: int, i: int, now: float) -> dict:
    ts = datetime.fromtimestamp(now, timezone.utc)
    return {"req_id": f"{tick}-{i}", "ad_id": 1, "user_id": 1,
            "click_ts": ts.isoformat().replace("+00:00", "Z"),
            "dt": ts.strftime("%Y-%m-%d"), "hour": ts.strftime("%H")}


class Producer(threading.Thread):
    """Sends `rate` records per second for `seconds`; `done[tick]` = when the tick's records
    were acknowledged (Kafka flush) or committed (Delta append)."""

    def __init__(self, send, rate: int, seconds: float, tick: float) -> None:
        super().__init__(daemon=True)
        self.send, self.rate, self.seconds, self.tick = send, rate, seconds, tick
        self.done: dict[int, float] = {}
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            per_tick = max(1, int(self.rate * self.tick))
            began, tick = time.time(), 0
            while time.time() - began < self.seconds:
                if (wait := began + tick * self.tick - time.time()) > 0:
                    time.sleep(wait)
                now = time.time()
                self.send([record(tick, i, now) for i in range(per_tick)], now)
                self.done[tick] = time.time()
                tick += 1
        except BaseException as exc:  # reported by the run
            self.error = exc


def visible_by_req(spark, table: str) -> dict[str, float]:
    """req_id -> when the commit that added its row became visible."""
    from urllib.parse import unquote

    from pyspark.sql import functions as F

    times = commit_times(spark, table)
    rows = spark.table(table).select("req_id", F.col("_metadata.file_path").alias("f")).collect()
    return {r["req_id"]: times[unquote(r["f"]).rsplit("/", 1)[-1]] for r in rows
            if r["req_id"] and unquote(r["f"]).rsplit("/", 1)[-1] in times}


def one_run(ctx, kafka: bool, args, address: str | None) -> dict[str, list[float]]:
    from rich.console import Console

    from sqlflow.compiler import compile_project
    from sqlflow.workflows.run import run_stream_plans

    spark = ctx.spark
    plans = compile_project(ctx.project_dir, mode="stream", target=ctx.target)
    plans.raise_if_errors()
    plan = plans.plans[MODEL]
    if kafka:
        from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=address, linger_ms=0)

        def send(values, now):
            for v in values:
                producer.send("ad_click", json.dumps(v).encode(), timestamp_ms=int(now * 1000))
            producer.flush()
    else:
        schema = spark.table(SOURCE).schema

        def send(values, now):
            ingest = datetime.fromtimestamp(now, timezone.utc).replace(tzinfo=None)
            rows = [(v["req_id"], v["ad_id"], v["user_id"],
                     datetime.fromisoformat(v["click_ts"].replace("Z", "+00:00")).replace(tzinfo=None),
                     ingest, v["dt"], v["hour"]) for v in values]
            spark.createDataFrame(rows, schema).write.format("delta").mode("append").saveAsTable(SOURCE)
    # the first record makes the topic / table and the query exist before the clock starts
    send([record(-1, 0, time.time())], time.time())
    stop = threading.Event()
    out = io.StringIO()
    runner = threading.Thread(target=run_stream_plans, daemon=True, kwargs=dict(
        ctx=ctx, plans=[plan], out=Console(file=out, width=200), trigger=args.trigger, stop=stop))
    runner.start()
    deadline = time.monotonic() + 600
    while not spark.catalog.tableExists(plan.sink.table) and time.monotonic() < deadline:
        time.sleep(0.5)
    time.sleep(3 * _seconds(args.trigger))
    prod = Producer(send, args.rate, args.seconds, args.tick)
    prod.start()
    prod.join()
    wanted = {f"{t}-0" for t in prod.done}
    while time.monotonic() < deadline:  # until every tick's first record is in the sink
        seen = {r[0] for r in spark.table(plan.sink.table).select("req_id").collect()}
        if wanted <= seen:
            break
        time.sleep(1)
    stop.set()
    runner.join(timeout=300)
    if prod.error:
        raise prod.error
    sink = visible_by_req(spark, plan.sink.table)
    archive = visible_by_req(spark, SOURCE) if kafka else {}
    lat: dict[str, list[float]] = {"sink": [], "archive": []}
    for req, seen in sink.items():
        tick = int(req.rsplit("-", 1)[0])
        if tick in prod.done:
            lat["sink"].append(seen - prod.done[tick])
            if req in archive:
                lat["archive"].append(archive[req] - prod.done[tick])
    return lat


def _seconds(trigger: str) -> float:
    value, _, unit = trigger.strip().partition(" ")
    return float(value) * (60 if unit.startswith("min") else 1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--trigger", default="1 second")
    parser.add_argument("--tick", type=float, default=0.5)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    from sqlflow.engine import broker
    from sqlflow.engine.context import Context

    folder = Path(tempfile.mkdtemp(prefix="sqlflow_kafka_hop_"))
    port = broker.free_port()
    started = broker.start(folder / "kafka", port)
    os.environ["SQLFLOW_KAFKA_BOOTSTRAP"] = started.address
    ratios, k50, d50, a50 = [], [], [], []
    try:
        base = Context.discover(copy_project(folder / "p0", kafka=True), target_name="kafka")
        spark = base.spark
        spark.sparkContext.setLogLevel("ERROR")
        for r in range(args.rounds):
            for kafka in (True, False):
                project = copy_project(folder / f"p{r}_{int(kafka)}", kafka=kafka)
                for db in ("ods", "dw"):
                    spark.sql(f"DROP DATABASE IF EXISTS {db} CASCADE")
                if not kafka:  # the source table, empty
                    spark.sql("CREATE DATABASE ods")
                    spark.sql(f"CREATE TABLE {SOURCE} (req_id STRING, ad_id BIGINT, user_id BIGINT, "
                              "click_ts TIMESTAMP, ingest_ts TIMESTAMP, dt STRING, hour STRING) "
                              "USING delta PARTITIONED BY (dt, hour)")
                else:  # a fresh topic each round
                    from kafka import KafkaAdminClient

                    admin = KafkaAdminClient(bootstrap_servers=started.address)
                    if "ad_click" in admin.list_topics():
                        admin.delete_topics(["ad_click"])
                        time.sleep(2)
                    admin.close()
                ctx = Context.with_session(spark, project, "kafka")
                lat = one_run(ctx, kafka, args, started.address)
                p50, p99 = _pct(lat["sink"], 0.5), _pct(lat["sink"], 0.99)
                what = "kafka (archive, then model)" if kafka else "delta source"
                extra = f", archive p50 {_pct(lat['archive'], 0.5):.2f}s" if kafka else ""
                print(f"round {r + 1} {what}: {len(lat['sink'])} records, p50 {p50:.2f}s "
                      f"p99 {p99:.2f}s{extra}", flush=True)
                if kafka:
                    k50.append(p50)
                    a50.append(_pct(lat["archive"], 0.5))
                else:
                    d50.append(p50)
            ratios.append(k50[-1] / d50[-1])
            print(f"round {r + 1}: kafka / delta p50 {ratios[-1]:.2f}x", flush=True)
    finally:
        broker.stop(folder / "kafka")
        shutil.rmtree(folder, ignore_errors=True)
    print(f"kafka_hop: kafka_p50={statistics.median(k50):.3f} delta_p50={statistics.median(d50):.3f} "
          f"archive_p50={statistics.median(a50):.3f} ratio_p50={statistics.median(ratios):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
