"""Which file format a model's table has: the same in sqlflow as under dbt-spark.

dbt's own materializations (`table`, `incremental`; a `view` has no files) write the model's
`file_format` config, and dbt-spark's default when it is not set: `parquet`. A
`streaming_table` is always Delta, in both tools (its partition-scoped overwrite and the
stream's exactly-once append need Delta; the project's dbt materialization writes Delta too).
So a table built by `dbt run` and rebuilt by `sqlflow run` (or the other way round) keeps its
format (docs/semantics.md, "File formats").

>>> file_format("table", None), file_format("table", "delta"), file_format("streaming_table", None)
('parquet', 'delta', 'delta')
"""

from __future__ import annotations

DBT_SPARK_DEFAULT = "parquet"  # dbt-spark's SparkConfig: file_format when a model sets none

# dbt's own materializations: a table dbt built at the model's relation (without sqlflow's
# owner properties) is the model's table, which sqlflow replaces as dbt itself would
DBT_MATERIALIZATIONS = ("table", "incremental", "view")


def file_format(materialized: str, configured: str | None) -> str:
    """The format of the model's table: `configured`, else Delta for a `streaming_table` and
    dbt-spark's default for dbt's own materializations."""
    if configured:
        return configured.lower()
    return "delta" if materialized == "streaming_table" else DBT_SPARK_DEFAULT
