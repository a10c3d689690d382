"""Compile-time check of every name sqlflow will write into SQL (docs/semantics.md, "Names").

A model's database, table, quarantine table and partition columns come from its file name and
config; a source's schema and identifier from yml. Each must be a name Spark holds as a plain
identifier (`sqlflow.identifiers.RULE`); anything else is an error at the config line that set
it, before any statement is built, so no name ever becomes DDL or a path.
"""

from __future__ import annotations

from typing import Any

from sqlflow.errors import Diagnostic, Location, SqlflowError
from sqlflow.identifiers import check_name
from sqlflow.planning.plan import quarantine_table
from sqlflow.project.config import column_list
from sqlflow.project.config_origin import config_line


def check_names(renderer: Any, rendered: dict[str, Any]) -> list[Diagnostic]:
    """Diagnostics for every invalid database, table or partition column name."""
    diags: list[Diagnostic] = []

    def check(name: str, what: str, where: Location, hint: str) -> None:
        try:
            check_name(name, what, where, hint)
        except SqlflowError as exc:
            diags.extend(exc.diagnostics)

    for key, table in sorted(renderer.project.sources.items()):
        relation = renderer.source_relation(table)
        for part, what in ((relation.schema, "schema"), (relation.identifier, "identifier")):
            check(part, f"source `{key}`'s {what}", table.location, f"fix the source's {what} in yml")
    for name in sorted(rendered):
        model = rendered[name]
        if model.config.materialized == "ephemeral":
            continue
        raw = renderer.project.models[name].raw_sql
        relation = model.relation
        where = config_line(model.path, raw, "schema")
        check(relation.schema, f"model `{name}`'s database", where,
              "set `schema` to a plain name (the database is `<target schema>_<schema>`)")
        where = config_line(model.path, raw, "alias")
        check(relation.identifier, f"model `{name}`'s table", where,
              "set `alias` to a plain name, or rename the model file")
        if model.config.quarantine:
            where = config_line(model.path, raw, "quarantine")
            for part in quarantine_table(str(relation), model.config.quarantine).split("."):
                check(part, f"model `{name}`'s quarantine table part", where,
                      "set `quarantine` to `table` or `database.table`, plain names")
        where = config_line(model.path, raw, "partition_by")
        for column in column_list(model.config.partition_by):
            check(column, f"model `{name}`'s partition column", where,
                  "partition by a plain column name (alias the expression in the SELECT)")
    return diags
