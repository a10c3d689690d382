"""The interval join of `dwd_ad_clicks_attributed` in Flink SQL: the peer of bench/interval_join.py.

    .venv-flink/bin/python bench/peers/flink_interval_join.py --inputs DIR --out DIR \\
        --mode streaming|batch [--rounds 2] [--parallelism 2] [--watermark-delay-s 900]

Reads the staging tables from CSV files that bench/interval_join.py exports with Spark
(`DIR/clicks/` and `DIR/impressions/`, header-less, columns in the order of `SOURCES`, null as
`\\N`; by default each table one file sorted by `ingest_ts`, the order its rows arrived in;
with its `--flink-order files` as Spark scans the table) and writes the
join's rows, the model's columns, as CSV into `OUT/<mode>_r<round>/`. The query is the model's:
clicks inner-joined to the impressions of the same `req_id` and `ad_id` with
`i.imp_ts BETWEEN c.click_ts - INTERVAL 20 MINUTES AND c.click_ts`, both ends inclusive.

- `--mode streaming`: an event-time interval join. Flink's watermarks and time attributes are
  milliseconds (TIMESTAMP(3)), the data microseconds: each side gets a millisecond time
  attribute (`*_rt`, the timestamp cast to TIMESTAMP(3)) with a watermark of
  `--watermark-delay-s` behind it (bench/interval_join.py passes allowed lateness + future
  tolerance, the hand-written Spark join's delay), the interval bound is written on those, and
  the same bound on the microsecond columns is the join's residual condition, so the rows are
  the model's exactly while the bound on milliseconds lets Flink drop state. A row that arrives
  behind the watermark is dropped by Flink without a count: compare the rows.
- `--mode batch`: the same query with `execution.runtime-mode = batch` (watermarks unused).

Every round runs the query into a fresh folder; the time is from submitting the INSERT to its
end (the JVM and the table environment start before and are not counted). The last line on
stdout is one JSON object: mode, seconds and rows written per round, the output folder of each.
Imports nothing but the standard library and PyFlink (`apache-flink`, docs/stack.md): it runs
in its own environment. Exits 2 when PyFlink is not installed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

INSTALL = ("PyFlink is not installed for {python}. It cannot share sqlflow's environment "
           "(docs/stack.md, 'apache-flink'); install it into its own:\n"
           "  python3 -m venv .venv-flink && .venv-flink/bin/pip install -r bench/peers/requirements-flink.txt")

SOURCES = {  # table -> (its columns in the CSV's order, with Flink types; the event-time column)
    "clicks": ("req_id STRING, ad_id BIGINT, user_id BIGINT, click_ts TIMESTAMP(6), ingest_ts TIMESTAMP(6)",
               "click_ts"),
    "impressions": ("req_id STRING, ad_id BIGINT, user_id BIGINT, imp_ts TIMESTAMP(6), ingest_ts TIMESTAMP(6)",
                    "imp_ts"),
}
SINK = ("req_id STRING, ad_id BIGINT, user_id BIGINT, click_ts TIMESTAMP(6), ingest_ts TIMESTAMP(6), "
        "imp_ts TIMESTAMP(6), imp_user_id BIGINT, dt STRING, `hour` STRING")
CSV = "'format' = 'csv', 'csv.null-literal' = '\\N'"

# The model's SELECT (models/dwd/dwd_ad_clicks_attributed.sql). The first BETWEEN, on the
# millisecond time attributes, is what Flink reads as the interval join's time bound; it holds
# whenever the second does (a cast to milliseconds keeps `<=` and moves both sides of a
# whole-millisecond interval alike), and the second, on the microsecond columns, is the model's.
QUERY = """
INSERT INTO {sink}
SELECT c.req_id, c.ad_id, c.user_id, c.click_ts, c.ingest_ts, i.imp_ts, i.user_id AS imp_user_id,
       DATE_FORMAT(c.click_ts, 'yyyy-MM-dd') AS dt, DATE_FORMAT(c.click_ts, 'HH') AS `hour`
FROM clicks AS c
JOIN impressions AS i
  ON c.req_id = i.req_id AND c.ad_id = i.ad_id
 AND i.imp_ts_rt BETWEEN c.click_ts_rt - INTERVAL '20' MINUTE AND c.click_ts_rt
 AND i.imp_ts BETWEEN c.click_ts - INTERVAL '20' MINUTE AND c.click_ts
"""


def interval(seconds: int) -> str:
    """A day-time interval literal of `seconds` (a SECOND literal's precision stops at 99).

    >>> interval(900)
    "INTERVAL '0 00:15:00' DAY TO SECOND"
    """
    minutes, s = divmod(seconds, 60)
    hours, m = divmod(minutes, 60)
    days, h = divmod(hours, 24)
    return f"INTERVAL '{days} {h:02}:{m:02}:{s:02}' DAY TO SECOND"


def source_ddl(name: str, folder: Path, delay_s: int) -> str:
    columns, ts = SOURCES[name]
    return (f"CREATE TEMPORARY TABLE {name} ({columns}, {ts}_rt AS CAST({ts} AS TIMESTAMP(3)), "
            f"WATERMARK FOR {ts}_rt AS {ts}_rt - {interval(delay_s)}) "
            f"WITH ('connector' = 'filesystem', 'path' = '{folder.resolve().as_uri()}', {CSV})")


def rows_in(folder: Path) -> int:
    """Rows Flink wrote: lines of every file under `folder` (in-progress files included, so a
    sink that did not commit is counted too)."""
    return sum(sum(1 for _ in p.open("rb")) for p in folder.rglob("*") if p.is_file() and not p.name.endswith(".crc"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inputs", type=Path, required=True, help="folder with clicks/ and impressions/")
    parser.add_argument("--out", type=Path, required=True, help="folder for the rounds' output")
    parser.add_argument("--mode", choices=("streaming", "batch"), required=True)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--parallelism", type=int, default=2, help="Flink's default parallelism (the cores)")
    parser.add_argument("--watermark-delay-s", type=int, default=900,
                        help="watermark delay of both inputs, seconds (streaming)")
    args = parser.parse_args()
    try:
        from pyflink.table import EnvironmentSettings, TableEnvironment
    except ImportError:
        print(INSTALL.format(python=sys.executable), file=sys.stderr)
        return 2

    settings = (EnvironmentSettings.in_streaming_mode() if args.mode == "streaming"
                else EnvironmentSettings.in_batch_mode())
    env = TableEnvironment.create(settings)
    env.get_config().set("parallelism.default", str(args.parallelism))
    for name in SOURCES:
        env.execute_sql(source_ddl(name, args.inputs / name, args.watermark_delay_s))
    rounds = []
    for round_ in range(1, args.rounds + 1):
        out = args.out / f"{args.mode}_r{round_}"
        sink = f"sink_r{round_}"
        env.execute_sql(f"CREATE TEMPORARY TABLE {sink} ({SINK}) WITH ('connector' = 'filesystem', "
                        f"'path' = '{out.resolve().as_uri()}', {CSV})")
        began = time.monotonic()
        env.execute_sql(QUERY.format(sink=sink)).wait()
        seconds = time.monotonic() - began
        rounds.append({"seconds": seconds, "rows": rows_in(out), "out": str(out)})
        print(f"flink {args.mode} round {round_}/{args.rounds}: {seconds:.1f}s, {rounds[-1]['rows']:,} rows",
              file=sys.stderr)
    print(json.dumps({"mode": args.mode, "parallelism": args.parallelism, "rounds": rounds}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
