"""When an archive checkpoint's offsets are no longer on the broker (docs/semantics.md, "Kafka
sources: offsets gone from the broker").

Spark's Kafka connector runs with `failOnDataLoss=true`: a checkpoint whose offsets the
broker no longer holds (the topic was deleted and recreated, or retention removed records
before they were archived) fails the archive query instead of skipping anything. sqlflow turns
that failure into an error naming each partition, where the checkpoint stands and what the
broker holds, and the operator's choice, `sqlflow run --mode stream --reset-offsets
earliest|latest`:

- `earliest`: each lost partition is archived from the first offset the broker holds (a
  recreated topic: every record it holds now; after retention: the records still there);
- `latest`: each lost partition skips every record it holds now and archives only newer ones.

A partition whose position is still on the broker resumes exactly where it stood, so no
record is archived twice; a partition the checkpoint never saw starts at its first offset, as
Spark starts a partition it discovers. The old checkpoint is moved aside (never deleted) and a
new archive query starts from these offsets; its journal is new, its app id too.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from pyspark.sql import SparkSession

from sqlflow.errors import Location, SqlflowError
from sqlflow.project.sources import SourceTable
from sqlflow.runtime import offsets
from sqlflow.runtime.delta import sink_truth
from sqlflow.runtime.query import query_id

RESETS = ("earliest", "latest")
_SPARK = {"earliest": -2, "latest": -1}  # Spark's JSON `startingOffsets` per partition
_LOSS = ("not available in Kafka any more", "offset was changed from", "Cannot fetch offset")


def is_data_loss(error: BaseException | str) -> bool:
    """The archive query failed because its offsets are gone from the broker.

    >>> is_data_loss("Some data may have been lost because they are not available in Kafka any more")
    True
    >>> is_data_loss("TimeoutException: Timed out waiting for a node assignment")
    False
    """
    text = str(error)
    return any(s in text for s in _LOSS)


@dataclass(frozen=True)
class Partition:
    """One partition of the topic: where the checkpoint stands (the next offset to archive;
    None: it never saw the partition) and what the broker holds, `[first, end)`."""

    partition: int
    position: int | None
    first: int
    end: int

    @property
    def lost(self) -> bool:
        """The position is not on the broker: the connector cannot resume there."""
        return self.position is not None and not self.first <= self.position <= self.end

    def describe(self, how: str | None = None) -> str:
        """What the partition's state means, and with `how` what a reset does with it.

        >>> Partition(0, 5, 0, 2).describe()
        'partition 0: archived up to offset 5, the broker holds offsets 0..1 (the topic was recreated)'
        >>> Partition(0, 5, 0, 2).describe("latest")
        'partition 0: archived up to offset 5, the broker holds offsets 0..1 (the topic was recreated); latest skips 2 records'
        >>> Partition(1, 3, 9, 12).describe("earliest")
        'partition 1: archived up to offset 3, the broker holds offsets 9..11 (retention removed offsets 3..8 before they were archived: lost); earliest archives 3 records'
        """
        held = f"offsets {self.first}..{self.end - 1}" if self.end > self.first else "no records"
        if self.position is None:
            state = f"partition {self.partition}: new, the broker holds {held}"
        else:
            state = f"partition {self.partition}: archived up to offset {self.position}, the broker holds {held}"
        if self.position is not None and self.position > self.end:
            state += " (the topic was recreated)"
        elif self.position is not None and self.position < self.first:
            state += f" (retention removed offsets {self.position}..{self.first - 1} before " \
                     f"they were archived: lost)"
        if how is None or not self.lost:
            return state
        n = self.end - self.first
        verb = "archives" if how == "earliest" else "skips"
        return f"{state}; {how} {verb} {n:,} record{'s' if n != 1 else ''}"


def position(spark: SparkSession, checkpoint: Path, archive: str, app: str) -> dict[int, int]:
    """Per partition, the next offset the checkpoint would archive: the end of the newest
    micro-batch Spark committed, or of a newer one the archive holds (its marker), so no
    record the archive holds is archived again after a reset."""
    batch = sink_truth.committed_batch(checkpoint)
    held = [h.batch for h in sink_truth.held(spark, [archive], (app,), batch)]
    batch = max([batch, *held])
    path = checkpoint / "offsets" / str(batch)
    if batch < 0 or not path.is_file():
        return {}
    out: dict[int, int] = {}
    for line in path.read_text().splitlines()[2:]:
        try:
            topics = json.loads(line)
        except ValueError:
            continue
        for parts in topics.values() if isinstance(topics, dict) else ():
            out.update({int(p): int(o) for p, o in parts.items()})
    return out


def broker_partitions(servers: str, topic: str, stands: dict[int, int],
                      timeout_s: float = 20.0) -> list[Partition]:
    """The topic's partitions on the broker with the checkpoint's `stands` beside them; a
    partition the broker no longer has is lost with nothing held (`first = end = 0`)."""
    from kafka import KafkaConsumer, TopicPartition

    ms = int(timeout_s * 1000)
    consumer = KafkaConsumer(bootstrap_servers=[s.strip() for s in servers.split(",")],
                             request_timeout_ms=ms + 1000, enable_auto_commit=False)
    try:
        ids = sorted(consumer.partitions_for_topic(topic) or ())
        tps = [TopicPartition(topic, p) for p in ids]
        first = consumer.beginning_offsets(tps) if tps else {}
        end = consumer.end_offsets(tps) if tps else {}
    finally:
        consumer.close()
    out = [Partition(p, stands.get(p), first[tp], end[tp]) for p, tp in zip(ids, tps, strict=True)]
    out += [Partition(p, o, 0, 0) for p, o in sorted(stands.items()) if p not in ids]
    return out


def starting_offsets(topic: str, parts: list[Partition], how: str) -> str:
    """Spark's `startingOffsets` JSON for the new archive query: each partition at its
    position, a lost one at `how`, a new one at the earliest.

    >>> starting_offsets("t", [Partition(0, 5, 0, 2), Partition(1, 4, 0, 9), Partition(2, None, 0, 1)], "latest")
    '{"t": {"0": -1, "1": 4, "2": -2}}'
    """
    if how not in RESETS:
        raise ValueError(f"--reset-offsets is one of {', '.join(RESETS)}")
    where = {}
    for p in parts:
        if p.lost:
            if p.end == p.first == 0 and p.position is not None:
                continue  # the partition is gone from the broker: nothing to read
            where[str(p.partition)] = _SPARK[how]
        else:
            where[str(p.partition)] = _SPARK["earliest"] if p.position is None else p.position
    return json.dumps({topic: where})


def partitions(spark: SparkSession, table: SourceTable, checkpoint: Path, archive: str,
               servers: str) -> list[Partition] | None:
    """The topic's partitions beside the checkpoint's position; None when the checkpoint has
    none yet or the broker cannot be asked (Spark's connector then decides)."""
    assert table.kafka is not None
    if not has_position(checkpoint):
        return None
    try:
        app = f"kafka:{table.key}@{query_id(checkpoint)}"
        return broker_partitions(servers, table.kafka.topic,
                                 position(spark, checkpoint, archive, app))
    except Exception:  # no answer, or a broker the plain client cannot reach: Spark decides
        return None


def reset(spark: SparkSession, table: SourceTable, checkpoint: Path, archive: str, servers: str,
          how: str) -> tuple[str, tuple[str, ...]] | None:
    """`--reset-offsets how`: when a partition's position is gone from the broker, move the
    checkpoint aside and return the new query's starting offsets and what they do; None when
    every position is on the broker (the run resumes as it would without the flag)."""
    assert table.kafka is not None
    parts = partitions(spark, table, checkpoint, archive, servers)
    if not parts or not any(p.lost for p in parts):
        return None
    moved = move_aside(checkpoint)
    lines = tuple(p.describe(how) for p in parts if p.lost)
    return (starting_offsets(table.kafka.topic, parts, how),
            (*lines, f"the old checkpoint is kept at {moved}"))


def offsets_gone(table: SourceTable, checkpoint: Path, parts: list[Partition] | None,
                 cause: BaseException | None = None) -> SqlflowError:
    """The error of an archive whose checkpoint's offsets are gone from the broker: each lost
    partition, and what `--reset-offsets earliest|latest` would archive or skip."""
    assert table.kafka is not None
    lost = [p for p in parts or () if p.lost]
    detail = "; ".join(p.describe() for p in lost) or \
        next((ln.strip() for ln in str(cause).splitlines() if ln.strip().startswith("Reason:")),
             "Spark's Kafka connector reports data loss")
    n = sum(p.end - p.first for p in lost)
    return SqlflowError(
        f"Kafka source `{table.key}` (topic `{table.kafka.topic}`): the archive checkpoint's "
        f"offsets are no longer on the broker ({detail}); nothing was skipped",
        location=Location(table.path, table.line),
        hint=f"choose and run again: `sqlflow run --mode stream --reset-offsets earliest` "
             f"archives each lost partition from the first record the broker holds "
             f"({n:,} records now), `--reset-offsets latest` skips them and archives only newer "
             f"records; partitions still on the broker resume where they stood, and the old "
             f"checkpoint `{checkpoint}` is kept aside")


def move_aside(checkpoint: Path, now: datetime | None = None) -> Path:
    """Move the old checkpoint to `<folder>.reset-<UTC time>` (kept for inspection)."""
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%SZ")
    target = checkpoint.with_name(f"{checkpoint.name}.reset-{stamp}")
    shutil.move(str(checkpoint), str(target))
    return target


def has_position(checkpoint: Path) -> bool:
    """The checkpoint planned a micro-batch: it has a position on the topic."""
    return offsets.next_batch(checkpoint) > 0
