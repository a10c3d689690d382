"""What an `incremental` query reads of its inputs' own Delta logs, without a Spark job, to
plan a small micro-batch small (docs/design.md §2.9):

- `added_bytes`: the bytes of data files a micro-batch's new rows of an input came in, from
  the checksum files Delta writes beside each commit (`tableSizeBytes` at the version the batch
  starts on and at the one it ends on; a stream passes appends only, `sqlflow.runtime.offsets`),
  or, where a writer wrote no checksum (delta-rs, for one), the sizes of the files the batch's
  commits added (at most `SUMMED_COMMITS` of them: a longer batch is no small batch);
  A batch of a few small files is cached as ONE partition: Spark's Delta source gives each
  file a task of its own (every file "costs" `spark.sql.files.openCostInBytes`, 4 MB, when
  it packs them), and each later pass over the cached rows (the stats job, the join, the
  held run) paid one task per file;
- `extent`: where the input's timestamp columns lie at a version (`delta.file_stats`), read
  once per held version, so a micro-batch whose prune ranges reach none of its rows leaves
  the table out of its plan;
- `run_files`: the data files a run of batches inside a version was handed
  (`delta.source_files`), which then need no copy in a state table (`older.Source.files`).

Each input's log folder is asked of the catalog once per query. Over Spark Connect, or for a
table whose log is not a local folder, everything here answers "unknown" and the micro-batch
plans as before.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from pyspark.sql import SparkSession

from sqlflow.runtime import offsets
from sqlflow.runtime.delta import deltalog, file_stats, logfiles, source_files

# a batch whose new files add up to less than the cost Spark charges for opening ONE file
# (`spark.sql.files.openCostInBytes`' default) is one task's work
SMALL_BATCH_BYTES = 4 * 1024 * 1024
SUMMED_COMMITS = 64


class InputLogs:
    """The local `_delta_log` folders of one query's inputs, looked up once."""

    def __init__(self) -> None:
        self._logs: dict[str, str | None] = {}
        self._extents: dict[tuple[str, int, tuple[str, ...]], file_stats.Extent | None] = {}
        self._plain: dict[str, bool] = {}  # `logfiles.plain_columns`, asked once per input
        self._parquet: dict[str, list[str] | None] = {}  # `logfiles.plain_parquet`, the same
        # per input: the last batch's (checkpoint, batch id, index) and `batch_adds` of it
        self._batch_adds: dict[str, tuple[tuple[str, int, int], tuple[Path, list[dict]] | None]] = {}
        self._orders: dict[tuple[str, int], list[dict]] = {}  # `source_files.snapshot_order`
        # per log folder: the last batch's (start, end) versions and `_commit_adds` of them,
        # read once for both `added_bytes` and `new_files`
        self._adds: dict[str, tuple[tuple[int | None, int | None], list[dict] | None]] = {}

    def log(self, spark: SparkSession, relation: str) -> str | None:
        """`relation`'s local `_delta_log` folder (None: not local, or not known)."""
        if relation not in self._logs:
            self.located(spark, relation, deltalog.describe(spark, relation).location)
        return self._logs[relation]

    def located(self, spark: SparkSession, relation: str, location: str | None) -> None:
        """`relation`'s table lies at `location` (the catalog's folder, as found at the
        query's start: `stream.check_plan`)."""
        self._logs[relation] = deltalog.local_log(spark, location)

    def _batch_versions(self, spark: SparkSession, relation: str, checkpoint: Path | None,
                        batch_id: int, k: int) -> tuple[str, offsets.Delivered, offsets.Delivered] | None:
        """Input `k`'s local log folder and the whole versions micro-batch `batch_id` started
        and ended on; None when it started or ended inside one, or the log is not local."""
        if checkpoint is None:
            return None
        start = offsets.start_of(checkpoint, batch_id, k)
        end = offsets.end_of(checkpoint, batch_id, k)
        log = self.log(spark, relation) if start is not None and end is not None else None
        if log is None or start is None or end is None:
            return None
        return log, start, end

    def added_bytes(self, spark: SparkSession, relation: str, checkpoint: Path | None,
                    batch_id: int, k: int) -> int | None:
        """The bytes of the data files micro-batch `batch_id` brought of input `k`
        (`relation`): from the checksums of the versions it starts and ends on, or, when it
        starts or ends inside a version, the sizes of the files `batch_adds` names; None when
        unknown."""
        found = self._batch_versions(spark, relation, checkpoint, batch_id, k)
        if found is None:  # inside a version: the files the log names for the batch, if it does
            named = self.batch_adds(spark, relation, checkpoint, batch_id, k)
            return None if named is None else _summed(named[1])
        log, start, end = found
        before, after = _size(log, start.version), _size(log, end.version)
        if before is not None and after is not None:
            return after - before
        return _summed(self._commit_adds(log, start.version, end.version))

    def new_files(self, spark: SparkSession, relation: str, checkpoint: Path | None,
                  batch_id: int, k: int) -> list[dict] | None:
        """The `add` actions of the data files whose rows micro-batch `batch_id` brought of
        input `k` (`relation`), with their statistics: the table as of its end version when the
        query had delivered nothing of it before, else the files the commits after its start
        version added (`_commit_adds`). None when unknown: the batch starts or ends inside a
        version, the log is not local or not read exactly here (column mapping: its statistics
        name physical columns), or `_commit_adds` says so."""
        found = self._batch_versions(spark, relation, checkpoint, batch_id, k)
        if found is None:
            return None
        log, start, end = found
        if end.version is None or end.version == start.version:
            return []
        table_dir = self._plain_dir(log, relation)
        if table_dir is None:
            return None
        if start.version is not None:
            return self._commit_adds(log, start.version, end.version)
        try:
            return list(logfiles.live_adds(table_dir, end.version).values())
        except (logfiles.Unsupported, OSError, ValueError):
            return None

    def batch_rows(self, spark: SparkSession, relation: str, checkpoint: Path | None,
                   batch_id: int, k: int) -> int | None:
        """How many rows micro-batch `batch_id` brought of input `k` (`relation`), whole
        versions or not: the row counts the input's log records for the files it handed the
        batch (`batch_adds`). None when unknown (`batch_adds`) or a file without a row count."""
        found = self.batch_adds(spark, relation, checkpoint, batch_id, k)
        counts = [(file_stats.stats(add) or {}).get("numRecords") for add in found[1]] if found else []
        if found is None or not all(isinstance(n, int) for n in counts):
            return None
        return sum(counts)  # type: ignore[arg-type]

    def batch_adds(self, spark: SparkSession, relation: str, checkpoint: Path | None,
                   batch_id: int, k: int) -> tuple[Path, list[dict]] | None:
        """The table folder of input `k` (`relation`) and the `add` actions of the data files it
        handed micro-batch `batch_id`, whole versions or not (`source_files.batch_files`,
        between the batch before's end offset and this one's). None when unknown: no local log
        read exactly here, the batch before's offsets gone, an offset that is not a Delta one.
        Read once per input and batch (the stats and the new rows both ask)."""
        key = (str(checkpoint), batch_id, k)
        memo = self._batch_adds.get(relation)
        if memo is None or memo[0] != key:
            memo = self._batch_adds[relation] = (key, self._read_batch_adds(spark, relation, checkpoint, batch_id, k))
        return memo[1]

    def _read_batch_adds(self, spark: SparkSession, relation: str, checkpoint: Path | None,
                         batch_id: int, k: int) -> tuple[Path, list[dict]] | None:
        log = self.log(spark, relation) if checkpoint is not None else None
        table_dir = None if log is None else self._plain_dir(log, relation)
        if table_dir is None or checkpoint is None:
            return None
        ends, befores = offsets.read(checkpoint, batch_id), offsets.read(checkpoint, batch_id - 1)
        end = ends[k] if k < len(ends) else None
        if end is None or (batch_id > 0 and k >= len(befores)):
            return None
        start = befores[k] if batch_id > 0 else None
        if batch_id > 0 and start is None:  # not a Delta offset
            return None
        files = source_files.batch_files(table_dir, start, end, snapshot=self._order(table_dir))
        return None if files is None else (table_dir, [add for _, add in files])

    def plain_parquet(self, spark: SparkSession, relation: str) -> list[str] | None:
        """`relation`'s partition columns when its data files read as plain Parquet give its
        rows (`logfiles.plain_parquet`, asked once per input); None when not."""
        log = self.log(spark, relation)
        if log is None:
            return None
        if relation not in self._parquet:
            self._parquet[relation] = logfiles.plain_parquet(Path(os.path.dirname(log)))
        return self._parquet[relation]

    def run_files(self, spark: SparkSession, relation: str, checkpoint: Path, base: int | None,
                  batch_id: int, k: int) -> list[tuple[int, dict]] | None:
        """The data files input `k` (`relation`) handed the query after the whole version `base`
        (None: from its start) up to the end of micro-batch `batch_id`, each with a version at
        which it is live (`source_files.batch_files`; a run is named whole, however many
        commits it spans); None when unknown (`new_files`)."""
        log = self.log(spark, relation)
        table_dir = None if log is None else self._plain_dir(log, relation)
        ends = offsets.read(checkpoint, batch_id)
        end = ends[k] if k < len(ends) else None
        if table_dir is None or end is None:
            return None
        start = None if base is None else offsets.Offset(base + 1, -1, False)
        return source_files.batch_files(table_dir, start, end, snapshot=self._order(table_dir))

    def _plain_dir(self, log: str, relation: str) -> Path | None:
        """The table folder of `relation`'s local log `log` when its statistics and adds name
        the columns as the rows do (`logfiles.plain_columns`, asked once per input); None:
        column mapping, read nothing exactly here."""
        table_dir = Path(os.path.dirname(log))
        if relation not in self._plain:
            self._plain[relation] = logfiles.plain_columns(table_dir)
        return table_dir if self._plain[relation] else None

    def _order(self, table_dir: Path) -> Callable[[int], list[dict]]:
        """`source_files.snapshot_order` of the table, read once per version (one per table:
        the batches of a snapshot come in a row)."""
        def order(version: int) -> list[dict]:
            key = (str(table_dir), version)
            if key not in self._orders:
                self._orders = {k: v for k, v in self._orders.items() if k[0] != key[0]}
                self._orders[key] = source_files.snapshot_order(table_dir, version)
            return self._orders[key]
        return order

    def _commit_adds(self, log: str, start: int | None, end: int | None) -> list[dict] | None:
        """`_commit_adds`, read once per log folder and batch."""
        memo = self._adds.get(log)
        if memo is None or memo[0] != (start, end):
            memo = self._adds[log] = ((start, end), _commit_adds(log, start, end))
        return memo[1]

    def extent(self, spark: SparkSession, relation: str, version: int,
               columns: tuple[str, ...]) -> file_stats.Extent | None:
        """`relation` as of `version`: where `columns` lie (`file_stats.extent`), asked once
        per version; None when unknown."""
        key = (relation, version, columns)
        if key not in self._extents:
            log = self.log(spark, relation)
            self._extents = {k: v for k, v in self._extents.items() if k[0] != relation}  # one version each
            self._extents[key] = (None if log is None else
                                  file_stats.extent(Path(os.path.dirname(log)), version, list(columns)))
        return self._extents[key]


