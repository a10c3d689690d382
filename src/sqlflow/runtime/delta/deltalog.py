"""What sqlflow reads of a Delta table's own log: its location, latest version and commits.

Every sink write asks twice for the table's latest version and reads back the commit it made,
so these look-ups sit on every micro-batch's path. Spark's answers are slow for it:
`DESCRIBE DETAIL` first computes the table's size from its snapshot (a state reconstruction
after every commit, 0.5-1 s on two cores), `DESCRIBE HISTORY` costs 0.2-0.5 s, and reading a
commit file through `spark.read.text` is a Spark job. So:

- `describe` reads the catalog (`DESCRIBE TABLE EXTENDED`: format, location, partition
  columns), which touches no snapshot;
- when the driver can see the table's folder (a `file:` location and a classic session; not
  Spark Connect, whose server may be another machine), `latest_version` lists `_delta_log`
  and `commit_actions` reads the commit file directly;
- `from_log` reads what `describe` says of a local Delta table (partition columns, owner) from
  the checksum file of its latest commit, for the ownership check of every table a run writes;
- anywhere else (HDFS, object stores, Spark Connect) all of these ask Spark, as before.

The newest `<version>.json` is always in `_delta_log` (log clean-up removes only files older
than the newest checkpoint), and a commit is published by an atomic rename, so the listing
sees a commit exactly when Delta does. A table with unpublished coordinated commits
(`_delta_log/_staged_commits`) is asked through Spark.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from sqlflow.identifiers import quote_table
from sqlflow.runtime.delta import logfiles

_PARTITIONS = "# Partition Information"  # rows: one partition column each
_TRANSFORMS = "# Partitioning"  # how some catalogs print it instead: `Part 0 | dt`
_DETAILS = "# Detailed Table Information"
_PLAIN = re.compile(r"[a-z0-9_]+")  # a name `LIKE` matches as itself


@dataclass(frozen=True)
class TableInfo:
    """A table as the catalog describes it; `format` is lower case (`delta`, `parquet`, or ''
    for a view)."""

    format: str
    location: str | None
    partition_columns: tuple[str, ...]
    owner: tuple[str, str] | None = None  # (sqlflow.model, sqlflow.role) from its properties


def describe(spark: SparkSession, table: str) -> TableInfo:
    """The catalog's description of an existing `table` (no Delta snapshot is computed)."""
    parts, details, section = [], {}, None
    for row in spark.sql(f"DESCRIBE TABLE EXTENDED {quote(table)}").collect():
        name, value = row["col_name"] or "", row["data_type"] or ""
        if name.startswith("# "):
            section = name if name in (_PARTITIONS, _TRANSFORMS, _DETAILS) else section
            continue
        if not name:
            section = None
        elif section == _PARTITIONS:
            parts.append(name)
        elif section == _TRANSFORMS and name.startswith("Part "):
            parts.append(value)
        elif section == _DETAILS:
            details[name] = value
    return TableInfo(details.get("Provider", "").lower(), details.get("Location") or None,
                     tuple(dict.fromkeys(parts)), _owner(details.get("Table Properties", "")))


