"""Named points where the fault catalogue kills a `sqlflow run` (docs/semantics.md, "Faults:
what is guaranteed, what is refused, what an operator does").

With `SQLFLOW_FAULT=<point>:<batch>` in its environment, a run that reaches `point` (for
micro-batch `batch`; a batch run's points have batch 0) writes its pid to the file named by
`SQLFLOW_FAULT_FILE` and waits there: the test then sends SIGKILL to its process group, the
way an operator's `kill -9` or a lost machine stops it, at a moment it knows. Without the
variable (every real run) `reached` does nothing.

| point          | reached right after                                                       |
|----------------|---------------------------------------------------------------------------|
| `sink`         | a micro-batch's sink write (incremental), a target's write (routed group) |
| `state`        | a micro-batch's state appends (incremental)                               |
| `commit_log`   | a micro-batch's commit-log append (incremental), a routed batch's commit  |
| `spark_commit` | Spark's `commits/<batch>` file: when the next micro-batch begins           |
| `batch_sink`   | a backfill's sink write, before its commit-log rows                        |
"""

from __future__ import annotations

import os
import time

ENV = "SQLFLOW_FAULT"
FILE_ENV = "SQLFLOW_FAULT_FILE"
POINTS = ("sink", "state", "commit_log", "spark_commit", "batch_sink")


def reached(point: str, batch: int = 0) -> None:
    """Stop here for the kill when `SQLFLOW_FAULT` names this point and batch (module doc)."""
    wanted = os.environ.get(ENV)
    if not wanted or wanted != f"{point}:{batch}":
        return
    with open(os.environ[FILE_ENV], "w") as out:
        out.write(str(os.getpid()))
    while True:  # until the kill
        time.sleep(1)
