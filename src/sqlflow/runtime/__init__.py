"""Run plans on Spark (docs/design.md §3, "The runtime").

- `dispatch`: the one place that picks a runtime for a plan's kind (batch, stream per
  strategy, routed): run, verify, refresh and repair go through it;
- `batch`: the batch runtime, the reference every stream must equal;
- `incremental/`, `stateful/`, `routed/`: the stream runtimes, one package per strategy;
- `delta/`: the shared Delta plumbing (sinks, the Delta log reader, the commit log, the
  exactly-once journal, compaction, ready markers);
- `query`: what every stream query shares (checkpoint, id, refusal, start);
- `streams` and `service`: many models' plans at once (`sqlflow run --mode stream`), each
  stream plan its own region;
- `results`: the values a run returns; the runtime never prints (`sqlflow.report` does).

Nothing is re-exported here: `sqlflow status` reads the service's files through modules of
this package without importing pyspark, so importing the package must stay cheap. Import
`sqlflow.runtime.dispatch` for the entry points.
"""
