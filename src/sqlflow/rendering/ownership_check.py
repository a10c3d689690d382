"""Compile-time ownership: no two models share a table, and no model writes a source's.

dbt refuses two models resolving to one relation; sqlflow also refuses a model's sink or
quarantine table that is a declared source, another model's table or quarantine, the commit
log, or a name in sqlflow's reserved `__sqlflow_` namespace (state tables). Each refusal is at
the config line that chose the name (docs/semantics.md, "Table ownership"). The runtime checks
the `sqlflow.model` table property again before every write (`sqlflow.runtime.ownership`).
"""

from __future__ import annotations

from typing import Any

from sqlflow.errors import Diagnostic, Location
from sqlflow.planning.plan import COMMIT_LOG, quarantine_table
from sqlflow.project.config_origin import config_line

RESERVED_PREFIX = "__sqlflow"


def check_ownership(renderer: Any, rendered: dict[str, Any]) -> list[Diagnostic]:
    """Diagnostics for every table two owners would share, over all enabled models."""
    project = renderer.project
    sources = {str(renderer.source_relation(t)).lower(): key for key, t in project.sources.items()}
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
    claims: dict[str, list[tuple[str, str, str, Location]]] = {}
    for name, role, table, where in tables:
        problem = _reserved(table) or (
            f"is the declared source `{sources[table.lower()]}`" if table.lower() in sources else None)
        if problem is not None:
            diags.append(_diag(name, role, table, problem, where))
        else:
            claims.setdefault(table.lower(), []).append((name, role, table, where))
    clashed: set[str] = set()
    # sinks first: a default quarantine follows its sink, so its clash is no news
    for claimants in sorted(claims.values(), key=lambda c: all(r == "quarantine" for _, r, _, _ in c)):
        if len(claimants) < 2 or any(c[0] in clashed for c in claimants):
            continue
        # blame the config that chose the name (a line in the file), else the later model
        blamed = [c for c in claimants if c[3].line] or claimants[1:]
        for name, role, table, where in blamed:
            other = next((c for c in claimants if c[0] != name), None)
            problem = (f"is already the {other[1]} table of model `{other[0]}`" if other
                       else "is both its sink and its quarantine table")
            diags.append(_diag(name, role, table, problem, where))
            clashed.add(name)
    return diags


def _diag(name: str, role: str, table: str, problem: str, where: Location) -> Diagnostic:
    return Diagnostic(f"model `{name}`: its {role} table `{table}` {problem}; two owners cannot "
                      "share a table", where, _hint(role))


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



