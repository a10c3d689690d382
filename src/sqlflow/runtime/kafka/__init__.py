"""Kafka sources (docs/semantics.md, "Kafka sources"): each topic archived to the source's Delta
table, each offset range exactly once; models, backfills, `dbt run` and `verify` read the archive."""
