"""Spark SQL settings changed for the queries run inside a block, and restored after it.

A stream's micro-batch function runs on the query's own session (Structured Streaming clones
the session for each query), so a setting changed there reaches that query's micro-batches
only, never another model's query running beside it in the same process.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.sql import SparkSession


@contextmanager
def changed(spark: SparkSession, settings: dict[str, str]) -> Iterator[None]:
    """Run the block with `settings` (key -> value) set on `spark`; each key's value before
    (or its being unset) is put back after it, whatever the block raised."""
    before = {key: spark.conf.get(key, None) for key in settings}
    try:
        for key, value in settings.items():
            spark.conf.set(key, value)
        yield
    finally:
        for key, old in before.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)
