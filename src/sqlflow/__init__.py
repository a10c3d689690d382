"""sqlflow: one dbt-style SQL model, compiled to a Spark streaming plan or a batch backfill plan."""

__version__ = "0.1.0"
