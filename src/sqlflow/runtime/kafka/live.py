"""Kafka sources archived continuously while the stream service runs (docs/semantics.md,
"Kafka sources": continuous archiving).

With an interval trigger, a stream run first brings every archive up to date (`archive`,
available-now), then keeps one archive query per source running beside the models' queries,
on the run's trigger: each micro-batch appends the newest records to the archive, and the
models, which read the archive as a Delta stream, pick them up at their next micro-batch. The
service's poll loop drives it (`start`, `poll`, `stop`), as a companion of its regions:

- a query that fails on broker trouble is started again from its checkpoint after the
  target's backoff (`Retry`; the journal keeps the replayed micro-batch from being written
  twice), and past the retries it is marked failed while the models keep running on what the
  archive holds;
- a query whose offsets are gone from the broker is marked failed at once with the
  operator's choice (`offset_reset.offsets_gone`): nothing is skipped without the flag.

Each change is reported through `on_event` as a `RegionEvent` named `kafka <source>.<table>`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from sqlflow.project.sources import SourceTable
from sqlflow.runtime.kafka import offset_reset
from sqlflow.runtime.kafka.archive import Append, archive_table, checkpoint_of, reader
from sqlflow.runtime.kafka.retry import Retry
from sqlflow.runtime.query import start_query
from sqlflow.runtime.service import RegionEvent


@dataclass
class _Feed:
    """One source's live archive query and its restarts."""

    table: SourceTable
    append: Append
    query: Any = None
    restarts: int = 0
    restart_at: float | None = None
    failed: str | None = None

    @property
    def name(self) -> str:
        return f"kafka {self.table.key}"


class LiveArchive:
    """The archive queries of one stream service run (see the module)."""

    def __init__(self, spark: SparkSession, project_dir: Path, tables: Sequence[SourceTable],
                 servers: str, trigger: str, retry: Retry,
                 on_event: Callable[[Any], None]) -> None:
        self.spark, self.project_dir, self.servers = spark, Path(project_dir), servers
        self.trigger, self.retry, self.on_event = trigger, retry, on_event
        self.feeds = [_Feed(t, Append(spark, t, checkpoint_of(project_dir, t))) for t in tables]

    def start(self) -> None:
        for feed in self.feeds:
            self._start(feed)

    def _start(self, feed: _Feed) -> None:
        feed.restart_at = None
        feed.query = start_query(reader(self.spark, feed.table, self.servers), feed.append,
                                 name=f"kafka__{feed.table.key}",
                                 checkpoint=checkpoint_of(self.project_dir, feed.table),
                                 trigger=self.trigger)
        self.on_event(RegionEvent(feed.name, "running"))

    def poll(self, now: float | None = None) -> None:
        """Start again what failed on broker trouble once its backoff is over."""
        now = time.monotonic() if now is None else now
        for feed in self.feeds:
            if feed.failed is not None:
                continue
            if feed.restart_at is not None:
                if now >= feed.restart_at:
                    self._start(feed)
                continue
            if feed.query is None or feed.query.isActive:
                continue
            cause = feed.query.exception()
            if cause is None:  # stopped by itself: nothing to restart
                continue
            self._failed(feed, now, cause)

    def _failed(self, feed: _Feed, now: float, cause: BaseException) -> None:
        checkpoint = checkpoint_of(self.project_dir, feed.table)
        if offset_reset.is_data_loss(cause):
            parts = offset_reset.partitions(self.spark, feed.table, checkpoint,
                                            archive_table(feed.table), self.servers)
            err = offset_reset.offsets_gone(feed.table, checkpoint, parts, cause)
            feed.failed = "; ".join(d.format() for d in err.diagnostics)
            self.on_event(RegionEvent(feed.name, "failed", error=feed.failed))
            return
        delay = self.retry.after(cause, self.servers, feed.restarts)
        first = next((ln.strip() for ln in str(cause).splitlines() if ln.strip()), type(cause).__name__)
        if delay is None:
            feed.failed = first
            self.on_event(RegionEvent(feed.name, "failed", error=first))
            return
        feed.restarts += 1
        feed.restart_at = now + delay
        self.on_event(RegionEvent(feed.name, "restarting", error=first, delay=delay))

    def stop(self) -> None:
        for feed in self.feeds:
            if feed.query is not None and feed.query.isActive:
                try:
                    feed.query.stop()
                except Exception:  # a stop that timed out: the batch is replayed, never doubled
                    pass
            if feed.failed is None:
                self.on_event(RegionEvent(feed.name, "stopped"))

    @property
    def rows(self) -> int:
        """Records the live queries archived."""
        return sum(f.append.rows for f in self.feeds)
