"""The idle-timeout step of an `incremental` outer join under the stream service over Spark
Connect: run with the model's query stopped (docs/deploy.md, "The stream service over Connect").

Locally the step (`MicroBatch.idle_check`, docs/semantics.md "Outer interval joins in stream
mode") runs in the service's loop between micro-batches, kept apart from them by the batch
function's lock. Over Connect the server's Python worker runs the micro-batches, and no lock of
this process reaches it. So the service stops the query through its handle, waits until it is
inactive, runs the step here and starts the query again from the same checkpoint. The step's
Spark work goes to the server as any client code does, and its exactly-once bookkeeping is the
end-of-input flush's over Connect: the step is recorded in the progress table first, its sink
write is journaled in the checkpoint's `sqlflow_once/` and marked `<app>__close` (batch id
`batch * 1000000 + seq`), its commit-log rows go in with the same id, and a `done` row follows;
a step a crash cut short is written again by the restart's `redo` (skipped where its commit
is there), and the restart's truth check (`sink_truth`) reads the step's marker as belonging
to the batch it follows, which Spark committed.

A stop costs a query start (a Python worker on the server, the truth check), so `due` says
to stop only when the step would pad:
1. an input brought no rows for `idle_timeout` (`input_activity`: its offsets did not move);
2. no micro-batch is in flight or waiting for its replay (`query.settled`);
3. the step moves a preserved side's cutoff (`MicroBatch.idle_due`, one read of the progress
   table, asked again only once a batch committed or the idle inputs changed since it said no):
   an idle period with nothing to close costs no stop;
4. at most one step per `idle_timeout`: while one side keeps bringing rows and the other is
   idle, every batch moves the cutoff (locally a step follows each batch), and a restart per
   batch would cost more than the batches, so a padded row waits up to twice the timeout.
After the stop `pad` decides again (a batch may have run meanwhile): it may pad nothing.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from sqlflow.planning.plan import StreamPlan
from sqlflow.runtime.input_activity import InputActivity, table_ids
from sqlflow.runtime.query import committed, settled


class RemoteIdle:
    """When the service stops the query of `plan` for an idle step (`due`), and the step run
    while it is stopped (`pad`). Kept across the restarts it causes: the inputs stay idle."""

    def __init__(self, plan: StreamPlan, checkpoint: Path, activity: InputActivity):
        self.checkpoint, self.activity = checkpoint, activity
        self.timeout_s = (plan.idle_timeout_us or 0) / 1e6
        self.padded_at = float("-inf")
        self.said_no: tuple[int, frozenset[str]] | None = None

    @staticmethod
    def of(spark: SparkSession, plan: StreamPlan, checkpoint: Path) -> RemoteIdle:
        relations = [b.relation for b in plan.sources if b.read == "stream"]
        return RemoteIdle(plan, checkpoint, InputActivity(checkpoint, table_ids(spark, relations)))

    def due(self, fn: Any, now: float | None = None) -> bool:
        """Whether to stop the running query for an idle step now (module doc); `fn`: the
        model's `MicroBatch` in this process."""
        now = time.monotonic() if now is None else now
        self.activity.refresh(now)
        idle = self.activity.idle(self.timeout_s, now)
        if not idle or now - self.padded_at < self.timeout_s or not settled(self.checkpoint):
            return False
        key = (committed(self.checkpoint), frozenset(idle))
        if key == self.said_no:
            return False
        if fn.idle_due(idle):
            return True
        self.said_no = key
        return False

    def pad(self, fn: Any) -> Any:
        """The idle step, with the query stopped: its report (also given to `fn`'s callback),
        or None when, after the stop, nothing is idle or settled any more."""
        now = time.monotonic()
        self.activity.refresh(now)
        self.padded_at, self.said_no = now, None
        return fn.idle_check(lambda: settled(self.checkpoint), last_rows=self.activity.last)
