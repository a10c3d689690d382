"""A micro-batch's statistics of one input counted by the job that runs its join, as Spark's
observed metrics (docs/design.md §2.9; `MicroBatch._watched`).

A batch of many new rows (a catch-up's one batch) reads each input's rows once in the job that
computes its join (the count of its output rows, `MicroBatch._few_out`); counting its
statistics first is a second scan of them all, 0.5-0.9 s for a million rows on two cores.
Spark can compute aggregates over the rows a plan node passes while that job runs
(`DataFrame.observe`); they are known when the job returns (Spark completes the observation
before the action returns, in the thread that ran it).

They are trusted only when they can be checked: Spark hands nothing when the plan did not run
the observed rows (adaptive execution skips a join side whose other side is empty), and counts
fewer rows where the plan stopped early. So the caller compares the observed row count with
the row count the input's log gives for the batch, and counts with a job of its own when they
differ or nothing came.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql.observation import Observation


class Watch:
    """The observed aggregates of one frame (`watch`)."""

    def __init__(self, observation: Observation, width: int):
        self.observation, self.width = observation, width  # width: how many aggregates

    def found(self) -> dict[str, Any] | None:
        """The aggregates by name, once a job ran the observed rows through; None when none
        did (or Spark handed an empty row: the rows were not run)."""
        # the JVM observation (PySpark's own attribute): its future says whether it completed
        jo = getattr(self.observation, "_jo", None)
        if jo is None:
            return None
        future = jo.future()
        if not future.isCompleted() or not future.value().get().isSuccess() \
                or jo.getRow().length() != self.width:  # (a failed job's metrics: none)
            return None
        return self.observation.get


def watch(rows: DataFrame, aggs: list[Column]) -> tuple[DataFrame, Watch]:
    """`rows` with `aggs` (aggregate columns, each aliased) computed over them by the first job
    that runs them, and the `Watch` that reads those values."""
    observation = Observation()
    observed = rows.observe(observation, *aggs)
    return observed, Watch(observation, len(aggs))
