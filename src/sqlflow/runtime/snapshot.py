"""Dimension snapshots (docs/design.md §2.3) and the commit-log rows of every model write (docs/design.md §2.5).

A model with dimension joins reads each dimension and the READY set through temp views
(`sqlflow.planning.dimplan`). `pin` registers them once per backfill run and once per micro-batch:
1. ready markers: for a dimension whose source sets `ready_marker: _SUCCESS`, each partition
   directory holding the marker gets a `commit` row (mode `marker`) if it has none yet, so
   READY is the commit log alone from here on;
2. the commit log is read at its current Delta version v: `sqlflow.commit_log VERSION AS OF v`
   is the READY view, and every dimension is read at its current version. One statement, and
   every side query of the same run or micro-batch, sees the same partitions: a partition a
   concurrent writer is replacing is either wholly in the snapshot or not at all.

`record` appends the `write` rows of a sink write to the commit log, with, per output partition,
the rows per chosen dimension partition, the fallback depth and the `dim_missing` count. A
partition is provisional when some fact date of it used a partition older than the date itself
(or none): a stream wrote it before that day was ready, and `sqlflow repair` must rewrite it
once it is. Output partitions are matched to fact dates by their first partition column
(`dt`), which is how every sqlflow model partitions by event date.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sqlflow.planning.plan import COMMIT_LOG, BatchPlan, DimPlan, Sink, StreamPlan
from sqlflow.runtime import quarantine as Q
from sqlflow.runtime.delta import commitlog as C
from sqlflow.runtime.delta.deltalog import latest_version
from sqlflow.runtime.delta.sinks import BatchId, WriteResult, quote, write
from sqlflow.runtime.ownership import quarantine_sink

MISSING = "dim_missing"
# per (output partition, dimension relation): rows per chosen dimension partition
Counts = dict[tuple[str, str], dict[str | None, int]]


@dataclass(frozen=True)
class DimUse:
    """One output partition's use of one dimension: rows per chosen partition (`None`: none
    ready, padded by a left join), the deepest fallback in days, and rows quarantined."""

    partition: str
    dim: str
    rows: dict[str | None, int] = field(default_factory=dict)
    fallback_days: int = 0
    dim_missing: int = 0

    def as_json(self) -> dict[str, Any]:
        return {"partitions": {k or "none": v for k, v in sorted(self.rows.items(), key=str)},
                "fallback_days": self.fallback_days, "dim_missing": self.dim_missing}


@dataclass(frozen=True)
class Snapshot:
    """What one run or micro-batch pinned: the commit-log version and each dim's Delta version."""

    log_version: int | None
    versions: dict[str, int | None]


# --- pin and release ------------------------------------------------------------------------------

def pin(spark: SparkSession, dim: DimPlan) -> Snapshot:
    """Sync ready markers, then register the READY and dimension views at one version each."""
    C.ensure(spark)
    sync_all_markers(spark, [(d.relation, d.partition_column, d.ready_marker) for d in dim.dims if d.ready_marker])
    log_version = latest_version(spark, COMMIT_LOG)
    spark.sql(f"SELECT * FROM {quote(COMMIT_LOG)} VERSION AS OF {log_version}"
              ).createOrReplaceTempView(dim.ready_view)
    versions = {}
    for d in dim.dims:
        version = latest_version(spark, d.relation)
        rows = (spark.table(d.relation) if version is None else
                spark.sql(f"SELECT * FROM {quote(d.relation)} VERSION AS OF {version}"))
        rows.createOrReplaceTempView(d.view)
        versions[d.relation] = version
    return Snapshot(log_version, versions)


def release(spark: SparkSession, dim: DimPlan | None) -> None:
    if dim is None:
        return
    for view in (dim.ready_view, *(d.view for d in dim.dims)):
        spark.catalog.dropTempView(view)