def locate(spark: SparkSession, tables: Iterable[str]) -> dict[str, TableInfo]:
    """Format and location of each of `tables` that exists (lower-case `db.table` keys;
    partition columns and owner not read: the catalog's own record of a Delta table's
    properties is not Delta's), asked with one `SHOW TABLE EXTENDED` per database instead of
    an existence check and a `DESCRIBE` per table: a query start looks up every table it writes
    (docs/semantics.md, "Start-up cost of the truth check"). A name that is not a plain
    `db.table` of letters, digits and underscores is asked one by one."""
    found: dict[str, TableInfo] = {}
    by_db: dict[str, list[str]] = {}
    for table in dict.fromkeys(t.lower() for t in tables):
        parts = table.split(".")
        if len(parts) == 2 and all(_PLAIN.fullmatch(p) for p in parts):
            by_db.setdefault(parts[0], []).append(parts[1])
        elif spark.catalog.tableExists(table):
            found[table] = describe(spark, table)
    for db, names in by_db.items():
        try:  # a missing database is one check in Spark's catalog (no metastore error logged)
            rows = spark.sql(f"SHOW TABLE EXTENDED IN {quote_table(db)} LIKE '{'|'.join(names)}'").collect()
        except AnalysisException as exc:
            if "SCHEMA_NOT_FOUND" not in str(exc) and "not found" not in str(exc).lower():
                raise
            continue
        for row in rows:
            if row["isTemporary"] or row["tableName"].lower() not in names:
                continue
            info = dict(line.split(": ", 1) for line in str(row["information"]).splitlines() if ": " in line)
            found[f"{db}.{row['tableName'].lower()}"] = TableInfo(
                info.get("Provider", "").lower(), info.get("Location") or None, ())
    return found


def from_log(spark: SparkSession, location: str | None) -> TableInfo | None:
    """The Delta table at `location` as `describe` would say it (partition columns and owner
    included), read from the checksum file Delta writes beside its latest commit
    (`<version>.crc` holds the table's metadata), with no catalog call and no snapshot built;
    None when the folder is not local or the latest commit has no checksum file (the caller
    asks the catalog instead)."""
    log = local_log(spark, location)
    versions = commit_versions(log) if log is not None else []
    metadata = _checksum_metadata(log, max(versions)) if log is not None and versions else None
    if metadata is None:
        return None
    try:
        columns = tuple(str(c) for c in metadata.get("partitionColumns") or ())
        config = metadata.get("configuration") or {}
        model = config.get("sqlflow.model")
        owner = None if model is None else (str(model), str(config.get("sqlflow.role", "")))
    except (TypeError, AttributeError):
        return None
    return TableInfo("delta", location, columns, owner)


def holds_no_files(spark: SparkSession, location: str | None) -> bool:
    """True when the local Delta table at `location` has no data file (so no row): as the
    checksum file of its latest commit counts them, or, for a commit without one (delta-rs
    writes none), as its log replays (`logfiles.live_adds`); False when it has some, or when
    neither can be read (not local, a log the replay does not support: the caller asks Spark)."""
    log = local_log(spark, location)
    versions = commit_versions(log) if log is not None else []
    if log is None or not versions:
        return False
    files = checksum(log, max(versions)).get("numFiles")
    if files is None:
        try:
            files = len(logfiles.live_adds(Path(log).parent))
        except (logfiles.Unsupported, OSError, ValueError, KeyError):
            return False
    return files == 0


def commit_versions(log: str) -> list[int]:
    """The versions of the commit files in the local `_delta_log` folder `log`."""
    return [int(n[:-5]) for n in os.listdir(log) if n.endswith(".json") and n[:-5].isdigit()]


def checksum(log: str, version: int) -> dict:
    """`<version>.crc` of the local `_delta_log` folder `log` (the table's state after that
    commit, which Delta writes beside it); {} when that file is missing or not what Delta writes."""
    try:
        with open(os.path.join(log, f"{version:020d}.crc"), encoding="utf-8") as f:
            found = json.load(f)
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def _checksum_metadata(log: str, version: int) -> dict | None:
    """The table metadata in `<version>.crc`; None when there is none."""
    metadata = checksum(log, version).get("metadata")
    return metadata if isinstance(metadata, dict) else None


def _owner(properties: str) -> tuple[str, str] | None:
    """`(model, role)` from `[k=v, sqlflow.model=m, sqlflow.role=sink]` (sqlflow writes model
    names and roles, which hold neither `,` nor `]`)."""
    found = dict(re.findall(r"(sqlflow\.(?:model|role))=([^,\]]*)", properties))
    model = found.get("sqlflow.model")
    return None if model is None else (model.strip(), found.get("sqlflow.role", "").strip())


