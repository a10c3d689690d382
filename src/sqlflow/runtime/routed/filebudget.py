"""File budgets of routed writes (docs/design.md §2.4): about `ceil(bytes / target_file_size)` files per
written partition, never `partitions x parallelism` small files.

For each write the runtime counts the rows each partition gets (one aggregation over the
cached micro-batch or backfill input) and estimates its bytes as rows x bytes-per-row, where
bytes-per-row is learned from the target's own Delta file statistics (`size` / `numRecords` of
the `add` actions of its recent commits), per sub-partition (the partition without its date
and hour, e.g. `event_type=pv/product=app`: payload sizes differ by tag), else the group's
most specific preset for that sub-partition (`routing.row_bytes`, cold start), else for the
whole table, else the group's preset `bytes_per_row` (cold start). The rows are then repartitioned
by the partition columns plus a salt in `[0, budget)`, so each partition is written by at most
`budget` tasks, i.e. at most `budget` files. Small partitions share a task (`tasks`: about one
task per target-size file of data, at least the session's shuffle partitions): a task each
would spend more on task start-ups than on writing.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from sqlflow.identifiers import quote as quote_ident
from sqlflow.runtime.delta import deltalog, partition_path

SALT = "__sqlflow_salt"
RECENT_COMMITS = 20


def partition_key(columns: tuple[str, ...]) -> Column:
    """`dt=2026-11-01/hour=10/...` of a row, the format of `PartitionWrite.spec`."""
    return partition_path.key(columns)


def sub_key(spec: str, skip: tuple[str, ...]) -> str:
    """The spec without the `skip` levels: `dt=X/hour=Y/event_type=pv` -> `event_type=pv`."""
    return "/".join(p for p in spec.split("/") if p.split("=", 1)[0] not in skip)


@dataclass
class SizeModel:
    """Bytes per row, learned per sub-partition and for the whole table from Delta `add`s;
    `presets` (sub-partition spec -> bytes per row) answer for sub-partitions not yet seen."""

    default: float
    skip: tuple[str, ...]
    bytes: dict[str, int] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)
    presets: dict[str, float] = field(default_factory=dict)

    def learn(self, spec: str, size: int, records: int | None) -> None:
        if not records:
            return
        for key in (sub_key(spec, self.skip), "*"):
            self.bytes[key] = self.bytes.get(key, 0) + size
            self.rows[key] = self.rows.get(key, 0) + records

    def per_row(self, spec: str) -> float:
        sub = sub_key(spec, self.skip)
        if self.rows.get(sub):
            return self.bytes[sub] / self.rows[sub]
        preset = self.preset(sub)
        if preset is not None:
            return preset
        if self.rows.get("*"):
            return self.bytes["*"] / self.rows["*"]
        return self.default

    def preset(self, sub: str) -> float | None:
        """The preset of the most specific key whose every `level=value` is in `sub`."""
        have = {p.lower() for p in sub.split("/")}
        keys = [k for k in self.presets if {p.lower() for p in k.split("/")} <= have]
        return self.presets[max(keys, key=lambda k: k.count("/"))] if keys else None


@dataclass(frozen=True)
class Budget:
    spec: str
    rows: int
    bytes: int
    files: int


def budgets(counts: dict[str, int], sizes: SizeModel, target_file_size: int,
            max_files: int | None) -> dict[str, Budget]:
    """The budget of each partition about to be written, from its row count."""
    out = {}
    for spec, rows in counts.items():
        size = int(rows * sizes.per_row(spec))
        files = max(1, math.ceil(size / target_file_size))
        files = min(files, max_files, rows) if max_files else min(files, max(rows, 1))
        out[spec] = Budget(spec, rows, size, files)
    return out


def count_rows(rows: DataFrame, partition_by: tuple[str, ...]) -> dict[str, int]:
    got = rows.groupBy(partition_key(partition_by).alias("k")).count().collect()
    return {r["k"]: r["count"] for r in got}


def tasks(plan: dict[str, Budget], target_file_size: int, floor: int) -> int:
    """How many tasks write `plan`: about one per target-size file of data, at least `floor`
    (the session's shuffle partitions, its parallelism) and at most one per planned file.
    Small partitions share tasks: a task per partition would cost more in task start-ups than
    the write itself (a demo day is hundreds of partitions of a few kilobytes)."""
    files = sum(b.files for b in plan.values())
    size = sum(b.bytes for b in plan.values())
    return max(1, min(files, max(floor, math.ceil(size / max(1, target_file_size)))))


def shape(rows: DataFrame, partition_by: tuple[str, ...], plan: dict[str, Budget], n_tasks: int) -> DataFrame:
    """`rows` repartitioned into `n_tasks` tasks (`tasks`) so partition p is spread over at
    most `plan[p].files` of them: rows are hashed on the partition columns plus a salt in
    `[0, plan[p].files)`, so p's rows land in at most that many tasks, one file each."""
    if not partition_by or not plan:
        return rows.coalesce(1)
    columns = [F.col(quote_ident(c)) for c in partition_by]
    if all(b.files == 1 for b in plan.values()):  # one task per partition: no salt needed
        return rows.repartition(n_tasks, *columns)
    # one constant map, not a `create_map` of two literals per partition (a py4j round trip
    # each: thousands per routed write)
    files = partition_path.constant({b.spec: b.files for b in plan.values()}, "map<string,int>")
    n = F.coalesce(F.element_at(files, partition_key(partition_by)), F.lit(1))
    salt = F.pmod(F.xxhash64(*[F.col(quote_ident(c)) for c in rows.columns]), n)
    return rows.withColumn(SALT, salt).repartition(n_tasks, *columns, F.col(SALT)).drop(SALT)


def learn_from_log(spark: SparkSession, table: str, partition_by: tuple[str, ...],
                   sizes: SizeModel) -> None:
    """Feed `sizes` the `add` actions of the table's last RECENT_COMMITS commits."""
    if not spark.catalog.tableExists(table):
        return
    info = deltalog.describe(spark, table)
    latest = deltalog.latest_version(spark, table, info.location) if info.format == "delta" else None
    if latest is None:
        return
    location = info.location
    assert location is not None  # a Delta table has a location
    versions = list(range(max(0, latest - RECENT_COMMITS + 1), latest + 1))
    for _, action in deltalog.commit_actions(spark, location, versions):
        add = action.get("add")
        if add and add.get("dataChange", True):
            _learn_add(add, partition_by, sizes)


def _learn_add(add: dict, partition_by: tuple[str, ...], sizes: SizeModel) -> None:
    """Learn from one `add` action of the log (a write learns from its own `WriteResult`)."""
    values = add.get("partitionValues") or {}
    spec = partition_path.spec([(c, values.get(c)) for c in partition_by])
    stats = json.loads(add["stats"]) if add.get("stats") else {}
    sizes.learn(spec, int(add.get("size") or 0), stats.get("numRecords"))