def sync_markers(spark: SparkSession, relation: str, column: str, marker: str) -> list[str]:
    """Append a `commit` row (mode `marker`) for each partition of `relation` whose directory
    holds `marker` and that has no commit row yet; returns the values newly committed."""
    return sync_all_markers(spark, [(relation, column, marker)]).get(relation, [])


def sync_all_markers(spark: SparkSession, tables: list[tuple[str, str, str]]) -> dict[str, list[str]]:
    """`sync_markers` for each (relation, partition column, marker) of `tables`: one read of
    the commit log for all of them (a job of its own per table before), one append."""
    marked = {}
    for relation, column, marker in tables:
        if spark.catalog.tableExists(relation):
            found = marker_partitions(spark, relation, column, marker)
            if found:
                marked[relation] = (column, marker, found)
    if not marked:
        return {}
    ready = C.ready_partitions_of(spark, list(marked))
    new: dict[str, list[str]] = {}
    entries = []
    for relation, (column, marker, found) in marked.items():
        known = {C.parse_partition(p).get(column) for p in ready[relation.lower()]}
        new[relation] = [v for v in found if v not in known]
        entries += [C.Entry(relation, C.partition_spec({column: v}), "commit", "marker",
                            reason=f"{marker} marker") for v in new[relation]]
    C.append(spark, entries)
    return new


def marker_partitions(spark: SparkSession, relation: str, column: str, marker: str) -> list[str]:
    """Values of `column` whose partition directory of `relation` holds the file `marker`."""
    from sqlflow.runtime.delta.markers import partition_dir, table_location

    jvm = getattr(spark, "_jvm", None)
    if jvm is None:  # Spark Connect: no file system access from here; the commit log decides
        return []
    pattern = f"{partition_dir(table_location(spark, relation), column, '*')}/{marker}"
    path = jvm.org.apache.hadoop.fs.Path(pattern)
    found = path.getFileSystem(spark._jsc.hadoopConfiguration()).globStatus(path) or []
    return sorted(C.parse_partition(s.getPath().getParent().getName())[column] or "" for s in found)


# --- dim_missing quarantine rows ------------------------------------------------------------------

def missing_rows(spark: SparkSession, plan: BatchPlan | StreamPlan, *, origin: str) -> DataFrame | None:
    """The fact rows an inner dim join dropped (no ready partition) as quarantine rows."""
    dim = plan.dim
    if dim is None or dim.missing_sql is None:
        return None
    rows = spark.sql(dim.missing_sql)
    fact_columns = [c for c in rows.columns if c != "__sqlflow_dim"]
    binding = next((b for b in plan.sources if b.relation == dim.fact), None)
    if binding is not None and binding.event_time:
        times = Q.event_times(rows, binding, model=plan.model)
    else:
        none = F.lit(None).cast("timestamp")
        times = Q.Times(none, none, none)
    return Q.rows_of(rows, times, model=plan.model, input=F.col("__sqlflow_dim"),
                     reason=F.lit(MISSING), origin=origin, columns=fact_columns)


# --- commit log rows of a write -------------------------------------------------------------------

def record(spark: SparkSession, plan: BatchPlan | StreamPlan, result: WriteResult, *,
           mode: C.WriteMode, rows: DataFrame | Counts | None = None, batch: BatchId | None = None,
           run_id: str | None = None, inputs: dict[str, Any] | None = None,
           missing: DataFrame | None = None) -> list[DimUse]:
    """Append the `write` rows of `result` to the commit log and return the dimension use.

    `rows` are the rows just written, or their `lineage_counts` (to count rows per chosen dim
    partition; None: read the written partitions back from the sink); `missing` the
    dim_missing quarantine rows of the same write. Needs the pinned views of `pin` still registered.
    """
    if result.write == "view" or (result.skipped and batch is None):
        return []
    entries, uses = write_entries(spark, plan, result, mode=mode, rows=rows, missing=missing,
                                  run_id=run_id, inputs=inputs or {},
                                  batch_id=batch.batch_id if batch else None)
    C.append(spark, entries, batch=batch)
    return uses


