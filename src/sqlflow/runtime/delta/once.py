"""Exactly-once appends of a stream query without Delta's transaction look-up (docs/design.md §2.9:
"every write is idempotent per batch id").

Delta makes an append idempotent with `txnAppId`/`txnVersion`: it skips a batch id at or below
the last one the table recorded for that app. Delta 4.4 answers that look-up by rebuilding the
table's state (two Spark jobs, about a second), on every write, although only a retry can find
its batch already there: a micro-batch, or a flush step, that a crash interrupted and the
restarted query runs again.

So a query's appends record their attempts in a journal, `<checkpoint>/sqlflow_once/`:

- every append carries a marker in its Delta commit (`commitInfo.userMetadata`,
  `{"sqlflow_once": {"app": ..., "batch": ...}}`);
- before its append, a write records the table's latest version in the journal
  (`<key>.<batch id>`, `key` naming the app and the table; the last `KEEP` per key are kept);
- a write that finds its record is a retry: it reads the table's commits after the recorded
  version (`_delta_log` JSON, no Spark job on a local table) and is skipped when one carries
  its marker or its Delta `txn`.

The record is written before the append, so a crash leaves either no record (the batch never
reached this append) or a record that bounds the commits to search. `find` also serves a
skipped write's report: the commit that already holds the batch's rows.

A checkpoint from before the journal keeps Delta's `txnAppId` for the batch ids its earlier
runs may have attempted (below `Journal.start`, written once when the journal is created).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession

from sqlflow.errors import SqlflowError
from sqlflow.runtime.delta import deltalog

CLOSE_STEP = 1_000_000
"""The write batch id of an outer join's flush or idle step is `batch * CLOSE_STEP + seq`
(`incremental.padding`), so the journal and the start-up check (`sink_truth`) map it back."""

FOLDER = "sqlflow_once"
KEEP = 3
MARK = "sqlflow_once"
_START = "start"


def marker(app_id: str, batch_id: int) -> str:
    """The `userMetadata` of an append of `batch_id` by `app_id`."""
    return json.dumps({MARK: {"app": app_id, "batch": batch_id}}, sort_keys=True)


@dataclass(frozen=True)
class Journal:
    """The attempts of one query's appends. `start`: the first batch id the journal decides;
    ids below it may have been attempted before the journal existed (Delta's `txn` decides)."""

    folder: Path
    start: int

    @staticmethod
    def open(checkpoint: Path, next_batch: int) -> Journal:
        """The query's journal, created on first use: a new query's journal decides from batch
        0, an older checkpoint's from `next_batch`, the first batch id its offsets do not hold."""
        folder = checkpoint / FOLDER
        path = folder / _START
        if path.is_file():
            return Journal(folder, _read(path, lambda text: int(text.strip())))
        folder.mkdir(parents=True, exist_ok=True)
        _write(path, str(next_batch))
        return Journal(folder, next_batch)

    def lowered(self, start: int) -> Journal:
        """The journal deciding from `start` if that is earlier than it does now: a journal
        re-created after a loss must decide the batches the tables show it wrote
        (`sink_truth.reconcile`)."""
        if start >= self.start:
            return self
        _write(self.folder / _START, str(start))
        return Journal(self.folder, start)

    def decides(self, step: int) -> bool:
        """Whether the journal decides writes of batch `step` (else Delta's `txn` does)."""
        return step >= self.start

    def recorded(self, app_id: str, table: str, batch_id: int) -> int | None:
        """The table version an earlier attempt recorded before its append (-1: the table did
        not exist); None when no attempt reached this append."""
        path = self.folder / f"{_key(app_id, table)}.{batch_id}"
        if not path.is_file():
            return None
        return _read(path, lambda text: int(json.loads(text)["before"]))

    def record(self, app_id: str, table: str, batch_id: int, before: int | None) -> None:
        """Record an attempt before its append; keep the newest KEEP records of the key."""
        key = _key(app_id, table)
        _write(self.folder / f"{key}.{batch_id}",
               json.dumps({"app": app_id, "table": table, "batch": batch_id,
                           "before": -1 if before is None else before}))
        ids = sorted(int(n.rsplit(".", 1)[1]) for n in os.listdir(self.folder)
                     if n.startswith(key + ".") and n.rsplit(".", 1)[1].isdigit())
        for old in ids[:-KEEP]:
            (self.folder / f"{key}.{old}").unlink(missing_ok=True)


def done(spark: SparkSession, table: str, batch, before: int | None,
         location: str | None = None) -> int | None:
    """A journaled append's check before it writes (`batch`: a `sinks.BatchId` with its
    journal; `before`: the table's latest version now, None when it does not exist): the
    version of the commit an earlier attempt of the batch made, when the append must be
    skipped; else None, after recording this attempt."""
    journal = batch.journal
    earlier = journal.recorded(batch.app_id, table, batch.batch_id)
    if earlier is None:
        journal.record(batch.app_id, table, batch.batch_id, before)
        return None
    if before is None:
        return None
    return find(spark, table, location, batch.app_id, batch.batch_id, earlier, before)


def options(batch) -> dict[str, str]:
    """The Delta write options of an exactly-once append: its marker, and Delta's `txn` when
    no journal decides the batch."""
    out = {"userMetadata": marker(batch.app_id, batch.batch_id)}
    if batch.journal is None:
        out.update(txnAppId=batch.app_id, txnVersion=str(batch.batch_id))
    return out


def find(spark: SparkSession, table: str, location: str | None, app_id: str, batch_id: int,
         after: int, latest: int | None = None) -> int | None:
    """The version of the commit, after version `after`, that appended `batch_id` of `app_id`
    (its marker, or its Delta `txn` action); None when there is none."""
    if latest is None:
        latest = deltalog.latest_version(spark, table, location)
    if latest is None or latest <= after:
        return None
    if location is None:
        location = deltalog.describe(spark, table).location
    assert location is not None  # a Delta table has a location
    mark = json.loads(marker(app_id, batch_id))
    for version, action in deltalog.commit_actions(spark, location, list(range(after + 1, latest + 1))):
        txn = action.get("txn") or {}
        if txn.get("appId") == app_id and txn.get("version") == batch_id:
            return version
        info = action.get("commitInfo") or {}
        if _parse(info.get("userMetadata")) == mark:
            return version
    return None


def _parse(text: str | None) -> dict | None:
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None


def _read(path: Path, parse):
    """`parse` of the journal file `path`; an unreadable one is an error with a fix (sqlflow
    writes them whole: it was edited or damaged)."""
    try:
        return parse(path.read_text())
    except (ValueError, KeyError, TypeError) as exc:
        raise SqlflowError(
            f"the stream checkpoint's exactly-once journal file `{path}` cannot be read ({exc})",
            hint="restore the checkpoint folder from a backup, or drop the sink table and "
                 "delete the checkpoint folder to rebuild the model from a fresh query") from exc


def _key(app_id: str, table: str) -> str:
    return hashlib.sha1(f"{app_id}\n{table.lower()}".encode()).hexdigest()[:16]


def _write(path: Path, text: str) -> None:
    """Write `path` whole or not at all (a crash leaves the old file or none)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
