"""Compile-time ownership: no two models share a table, and no model writes a source's.

dbt refuses two models resolving to one relation; sqlflow also refuses a model's sink or
quarantine table that is a declared source, another model's table or quarantine, the commit
log, or a name in sqlflow's reserved `__sqlflow_` namespace (state tables). Each refusal is at
the config line that chose the name (docs/semantics.md, "Table ownership"). The runtime checks
the `sqlflow.model` table property again before every write (`sqlflow.runtime.ownership`).
"""

from __future__ import annotations

from typing import Any

from sqlflow.config_origin import config_line
from sqlflow.errors import Diagnostic
from sqlflow.plan import COMMIT_LOG, quarantine_table

RESERVED_PREFIX = "__sqlflow"


def check_ownership(renderer: Any, rendered: dict[str, Any]) -> list[Diagnostic]:
    """Diagnostics for every table two owners would share, over all enabled models."""
    project = renderer.project
    sources = {str(renderer.source_relation(t)).lower(): key for key, t in project.sources.items()}
    owners: dict[str, tuple[str, str]] = {}  # relation -> (model, role)
    diags: list[Diagnostic] = []
    tables = []
    for name in sorted(rendered):
        model = rendered[name]
        if model.config.materialized == "ephemeral":
            continue
        sink = str(model.relation)
        raw = project.models[name].raw_sql
        tables.append((name, "sink", sink, config_line(model.path, raw, "alias", "schema")))
        tables.append((name, "quarantine", quarantine_table(sink, model.config.quarantine),
                       config_line(model.path, raw, "quarantine")))
    for name, role, table, where in tables:
        key = table.lower()
        problem = _reserved(table)
        if problem is None and key in sources:
            problem = f"is the declared source `{sources[key]}`"
        if problem is None and key in owners:
            other, other_role = owners[key]
            problem = (f"is already the {other_role} table of model `{other}`" if other != name
                       else f"is also its own {other_role} table")
        if problem is not None:
            diags.append(Diagnostic(
                f"model `{name}`: its {role} table `{table}` {problem}; two owners cannot share "
                "a table", where, _hint(role)))
            continue
        owners[key] = (name, role)
    return diags


def _reserved(table: str) -> str | None:
    if table.lower() == COMMIT_LOG:
        return "is sqlflow's commit log"
    if table.rsplit(".", 1)[-1].lower().startswith(RESERVED_PREFIX):
        return f"is in sqlflow's reserved `{RESERVED_PREFIX}` namespace (state tables)"
    return None


def _hint(role: str) -> str:
    if role == "quarantine":
        return "set `quarantine` to a table of its own, or remove it (default: `<table>__quarantine`)"
    return "give the model a relation of its own (its alias or schema config, or its file name)"