def write_entries(spark: SparkSession, plan: BatchPlan | StreamPlan, result: WriteResult, *,
                  mode: C.WriteMode, rows: DataFrame | Counts | None, missing: DataFrame | None,
                  **fields: Any) -> tuple[list[C.Entry], list[DimUse]]:
    """The `write` rows of `result` (with the dimension partitions used and the provisional
    flag of a model with dimension joins) and the dimension use; `fields` go on every row."""
    uses: list[DimUse] = []
    if plan.dim is None:
        entries = C.write_entries(result, mode=mode, model=plan.model, **fields)
    else:
        uses, provisional = _dim_uses(spark, plan, result, rows, missing)
        by_part: dict[str, list[DimUse]] = defaultdict(list)
        for u in uses:
            by_part[u.partition].append(u)
        specs = [p.spec for p in result.partitions] or [""]
        extra = [p for p in by_part if p not in specs]  # days with only dim_missing rows
        entries = [
            C.Entry(result.table, spec, "write", mode, plan.model,
                    rows=_rows_of(result, spec), provisional=_first(spec) in provisional,
                    reason="fell back to an older dimension partition" if _first(spec) in provisional else None,
                    dim_partitions={u.dim: u.as_json() for u in by_part.get(spec, [])}, **fields)
            for spec in specs + extra]
    return entries, uses


def _rows_of(result: WriteResult, spec: str) -> int:
    found = next((p for p in result.partitions if p.spec == spec), None)
    return (found.rows or 0) if found else (result.rows if not result.partitions and not spec else 0)


def _first(spec: str) -> str | None:
    parts = C.parse_partition(spec)
    return next(iter(parts.values()), None)


def lineage_counts(plan: BatchPlan | StreamPlan, rows: DataFrame | None) -> Counts:
    """Per (output partition, dimension): the rows of `rows` per chosen dimension partition
    (None: no ready partition). One job; a caller that still holds the written rows cached
    asks here, so the model's SQL is not run again for it."""
    dim = plan.dim
    assert dim is not None
    cols = list(plan.sink.partition_by)
    counts: Counts = defaultdict(dict)
    if rows is None or not cols:
        return counts
    lineage = [d.lineage for d in dim.dims]
    for g in rows.groupBy(*cols, *lineage).count().collect():
        spec = C.partition_spec({c: g[c] for c in cols})
        for d in dim.dims:
            got = counts[(spec, d.relation)]
            p = None if g[d.lineage] is None else str(g[d.lineage])
            got[p] = got.get(p, 0) + g["count"]
    return counts


def _dim_uses(spark: SparkSession, plan: BatchPlan | StreamPlan, result: WriteResult,
              rows: DataFrame | Counts | None, missing: DataFrame | None) -> tuple[list[DimUse], set[str]]:
    """Per output partition and dim: rows per chosen partition, fallback depth, dim_missing;
    and the fact dates (ISO) that fell back, whose output partitions are provisional. `rows`:
    the written rows, or their `lineage_counts` already taken."""
    dim = plan.dim
    assert dim is not None
    cols = list(plan.sink.partition_by)
    provisional: set[str] = set()
    for r in spark.sql(dim.days_sql).collect():
        for i, _ in enumerate(dim.dims):
            d, p = r[f"__sqlflow_d{i}"], r[f"__sqlflow_p{i}"]
            if d is not None and (p is None or p != str(d)):
                provisional.add(str(d))
    counts = rows if isinstance(rows, dict) else \
        lineage_counts(plan, _written(spark, plan.sink, result) if rows is None else rows)
    missed: dict[tuple[str, str], int] = defaultdict(int)
    if missing is not None and cols:
        for g in missing.groupBy("dt", "input").count().collect():
            missed[(C.partition_spec({cols[0]: g["dt"]}), g["input"])] += g["count"]
    # a day's dim_missing count goes to its first output partition (or one of its own)
    keys = set(counts) | {(s, rel) for (s, rel) in missed if not any(
        k[0].split("/")[0] == s and k[1] == rel for k in counts)}
    uses, counted = [], set()
    for spec, rel in sorted(keys, key=str):
        used = counts.get((spec, rel), {})
        depth = max((_days_between(p, _first(spec)) for p in used if p), default=0)
        day = (spec.split("/")[0], rel)
        n_missing = 0 if day in counted else missed.get(day, 0)
        counted.add(day)
        uses.append(DimUse(spec, rel, used, depth, n_missing))
        if n_missing:
            provisional.add(_first(spec) or "")
    return uses, provisional