def _size(log: str, version: int | None) -> int | None:
    """The table's bytes as of `version` (None: before its first commit, 0), from its
    checksum file; None when there is none."""
    if version is None:
        return 0
    size = deltalog.checksum(log, version).get("tableSizeBytes")
    return size if isinstance(size, int) else None


def _summed(adds: list[dict] | None) -> int | None:
    """The bytes of the data files of `adds` (None: unknown, or a size not recorded)."""
    if adds is None:
        return None
    sizes = [add.get("size") for add in adds]
    return sum(sizes) if all(isinstance(n, int) for n in sizes) else None  # type: ignore[arg-type]


def _commit_adds(log: str, start: int | None, end: int | None) -> list[dict] | None:
    """The `add` actions of the data files the commits after version `start` up to `end`
    brought a stream (`dataChange`), read from their JSON; None when they cannot be told
    exactly: more than `SUMMED_COMMITS` commits, one of them missing or unreadable, or one that
    a Delta stream source does not pass as plain appends (a data-changing `remove`, a
    deletion vector, a metadata change after the table's first commit)."""
    first = 0 if start is None else start + 1
    if end is None or end < first:
        return []
    if end - first + 1 > SUMMED_COMMITS:
        return None
    adds: list[dict] = []
    for version in range(first, end + 1):
        try:
            actions = logfiles.commit(Path(log), version)
        except (OSError, ValueError):
            return None
        found = source_files.plain_commit(actions, first=start is None)  # a table's first commit has its own
        if found is None:
            return None
        adds += found
    return adds
