"""dbt plugin: the project's Python UDFs in plain `dbt run` (dbt-spark, `session` method).

dbt-spark's `session` method builds its SparkSession lazily, on the first query, with
`SparkSession.builder...getOrCreate()`; nothing of the project's Python runs in that process,
so a model calling `spmid_department(...)` fails with UNRESOLVED_ROUTINE. dbt-core discovers
every importable top-level module whose name starts with `dbt_` and instantiates the
`dbtPlugin` classes it lists in `plugins` once the project is loaded (dbt/plugins/manager.py).
This module is one: when the command will run SQL on a `session` target and the project has
a `udfs/` folder, it builds the session first, from the same profile target dbt resolved
(sqlflow's `build_session`, which also registers the UDFs). dbt-spark's `getOrCreate()` then
returns that session. The profile stays plain dbt-spark; nothing is patched. A Spark Connect
target (`spark.remote`) works the same way: the UDFs are registered in the Connect session
(pickled by value, run by the server's Python workers), and dbt-spark's `getOrCreate()` gets
that session back (docs/deploy.md, "Spark Connect").

Opt out with `SQLFLOW_DBT_UDFS=0`. The plugin API is marked experimental by dbt-core; it is
pinned with dbt-core 1.11 (docs/stack.md).
"""

from __future__ import annotations

import os
from pathlib import Path

from dbt.plugins.manager import dbtPlugin

# dbt commands that open a connection (and so start Spark with the session method anyway).
_RUNS_SQL = {"run", "build", "test", "seed", "snapshot", "show", "compile", "run-operation",
             "generate", "retry", "clone"}


class SqlflowUdfs(dbtPlugin):
    """Registers `udfs/*.py` in the SparkSession dbt-spark will use."""

    def initialize(self) -> None:
        if os.environ.get("SQLFLOW_DBT_UDFS", "1").lower() in ("0", "false", "no"):
            return
        import click

        ctx = click.get_current_context(silent=True)
        obj = ctx.obj if ctx is not None and isinstance(ctx.obj, dict) else {}
        flags, profile = obj.get("flags"), obj.get("profile")
        if flags is None or profile is None or getattr(flags, "WHICH", None) not in _RUNS_SQL:
            return
        creds = profile.credentials
        method = getattr(getattr(creds, "method", None), "value", getattr(creds, "method", None))
        if getattr(creds, "type", None) != "spark" or method != "session":
            return
        project_dir = Path(flags.PROJECT_DIR or os.getcwd()).resolve()
        if not any((project_dir / "udfs").glob("*.py")):
            return
        register(project_dir, profile.target_name, dict(creds.server_side_parameters or {}))


def register(project_dir: Path, target_name: str, server_side_parameters: dict) -> None:
    """Register the project's UDFs in the running session, or build it first."""
    from pyspark.sql import SparkSession

    from sqlflow.engine.udfs import register_udfs

    active = None if "spark.remote" in server_side_parameters else SparkSession.getActiveSession()
    if active is not None:  # `sqlflow dbt`, or dbt invoked in-process by a test
        register_udfs(active, project_dir)
        return
    from sqlflow.engine.session import build_session
    from sqlflow.project.profiles import Target

    target = Target.model_validate({
        "name": target_name, "type": "spark", "method": "session", "schema": "default",
        "server_side_parameters": {k: str(v) for k, v in server_side_parameters.items()}})
    build_session(target, project_dir)


plugins = [SqlflowUdfs]