def latest_version(spark: SparkSession, table: str, location: str | None = None) -> int | None:
    """The latest Delta version of `table`; None when it does not exist or is not Delta.
    `location`: the folder of a table the caller already knows is Delta (saves a catalog
    look-up; neither its existence nor its format is checked again)."""
    if location is None:
        if not spark.catalog.tableExists(table):
            return None
        info = describe(spark, table)
        if info.format != "delta":
            return None
        location = info.location
    log = local_log(spark, location)
    if log is not None:
        versions = commit_versions(log)
        if versions:
            return max(versions)
    try:
        return int(spark.sql(f"DESCRIBE HISTORY {quote(table)} LIMIT 1").collect()[0]["version"])
    except AnalysisException:
        return None


def table_id(spark: SparkSession, location: str, latest: int) -> str | None:
    """The Delta table id (`metaData.id`, what a stream checkpoint's offsets name as
    `reservoirId`) of the table at `location` at version `latest`, from the checksum file Delta
    writes beside each commit (`<version>.crc`, which holds the table's metadata); None when
    the folder is not local or that file is missing (the caller asks Spark instead). A
    `DESCRIBE DETAIL` would first compute the table's size from its snapshot."""
    log = local_log(spark, location)
    metadata = _checksum_metadata(log, latest) if log is not None else None
    found = metadata.get("id") if metadata else None
    return str(found) if found else None


def commit_actions(spark: SparkSession, location: str, versions: list[int]) -> list[tuple[int, dict]]:
    """Every action of the commits `versions` of the table at `location`, as `(version,
    action)` in log order. A commit whose file Delta's log clean-up has removed (older than
    the log retention and the newest checkpoint) is skipped: callers search a window of recent
    commits, and a missing old one holds nothing they could still use."""
    log = local_log(spark, location)
    out: list[tuple[int, dict]] = []
    if log is not None:
        for v in versions:
            path = os.path.join(log, f"{v:020d}.json")
            if os.path.isfile(path):
                with open(path, encoding="utf-8") as f:
                    out += [(v, json.loads(line)) for line in f if line.strip()]
        return out
    if not versions:
        return out
    # one glob over the wanted names: it matches the files that exist, and fails only when none does
    names = ",".join(f"{v:020d}.json" for v in versions)
    try:
        lines = (spark.read.text(f"{location.rstrip('/')}/_delta_log/{{{names}}}")
                 .withColumn("file", F.input_file_name()).collect())
    except AnalysisException:
        return out
    for line in lines:
        out.append((int(line["file"].rsplit("/", 1)[-1].split(".")[0]), json.loads(line["value"])))
    return sorted(out, key=lambda va: va[0])  # stable: log order within a commit is kept


def local_log(spark: SparkSession, location: str | None) -> str | None:
    """`<location>/_delta_log` as a local folder the driver can list, else None (Spark
    Connect, a remote file system, commits staged by a catalog)."""
    if not location or type(spark).__module__.startswith("pyspark.sql.connect"):
        return None
    url = urlparse(location)
    if url.scheme not in ("", "file"):
        return None
    # the catalog gives an unescaped path (`a folder%41`, `a#b`: no URI parse of it); a URI's
    # escaped form is read too
    plain = location[len("file://"):] if location.startswith("file:///") else location.removeprefix("file:")
    found = [p for p in dict.fromkeys((plain, unquote(url.path)))
             if os.path.isdir(os.path.join(p, "_delta_log"))]
    if not found:
        return None
    log = os.path.join(found[0], "_delta_log")
    staged = os.path.join(log, "_staged_commits")
    if os.path.isdir(staged) and any(n.endswith(".json") for n in os.listdir(staged)):
        return None
    return log


def quote(name: str) -> str:
    """`db.table` as a quoted Spark identifier: `` `db`.`table` ``."""
    return quote_table(name)  # sqlflow.identifiers: embedded backticks doubled
