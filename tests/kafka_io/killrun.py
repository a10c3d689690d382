"""The process `test_kill.py` kills: `python killrun.py <stream root> <batch root> <broker> stream|check`.

`stream`: archive the Kafka source and run `stg_clicks` as a stream (`available-now`).
`check`: the same, then the batch plan over the archive, and print one JSON line with the rows
of the stream's sink and quarantine that the batch's lack (`missing`) or do not have (`extra`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from sqlflow.compiler import compile_project
from sqlflow.engine.context import Context
from sqlflow.project.load import load_project
from sqlflow.runtime import dispatch
from sqlflow.runtime.kafka.archive import archive


def main(stream_root: Path, batch_root: Path, servers: str, what: str) -> None:
    ctx = Context.discover(stream_root)
    table = next(t for t in load_project(stream_root).sources.values() if t.kafka)
    archive(ctx.spark, stream_root, [table], servers)
    stream = compile_project(stream_root, mode="stream", target=ctx.target)
    stream.raise_if_errors()
    dispatch.run_stream(ctx, stream.plans["stg_clicks"])
    if what != "check":
        return
    bctx = Context.with_session(ctx.spark, batch_root)
    batch = compile_project(batch_root, mode="batch", target=bctx.target)
    batch.raise_if_errors()
    list(dispatch.run_batch(bctx, batch.plans["stg_clicks"]))
    out = {}
    for kind in ("sink", "quarantine"):
        got_t, want_t = [p.sink.table if kind == "sink" else p.quarantine
                         for p in (stream.plans["stg_clicks"], batch.plans["stg_clicks"])]
        got, want = ctx.spark.table(got_t), ctx.spark.table(want_t)
        out[kind] = {"missing": len(want.exceptAll(got).collect()),
                     "extra": len(got.exceptAll(want).collect()), "rows": want.count()}
    archived = ctx.spark.table(f"{table.schema}.{table.identifier}")
    out["archive"] = {"rows": archived.count(),
                      "distinct": archived.select("_kafka_partition", "_kafka_offset").distinct().count()}
    print("RESULT " + json.dumps(out))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], sys.argv[4])
