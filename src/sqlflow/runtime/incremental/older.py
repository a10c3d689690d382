"""Where a micro-batch of an `incremental` join finds each input's OLDER rows (the rows of
earlier micro-batches, docs/design.md §2.9), and which batches must keep a copy of their rows.

Older rows of input `k` before batch `b` are described by a `Source`: the input table's clean
rows as of Delta version `base` (None: none) plus the copies of batches after `since`. The
offsets say which (`sqlflow.runtime.offsets`):

- a batch that starts where a whole table version ends reads that version: no copies at all.
  This is every batch unless one commit has more files than `maxFilesPerTrigger` lets in;
- a batch that ends inside a version begins (or continues) a run of partial batches, and the
  batches after it read the version where the run began, plus the run's copies. Those are
  the input's own data files the run was handed, when its log names them (`Source.files`,
  `sqlflow.runtime.delta.source_files`; read with `files_at`), else copies of the batches'
  clean rows in the state table (`sqlflow.runtime.incremental.state`). `Ledger` records this
  per batch in `<checkpoint>/sqlflow_older/<batch id>` (JSON: base, since, and `true` for a
  run kept as files), because Spark purges old offset files;
- a batch that starts inside a version in a checkpoint with no records at all (one written
  before this module) reads every copy (`ALL_COPIES`): such checkpoints copied every batch. In
  a checkpoint with records, a missing or unreadable one is an error (it would read the wrong
  rows), naming the model's file and what to do.

The new rows of a batch that starts with nothing delivered and ends on a whole version are that
version of the table (`new_rows`): read straight from Delta, column-pruned and vectorized, not
through the micro-batch's envelope. Outer joins keep copying every batch (`ALL_COPIES`): their
padding needs each row's batch id (`sqlflow.runtime.incremental.padding`).

A replay of batch `b` after a crash finds the same offsets and the same record of `b - 1`, so
it reads the same older rows, and rewrites its own record with the same content. Within one
running query the table as of `base` is read once and then held with the following batches'
new rows (`sqlflow.runtime.incremental.held`): the same rows, without a new Delta snapshot.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import reduce
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.types import StructType

from sqlflow.errors import Location, SqlflowError
from sqlflow.identifiers import quote as quote_ident
from sqlflow.runtime import offsets
from sqlflow.runtime.incremental import state

FOLDER = "sqlflow_older"
KEEP = 3  # records kept: a replay of batch b reads the record of b - 1


@dataclass(frozen=True)
class Source:
    base: int | None  # the input table as of this Delta version (None: no rows from the table)
    since: int        # plus the copies of batches after this one
    # where those copies are when the running query does not hold them: False, the state table;
    # True, the input's own files the batches were handed (`files_at`), named by its log
    files: bool = False


ALL_COPIES = Source(None, -1)


class Ledger:
    """The older-rows `Source` of each joined input, per micro-batch of one query."""

    def __init__(self, checkpoint: Path | None, relations: list[str | None], *, copy_all: bool,
                 location: Location | None = None):
        """`relations`: the query's inputs in source order (None: an input that is not joined
        and keeps no older rows); `copy_all`: outer joins, which copy every batch; `location`:
        the model's file, for errors."""
        self.checkpoint, self.relations, self.copy_all = checkpoint, relations, copy_all
        self.location = location

    def before(self, batch_id: int) -> dict[str, Source]:
        """The older rows of each joined input for `batch_id`."""
        if self.copy_all or self.checkpoint is None:
            return {r: ALL_COPIES for r in self.relations if r}
        recorded = None
        out = {}
        for k, r in enumerate(self.relations):
            if r is None:
                continue
            start = offsets.start_of(self.checkpoint, batch_id, k)
            if start is not None:
                out[r] = Source(start.version, batch_id - 1)
            else:
                recorded = self._load(batch_id - 1) if recorded is None else recorded
                out[r] = recorded.get(r, ALL_COPIES)
        return out

    def after(self, batch_id: int, before: dict[str, Source]) -> tuple[dict[str, Source], set[str]]:
        """The older rows of each joined input for the batch after `batch_id`, and the inputs
        whose rows `batch_id` must copy to the state table (it ends inside a version)."""
        if self.copy_all or self.checkpoint is None:
            return before, set(before)
        copy: set[str]
        nxt, copy = {}, set()
        for k, r in enumerate(self.relations):
            if r is None:
                continue
            end = offsets.end_of(self.checkpoint, batch_id, k)
            if end is not None:
                nxt[r] = Source(end.version, batch_id)
            else:
                nxt[r], copy = before[r], copy | {r}
        return nxt, copy

    def record(self, batch_id: int, sources: dict[str, Source]) -> None:
        """Write what the batch after `batch_id` reads (same content on a replay); drop old
        records."""
        if self.copy_all or self.checkpoint is None:
            return
        folder = self.checkpoint / FOLDER
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / str(batch_id)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({r: [s.base, s.since] + ([True] if s.files else [])
                                   for r, s in sources.items()}, sort_keys=True))
        tmp.replace(path)
        for old in folder.iterdir():
            if old.name.isdigit() and int(old.name) <= batch_id - KEEP:
                old.unlink(missing_ok=True)

    def _load(self, batch_id: int) -> dict[str, Source]:
        """The record of `batch_id`. No records at all: a checkpoint from before them, which
        copied every batch (`{}`: every input reads `ALL_COPIES`). A record missing among
        others, or unreadable, would make the batch read the wrong older rows: an error."""
        assert self.checkpoint is not None  # `before` reads records only with a checkpoint
        folder = self.checkpoint / FOLDER
        path = folder / str(batch_id)
        if not folder.is_dir():
            return {}
        try:
            return {r: Source(v[0], v[1], files=len(v) > 2 and v[2] is True)
                    for r, v in json.loads(path.read_text()).items()}
        except (OSError, ValueError, TypeError, IndexError, AttributeError) as exc:
            raise SqlflowError(
                f"stream checkpoint `{self.checkpoint}`: cannot read `{path}`, which says where "
                f"micro-batch {batch_id + 1} finds the older rows of its inputs ({exc})",
                location=self.location, hint="restore the checkpoint folder as it was, or rebuild the model from a fresh "
                     "checkpoint (drop its sink table and its checkpoint folder)") from exc


