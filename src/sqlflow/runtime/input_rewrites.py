"""An input table rewritten since a stream query's checkpoint is refused at query start
(docs/semantics.md, "Faults: what is guaranteed, what is refused, what an operator does").

A stream reads its Delta inputs' appends. A commit after the checkpoint's offsets that removes
rows (`remove` with `dataChange`: an overwrite, a `DELETE`, an `UPDATE`, a column's type changed
by rewriting the table with `overwriteSchema`) cannot be streamed: Delta's source fails on it
with its own error, or, told to ignore changes, would leave the stream's rows unlike the batch
plan's. So when a query starts on an existing checkpoint, each input named in its newest
`offsets/` file (by Delta table id) is checked from the version it reached to its newest: a
rewrite is one error naming the input, the version and the way out (`--full-refresh`). A column
added (a `metaData` commit alone) and a compaction (`remove` without `dataChange`) pass.
At most `LOOK_AHEAD` commits are read per input.
"""

from __future__ import annotations

import json
from pathlib import Path

from pyspark.sql import SparkSession

from sqlflow.errors import Location, SqlflowError
from sqlflow.runtime import offsets
from sqlflow.runtime.delta import deltalog

LOOK_AHEAD = 500


def reached(checkpoint: Path) -> dict[str, tuple[int, bool]]:
    """Delta table id -> (version, isStartingVersion) of each source in the newest offsets file."""
    path = checkpoint / "offsets" / str(offsets.next_batch(checkpoint) - 1)
    out: dict[str, tuple[int, bool]] = {}
    if not path.is_file():
        return out
    for line in path.read_text().splitlines()[2:]:
        try:
            o = json.loads(line)
            out[str(o["reservoirId"])] = (int(o["reservoirVersion"]), bool(o.get("isStartingVersion")))
        except (ValueError, KeyError, TypeError):
            continue  # not a Delta offset
    return out


def check(spark: SparkSession, checkpoint: Path, relations: list[str], *, what: str, path: str,
          rebuild: str) -> None:
    """Refuse the start when one of `relations` was rewritten since the checkpoint (module doc)."""
    ends = reached(checkpoint)
    if not ends:
        return
    for relation, info in deltalog.locate(spark, relations).items():
        if info.format != "delta" or info.location is None:
            continue
        location = info.location
        latest = deltalog.latest_version(spark, relation, location)
        if latest is None:
            continue
        end = ends.get(deltalog.table_id(spark, location, latest) or _asked_id(spark, relation))
        if end is None:
            continue
        version, starting = end
        first = max(version + 1 if starting else version, latest - LOOK_AHEAD + 1)
        for v, action in deltalog.commit_actions(spark, location, list(range(first, latest + 1))):
            removed = action.get("remove")
            if removed and removed.get("dataChange", True):
                raise SqlflowError(
                    f"{what}: input `{relation}` was rewritten at Delta version {v}, after this "
                    f"query's checkpoint `{checkpoint}` (rows removed or changed: an overwrite, a "
                    "DELETE or UPDATE, a column's type changed); a stream reads appends only, so it "
                    "cannot resume over it", location=Location(path),
                    hint=f"rebuild the model from the rewritten input with `{rebuild}`; to change a "
                         "column, add a new one (an added column is read as it is)")


def _asked_id(spark: SparkSession, relation: str) -> str:
    """The table id from Spark, when its log's checksum file cannot be read here (slower: it
    computes the table's size first)."""
    return str(spark.sql(f"DESCRIBE DETAIL {deltalog.quote(relation)}").collect()[0]["id"])
