"""Compiler tests: load, render, DAG (no JVM), and dbt conformance (Spark + dbt)."""