def table_at(spark: SparkSession, relation: str, version: int | None, schema: StructType) -> DataFrame:
    """The input table's rows as of `version` with the columns of `schema` (None: no rows).

    A column added to the table since `version` is NULL in those rows, as the table reads
    them today (and as the batch plan reads them): docs/semantics.md, "Faults"."""
    if version is None:
        return state.empty(spark, schema)
    return _as_of(spark.read.format("delta").option("versionAsOf", version).table(relation), schema)


def files_at(spark: SparkSession, relation: str, version: int, names: list[str],
             schema: StructType, partitions: list[dict[str, str | None]] | None = None) -> DataFrame:
    """The rows of the input table's data files named `names` (file names, without folders:
    every Delta writer names its files with a random UUID), read as of `version`, at which they
    are live, with the columns of `schema` (`table_at`). `partitions`: those files' partition
    values (their `add` actions' `partitionValues`), so Delta reads only the files of those
    partitions (it lists every file of the version for a file-name filter alone)."""
    rows = spark.read.format("delta").option("versionAsOf", version).table(relation)
    within = _partitions_where(rows.schema, partitions or [])
    if within is not None:
        rows = rows.where(within)
    return _as_of(rows.where(F.col("_metadata.file_name").isin(sorted(set(names)))), schema)


# partition column types whose Delta partition value (a string) casts back to the same value
EXACT_PARTITION_TYPES = (T.StringType, T.DateType, T.ByteType, T.ShortType, T.IntegerType, T.LongType,
                          T.BooleanType)
MAX_PARTITION_TERMS = 200


def _partitions_where(schema: StructType, partitions: list[dict[str, str | None]]) -> Column | None:
    """`(p1 <=> v1 AND p2 <=> v2) OR ...` over the distinct `partitions`, each value cast to its
    column's type; None (no partition filter: every file is listed, and the file-name filter
    still picks the same rows) for an unpartitioned table, more than `MAX_PARTITION_TERMS`
    partitions, or a partition column of a type whose value may not cast back exactly (a
    timestamp's string form, say)."""
    distinct = {tuple(sorted(p.items())) for p in partitions}
    if not distinct or len(distinct) > MAX_PARTITION_TERMS:
        return None
    fields = {f.name.lower(): f for f in schema.fields}
    terms = []
    for values in sorted(distinct, key=repr):
        if not values:
            return None
        parts = []
        for name, value in values:
            field = fields.get(name.lower())
            if field is None or not isinstance(field.dataType, EXACT_PARTITION_TYPES):
                return None
            column = F.col(quote_ident(field.name))
            parts.append(column.isNull() if value is None else
                         column == F.lit(value).cast(field.dataType))
        terms.append(reduce(Column.__and__, parts))
    return reduce(Column.__or__, terms)


def _as_of(rows: DataFrame, schema: StructType) -> DataFrame:
    had = {c.lower() for c in rows.columns}
    return rows.select(*[rows[quote_ident(f.name)] if f.name.lower() in had
                         else F.lit(None).cast(f.dataType).alias(f.name) for f in schema.fields])


def new_rows(checkpoint: Path | None, batch_id: int, k: int) -> tuple[bool, int | None]:
    """`(True, v)` when the new rows of input `k` in `batch_id` are exactly the table as of
    version `v` (v None: no rows), `(False, None)` when they must come from the micro-batch."""
    if checkpoint is None:
        return False, None
    start = offsets.start_of(checkpoint, batch_id, k)
    end = offsets.end_of(checkpoint, batch_id, k)
    if start is None or end is None:
        return False, None
    if start.version == end.version:
        return True, None  # nothing new on this input
    if start.version is None:
        return True, end.version
    return False, None