def _days_between(older: str, newer: str | None) -> int:
    try:
        return (date.fromisoformat(str(newer)[:10]) - date.fromisoformat(older[:10])).days
    except (TypeError, ValueError):
        return 0


def _written(spark: SparkSession, sink: Sink, result: WriteResult) -> DataFrame | None:
    """The rows of the partitions `result` wrote, read back from the sink at its version."""
    if result.version is None or not sink.partition_by or not result.partitions:
        return None
    rows = spark.sql(f"SELECT * FROM {quote(sink.table)} VERSION AS OF {result.version}")
    first = sink.partition_by[0]
    values = sorted({str(p.values[0][1]) for p in result.partitions})
    return rows.where(F.col(first).cast("string").isin(values))


def append_missing(spark: SparkSession, plan: StreamPlan, rows: DataFrame, batch: BatchId) -> None:
    """Append a micro-batch's dim_missing rows to the quarantine table, once per batch id."""
    write(spark, quarantine_sink(plan, "append_once", Q.PARTITION_BY), rows,
          batch=BatchId(f"{batch.app_id}__dim_missing", batch.batch_id, batch.journal))


# --- the two calls a micro-batch makes ------------------------------------------------------------

@dataclass
class StreamBatch:
    """A micro-batch's pinned snapshot and its dim_missing rows, between `begin` and `end`."""

    batch: BatchId
    snapshot: Snapshot | None = None
    missing: DataFrame | None = None
    counts: Counts | None = None  # the written rows' `lineage_counts`, taken while cached


def begin(spark: SparkSession, plan: StreamPlan, batch: BatchId) -> StreamBatch:
    """Before the model SQL of a micro-batch (its input views registered): pin the dimension
    snapshot and append the dim_missing quarantine rows, idempotent per batch id."""
    if plan.dim is None:
        return StreamBatch(batch)
    snap = pin(spark, plan.dim)
    missing = missing_rows(spark, plan, origin=f"batch {batch.batch_id}")
    if missing is not None:
        missing = missing.persist()
        if missing.count():  # an empty append would still make a Delta commit
            append_missing(spark, plan, missing, batch)
    return StreamBatch(batch, snap, missing)


def end(spark: SparkSession, plan: StreamPlan, result: WriteResult, state: StreamBatch,
        **fields: Any) -> list[C.Entry] | None:
    """After the sink write of a micro-batch of a model with dimension joins: its commit-log
    `write` rows (provisional where a fact date fell back; the dimension and commit-log
    versions added to `fields["inputs"]`) for the caller's one idempotent append; then drop
    the pinned views. None for a model without dimension joins. The rows per chosen
    partition are `state.counts` when the caller took them from the written rows (else the
    model's SQL runs again to count them)."""
    try:
        snap = state.snapshot
        if plan.dim is None or snap is None or result.version is None:
            return None
        inputs = {**fields.pop("inputs", {}), **snap.versions, COMMIT_LOG: snap.log_version}
        rows = state.counts if state.counts is not None else spark.sql(plan.sql)
        entries, _ = write_entries(spark, plan, result, mode="stream", rows=rows,
                                   missing=state.missing, inputs=inputs, **fields)
        return entries
    finally:
        if state.missing is not None:
            state.missing.unpersist()
        release(spark, plan.dim)
