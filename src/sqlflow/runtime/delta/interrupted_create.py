"""A table folder left behind by an interrupted create (docs/semantics.md, "Faults: what is
guaranteed, what is refused, what an operator does").

Delta creates a managed table in steps: the rows' files go into the table's folder under its
database's location, version 0 is committed to `_delta_log`, and only then is the table added
to the catalog. A process killed in between (`kill -9`, a lost machine) leaves the folder
without a catalog entry, and every later create of the table fails with Delta's
`DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION` (a managed table's folder must be empty), on every
restart. So before sqlflow creates a table, `clear` looks at that folder:

- empty or absent: nothing to do;
- files but no committed Delta version (no `_delta_log/<n>.json`): the debris of an
  interrupted create; moved aside, never deleted;
- a Delta table whose log holds only its create commit (version 0), created by sqlflow for
  this sink (the owner properties, docs/semantics.md "Table ownership"): the create got as far
  as its commit; moved aside too (not registered: a table registered over an existing folder is
  an external table, whose files a later `DROP TABLE` or `--full-refresh` would leave behind);
  the write then creates the table anew from the same rows (a stream replays the batch, a
  backfill rewrites its partitions);
- anything else (another owner, no owner, later commits): never touched; the write is refused
  with the folder and what to do.

A folder moved aside is renamed `<folder>.interrupted-<UTC time>` beside it and named in a
warning (logger `sqlflow`). Only folders the driver can see (a `file:` location) are checked.
"""

from __future__ import annotations

import json
import logging
import os
import re
from datetime import datetime, timezone
from urllib.parse import unquote, urlparse

from pyspark.sql import SparkSession

from sqlflow.errors import SqlflowError
from sqlflow.runtime import ownership
from sqlflow.runtime.delta.deltalog import quote

log = logging.getLogger("sqlflow")

_COMMIT = re.compile(r"^\d{20}\.json$")


def table_folder(spark: SparkSession, table: str) -> str | None:
    """The local folder a managed `table` gets (its database's location + the lower-cased
    name, as Spark's catalog makes it); None when it is not on a local file system."""
    db, name = table.rsplit(".", 1) if "." in table else (spark.catalog.currentDatabase(), table)
    rows = spark.sql(f"DESCRIBE DATABASE EXTENDED {quote(db)}").collect()
    where = next((r[1] for r in rows if str(r[0]).lower() == "location"), None)
    if not where or type(spark).__module__.startswith("pyspark.sql.connect"):
        return None
    url = urlparse(where)
    if url.scheme not in ("", "file"):
        return None
    return os.path.join(unquote(url.path), name.lower())


def clear(spark: SparkSession, table: str, owner: str | None, role: str) -> str | None:
    """Before `table` is created: move aside the debris of an interrupted create at its folder
    (module doc) and return where it went; None when the folder is free. Refuses a folder
    holding anything else."""
    folder = table_folder(spark, table)
    if folder is None or not os.path.isdir(folder) or not os.listdir(folder):
        return None
    commits = _commits(folder)
    if commits and not (commits == [0] and owner is not None
                        and _created_by(folder, owner, role)):
        raise SqlflowError(
            f"cannot create table `{table}`: its folder `{folder}` already holds a Delta table "
            f"that is not the interrupted create of {role} table of model `{owner}` (Delta "
            f"versions 0..{max(commits)}, owner {_owner_text(folder)}); sqlflow never adopts or "
            "removes a folder it did not create for this model",
            hint=f"if that table is wanted, register it under another name (`CREATE TABLE "
                 f"<name> USING delta LOCATION '{folder}'`) or move the folder elsewhere; if it is "
                 f"not, move or delete `{folder}`; then run again")
    moved = f"{folder}.interrupted-{datetime.now(timezone.utc):%Y%m%dT%H%M%S%fZ}"
    os.rename(folder, moved)
    what = "no committed Delta version" if not commits else "only its create commit, no catalog entry"
    log.warning("table `%s`: its folder held the files of an interrupted create (%s); moved "
                "them aside to `%s` (nothing deleted) and creating the table anew", table, what, moved)
    return moved


def _commits(folder: str) -> list[int]:
    logs = os.path.join(folder, "_delta_log")
    if not os.path.isdir(logs):
        return []
    return sorted(int(n[:20]) for n in os.listdir(logs) if _COMMIT.match(n))


def _configuration(folder: str) -> dict[str, str]:
    """The table properties of commit 0's `metaData`."""
    with open(os.path.join(folder, "_delta_log", f"{0:020d}.json"), encoding="utf-8") as f:
        for line in f:
            action = json.loads(line) if line.strip() else {}
            if "metaData" in action:
                return dict(action["metaData"].get("configuration") or {})
    return {}


def _created_by(folder: str, owner: str, role: str) -> bool:
    found = _configuration(folder)
    return found.get(ownership.MODEL) == owner and found.get(ownership.ROLE) == role


def _owner_text(folder: str) -> str:
    found = _configuration(folder)
    model = found.get(ownership.MODEL)
    return "none" if model is None else f"model `{model}`, role `{found.get(ownership.ROLE, '')}`"
