"""The older rows a running `incremental` join holds, looked up by join key on the driver
(docs/design.md §2.9, "Held rows looked up by key").

A held run (`sqlflow.runtime.incremental.held`) kept each micro-batch's clean new rows cached
in Spark, and every later micro-batch's join scanned all of them: a 20-minute interval holds
the last 20 minutes of each input, and the scan grew with it (about 0.5 µs of CPU a held row,
1.6 s a micro-batch at 3.4 million held rows, `bench/latency.py`, 2026-12-02). Most held rows
cannot match: a row of input A joins a row of B only where the join's equality keys are equal
(`plan.KeyPair`). On the embedded `local` target the driver is the machine the rows are on, so
a run may hold them here instead, as Arrow tables, and hand Spark's join only the rows whose
keys are among the other side's new rows. `key_index.Store` finds the candidates by a hash
index of the held keys; `matching` keeps those whose keys are equal (a hash table of the new
keys, probed by every candidate in Arrow's vectorized code; over all held rows, the first
lookup, it and the join of its rows stayed at 0.3 s where Spark's scan grew,
`bench/held_probe.py`, and the probe alone grew 0.02 s a million held rows,
`bench/key_index.py`).
The join then sees fewer older rows, never a row it would have matched that is missing: a
held row whose keys no new row has matches no new row.

Which pairs are looked up by (`usable`): both columns plain columns of their inputs, of the
same type, and a type whose equality in Arrow is Spark's (integers, strings of the default
collation, dates, timestamps, booleans; not floating point, where Spark's `=` takes NaN equal
to NaN, nor decimals of different scales, nor a collation). A row with a NULL key matches
nothing, in Spark and here. Only for the micro-batches whose rows the driver takes anyway
(`MicroBatch`'s few rows); a run of a larger micro-batch goes back to Spark's caches.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import (
    BooleanType,
    ByteType,
    DataType,
    DateType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from sqlflow.planning.plan import KeyPair

_EXACT = (BooleanType, ByteType, ShortType, IntegerType, LongType, DateType, TimestampType,
          TimestampNTZType)
_INDEX = "__sqlflow_row"


def usable(pairs: Sequence[KeyPair], schema: StructType, other: StructType) -> tuple[tuple[str, str], ...]:
    """The pairs (this input's column, the other input's column) a lookup can use: both plain
    columns of their inputs' schemas (by name, any case), of one type Arrow compares as Spark
    does. Each as the schemas spell it.

    >>> from pyspark.sql.types import StructField, DoubleType
    >>> a = StructType([StructField("K", StringType()), StructField("x", DoubleType())])
    >>> b = StructType([StructField("k", StringType()), StructField("x", DoubleType())])
    >>> usable([KeyPair("k", "b", "K"), KeyPair("x", "b", "x"), KeyPair("lower(k)", "b", "k")], a, b)
    (('K', 'k'),)
    """
    out = []
    for pair in pairs:
        mine, theirs = _field(schema, pair.column), _field(other, pair.other_column)
        if mine is None or theirs is None or mine[1] != theirs[1] or not _exact(mine[1]):
            continue
        out.append((mine[0], theirs[0]))
    return tuple(dict.fromkeys(out))


def _field(schema: StructType, name: str) -> tuple[str, DataType] | None:
    found = [f for f in schema.fields if f.name.lower() == name.lower()]
    return (found[0].name, found[0].dataType) if len(found) == 1 else None


def _exact(kind: DataType) -> bool:
    """Whether Arrow's equality of two values of `kind` is Spark's `=`."""
    if isinstance(kind, StringType):
        return getattr(kind, "collation", "UTF8_BINARY") == "UTF8_BINARY"
    return isinstance(kind, _EXACT)


def keys_of(new: pa.Table, pairs: Sequence[tuple[str, str]]) -> pa.Table:
    """The other input's new rows' distinct keys, named as this input's columns (`pairs`:
    this column, the other's), rows with a NULL key left out (they match nothing)."""
    table = new.select([theirs for _, theirs in pairs]).rename_columns([mine for mine, _ in pairs])
    table = table.filter(_no_null(table))
    return table.group_by(table.column_names).aggregate([])


def matching(held: Sequence[pa.Table], keys: pa.Table) -> pa.Table | None:
    """The rows of the `held` tables (one schema) whose columns named as `keys`' equal one of
    its rows; None when nothing is held."""
    if not held:
        return None
    table = pa.concat_tables(held, promote_options="permissive")
    columns = keys.column_names
    if keys.num_rows == 0:
        return table.slice(0, 0)
    # a filter chunk by chunk (the held rows are not copied) on the key of most new values
    first = max(columns, key=lambda c: pc.count_distinct(keys[c]).as_py())
    table = table.filter(pc.is_in(table[first], value_set=pc.unique(keys[first]), skip_nulls=True))
    if len(columns) == 1 or not table.num_rows:
        return table
    # the few rows left, checked on every key (a semi-join of their keys, by row number)
    index = table.select(columns).append_column(_INDEX, pa.array(range(table.num_rows), pa.int64()))
    hit = index.join(keys, keys=columns, join_type="left semi")[_INDEX]
    return table.take(hit)


def _no_null(table: pa.Table) -> pa.ChunkedArray | pa.Array:
    valid = [pc.is_valid(table[c]) for c in table.column_names]
    out = valid[0]
    for v in valid[1:]:
        out = pc.and_(out, v)
    return out
