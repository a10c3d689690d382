"""Who owns a table: the `sqlflow.model` and `sqlflow.role` Delta table properties.

Every table sqlflow creates records the model that owns it and its role (docs/semantics.md,
"Table ownership"). Before a write replaces, overwrites, appends to or drops an existing table,
its owner is checked: a table of another model, or one sqlflow did not create (a source, or
another tool's table), is refused before anything is touched. The compiler refuses the same
collisions between models and sources it can see (`sqlflow.rendering.ownership_check`); this is the
runtime's own line of defence for tables it cannot see, e.g. a source not declared in yml.
"""

from __future__ import annotations

from typing import Any, Literal

from pyspark.sql import SparkSession

from sqlflow.errors import Location, SqlflowError
from sqlflow.planning.plan import Sink, Write
from sqlflow.runtime.delta import deltalog
from sqlflow.runtime.delta.deltalog import TableInfo

MODEL = "sqlflow.model"
ROLE = "sqlflow.role"
Role = Literal["sink", "quarantine", "state", "routed", "commitlog"]


def properties(owner: str, role: str) -> dict[str, str]:
    """The table properties a new table of `owner` in `role` is created with."""
    return {MODEL: owner, ROLE: role}


def tblproperties(owner: str, role: str) -> str:
    """`TBLPROPERTIES ('sqlflow.model' = 'm', ...)` for a CREATE statement; owner names are
    validated identifiers (sqlflow.identifiers), and quotes are escaped all the same."""
    items = ", ".join(f"'{k}' = '{_literal(v)}'" for k, v in properties(owner, role).items())
    return f"TBLPROPERTIES ({items})"


def _literal(value: str) -> str:
    return value.replace("\\", "\\\\").replace("'", "\\'")


def check(spark: SparkSession, table: str, owner: str, role: str, *, action: str,
          origin: str = "", info: TableInfo | None = None, adopt: bool = False) -> None:
    """Refuse to `action` (replace, overwrite, append to, drop) `table` unless it does not exist
    or `owner` owns it. `info`: the table's description when the caller has it. `adopt`: a
    table with no owner is accepted (a dbt materialization's table, as `dbt run` built it,
    on the operator's `--adopt-dbt-tables`: docs/semantics.md, "Table ownership")."""
    if info is None:
        if not spark.catalog.tableExists(table):
            return
        info = deltalog.describe(spark, table)
    found = info.owner
    if found is not None and found[0] == owner or found is None and adopt:
        return
    if found is None:
        whose = ("it was not created by sqlflow (no `sqlflow.model` table property): a source, "
                 "or another tool's table")
        take_over = (f"if `dbt run` built `{table}` for this model, run once with "
                     "`--adopt-dbt-tables`; " if role == "sink" else "")
        hint = (f"point the config at a table of its own; {take_over}if sqlflow created it before "
                "ownership was recorded, claim it once with `ALTER TABLE "
                f"{table} SET TBLPROPERTIES ('{MODEL}' = '{owner}', '{ROLE}' = '{role}')`")
    else:
        whose = f"it belongs to model `{found[0]}` (its {found[1] or 'table'})"
        hint = "give each model its own tables (its alias, schema and quarantine config)"
    raise SqlflowError(
        f"model `{owner}` would {action} table `{table}` (as its {role}), but {whose}; "
        "nothing was written", location=_location(origin), hint=hint)


def check_state(spark: SparkSession, table: str, owner: str, *, action: str, origin: str = "") -> None:
    """Refuse to `action` a state table (reserved `__sqlflow_` name: state copies, padding
    progress) that another model owns. One without an owner was built by a sqlflow that did
    not record owners yet: its reserved name is its claim."""
    if not spark.catalog.tableExists(table):
        return
    info = deltalog.describe(spark, table)
    if info.owner is not None and info.owner[0] != owner:
        check(spark, table, owner, "state", action=action, origin=origin, info=info)


def _location(origin: str) -> Location | None:
    if not origin:
        return None
    path, _, line = origin.partition(":")
    return Location(path, int(line) if line.isdigit() else 0)


def plan_tables(plan) -> list[tuple[str, str, str, str]]:
    """`(table, owner, role, origin)` of every table a batch, stream or routed plan writes."""
    if hasattr(plan, "targets"):
        out = [(t.sink.table, t.model, "routed", t.sink.origin or t.path) for t in plan.targets]
    else:
        out = [(plan.sink.table, plan.model, "sink", plan.sink.origin or plan.path)]
    return out + [(plan.quarantine, plan.model, "quarantine", plan.quarantine_origin or plan.path)]


def check_plans(spark: SparkSession, plans, *, action: str) -> None:
    """Refuse the whole run before anything is touched when one of `plans` would `action` a
    table it does not own (`action`: replace, drop).

    The tables are looked up together (`deltalog.locate`: one catalog call per database, not
    an existence check and a `DESCRIBE` each), and a Delta table's owner is read from its own
    log when the driver can see it (`deltalog.from_log`); anything else is described."""
    wanted = [(plan, row) for plan in plans for row in plan_tables(plan)]
    found = deltalog.locate(spark, [table for _, (table, *_) in wanted])
    for plan, (table, owner, role, origin) in wanted:
        view = getattr(plan, "sink", None) is not None and plan.sink.write == "view"
        adopt = bool(getattr(getattr(plan, "sink", None), "adopt_unowned", False))
        if view and role == "sink":  # a view is checked when it is replaced
            continue
        located = found.get(table.lower())
        if located is None:  # not there: nothing to refuse
            continue
        info = deltalog.from_log(spark, located.location) if located.format == "delta" else None
        check(spark, table, owner, role, action=action, origin=origin,
              info=info or deltalog.describe(spark, table), adopt=adopt and role == "sink")


def quarantine_sink(plan: Any, write: Write, partition_by: tuple[str, ...]) -> Sink:
    """The Sink of the plan's quarantine table, owned by the plan's model."""
    return Sink(plan.quarantine, write, partition_by, owner=plan.model, role="quarantine",
                origin=plan.quarantine_origin or plan.path)
