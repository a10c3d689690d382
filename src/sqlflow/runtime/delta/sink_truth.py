"""The tables a stream query writes hold the truth about what it wrote (docs/semantics.md,
"Exactly once, when the checkpoint is damaged").

Every exactly-once append carries its marker in its Delta commit (`once.marker`: the app and
the batch id; an older append also Delta's `txn`). The checkpoint's journal (`sqlflow_once/`)
only says where to look for it. When a query starts on an existing checkpoint, `reconcile`
reads the newest markers of this query in each table it writes (sink, quarantine, state and
progress tables, routed targets, the commit log) from `_delta_log` (no Spark job on a local
table) and compares them with the checkpoint:

- a marker of a batch after the last one Spark committed (`commits/`) is a batch the restart
  will replay: the journal gets (back) its record of that append, so the replay finds the
  commit and skips it, whether the journal was lost, partly restored or behind (a journal
  re-created after a loss decides from that batch on, not from the next unplanned one);
- a marker of a batch the checkpoint's offsets never planned means the checkpoint is older
  than the table (a backup restored over a newer one): resuming would write those batches
  again, so the query is refused, naming both and the way out.

The scan walks each table's log back from its newest commit until it meets a marker of this
query at or before the last committed batch (the replay window is behind it), at most
`LOOK_BACK` commits.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession

from sqlflow.errors import Location, SqlflowError
from sqlflow.runtime import offsets
from sqlflow.runtime.delta import deltalog, once

LOOK_BACK = 500  # commits per table: the commit log is shared, other queries append to it too
_CHUNK = 25


@dataclass(frozen=True)
class Held:
    """One exactly-once append of this query that a table holds."""

    table: str
    app: str
    batch: int
    version: int
    txn: bool = False  # the commit also carries Delta's `txn` of it (an append before the journal)

    @property
    def step(self) -> int:
        """The micro-batch the append belongs to (a flush/idle step's id is scaled)."""
        return self.batch // once.CLOSE_STEP if "__close" in self.app else self.batch


def committed_batch(checkpoint: Path) -> int:
    """The last batch id Spark committed (`commits/<id>`), -1 for none."""
    folder = checkpoint / "commits"
    ids = [int(n) for n in os.listdir(folder) if n.isdigit()] if folder.is_dir() else []
    return max(ids, default=-1)


def held(spark: SparkSession, tables: Iterable[str], apps: tuple[str, ...], after: int) -> list[Held]:
    """The appends of the query (apps starting with one of `apps`) each table holds, newer than
    its newest one of a batch at or before `after`."""
    out: list[Held] = []
    for table, info in deltalog.locate(spark, tables).items():
        latest = deltalog.latest_version(spark, table, info.location) if info.format == "delta" else None
        if latest is None:
            continue
        out += _scan(spark, table, info.location, latest, apps, after)
    return out


def _scan(spark, table, location, latest, apps, after) -> list[Held]:
    found: list[Held] = []
    top = latest
    while top >= 0 and latest - top < LOOK_BACK:
        versions = list(range(max(0, top - _CHUNK + 1), top + 1))
        marks = _marks(spark, table, location, versions, apps)
        for h in sorted(marks, key=lambda h: -h.version):
            if h.step <= after:
                return found
            found.append(h)
        top = versions[0] - 1
    return found


def _marks(spark, table, location, versions, apps) -> list[Held]:
    marks: dict[tuple[str, int, int], bool] = {}  # (app, batch, version) -> has a txn
    for version, action in deltalog.commit_actions(spark, location, versions):
        txn = action.get("txn")
        if txn and str(txn.get("appId", "")).startswith(apps):
            marks[(txn["appId"], int(txn["version"]), version)] = True
        mark = _marker((action.get("commitInfo") or {}).get("userMetadata"))
        if mark and str(mark.get("app", "")).startswith(apps):
            marks.setdefault((mark["app"], int(mark["batch"]), version), False)
    return [Held(table, app, batch, version, txn) for (app, batch, version), txn in marks.items()]


def _marker(text: str | None) -> dict | None:
    try:
        value = json.loads(text) if text else None
    except ValueError:
        return None
    return value.get(once.MARK) if isinstance(value, dict) else None


def reconcile(spark: SparkSession, checkpoint: Path, tables: Iterable[str], apps: tuple[str, ...], *,
              what: str, path: str, rebuild: str) -> list[Held]:
    """Compare the checkpoint with what the tables hold (module doc) before the query starts:
    refuse a checkpoint older than a table, and give the journal a record of every append the
    restart will replay. Returns those appends. A damaged checkpoint file Spark would read to
    resume is refused first, naming the file."""
    broken = offsets.damaged(checkpoint)
    if broken is not None:
        file, problem = broken
        raise SqlflowError(
            f"{what}: the checkpoint file `{file}` is damaged: {problem} (cut short by a crash "
            "or a copy, or edited); the query cannot resume from it",
            location=Location(path),
            hint=f"restore the checkpoint folder `{checkpoint}` from a whole copy, or rebuild the "
                 f"model from its input with `{rebuild}`; do not delete the file: a micro-batch "
                 "planned again with other rows would be skipped as already written")
    planned, done = offsets.next_batch(checkpoint) - 1, committed_batch(checkpoint)
    found = held(spark, tables, apps, done)
    ahead = [h for h in found if h.step > planned]
    if ahead:
        newest = max(ahead, key=lambda h: h.step)
        raise SqlflowError(
            f"{what}: the checkpoint `{checkpoint}` is older than table `{newest.table}`: the table "
            f"holds micro-batch {newest.step} of this query (Delta version {newest.version}), the "
            f"checkpoint's offsets end at batch {planned}; resuming would write batches "
            f"{planned + 1}..{newest.step} again (a checkpoint restored from an older copy?)",
            location=Location(path),
            hint=f"restore the checkpoint copy that matches the table, or rebuild the model from "
                 f"its input with `{rebuild}`")
    replay = [h for h in found if done < h.step <= planned]
    if replay:
        journal = once.Journal.open(checkpoint, offsets.next_batch(checkpoint))
        untracked = [h.step for h in replay if not h.txn]  # only the journal can find these
        if untracked:
            journal = journal.lowered(min(untracked))
        for h in replay:
            if not journal.decides(h.step):  # Delta's txn decides it (an older checkpoint)
                continue
            before = journal.recorded(h.app, h.table, h.batch)
            if before is None or before >= h.version:  # lost, or from another timeline
                journal.record(h.app, h.table, h.batch, h.version - 1)
    return replay
