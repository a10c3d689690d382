"""Spark for every command: the SparkSession of a profile target (`session`), the project's
Python UDFs (`udfs`) and the `Context` a command carries (project folder, target, session)."""

from sqlflow.engine.context import Context
from sqlflow.engine.session import build_session

__all__ = ["Context", "build_session"]
