"""Run plans on Spark: the batch runtime (the reference), its Delta sinks and the quarantine.

- `quarantine.split`: the one late/future/malformed rule, used by batch and stream alike;
- `sinks.write`: every Delta write (and the future commit-log append) goes through it;
- `batch.run_batch` / `batch.run_models`: backfill one model / models in plan order;
- `summary`: what `sqlflow run` prints.
"""

from sqlflow.runtime.batch import DateRange, RunResult, run_batch, run_models
from sqlflow.runtime.delta.sinks import BatchId, PartitionWrite, WriteResult, write

__all__ = ["BatchId", "DateRange", "PartitionWrite", "RunResult", "WriteResult", "run_batch",
           "run_models", "write"]
