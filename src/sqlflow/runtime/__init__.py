"""Run plans on Spark (docs/design.md, "Runtime").

- `dispatch`: the one place that picks a runtime for a plan's kind (batch, stream per
  strategy, routed): run, verify, refresh and repair go through it;
- `batch`: the batch runtime, the reference every stream must equal;
- `incremental/`, `stateful/`, `routed/`: the stream runtimes, one package per strategy;
- `delta/`: the shared Delta plumbing (sinks, the Delta log reader, the commit log, the
  exactly-once journal, compaction, ready markers);
- `query`: what every stream query shares (checkpoint, id, refusal, start);
- `streams`: many models' plans at once (`sqlflow run --mode stream`); `service`: with
  interval triggers, each plan its own region (`restarts`, `heartbeat`, `control`, `metrics`);
- `results`: the values a run returns; the runtime never prints (`sqlflow.report` does).
"""

from sqlflow.runtime.dispatch import run_batch, run_models, run_stream, start_stream
from sqlflow.runtime.results import DateRange, RunResult, StreamResult

__all__ = ["DateRange", "RunResult", "StreamResult", "run_batch", "run_models", "run_stream",
           "start_stream"]
