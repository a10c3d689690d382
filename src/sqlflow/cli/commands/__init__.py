"""Every `sqlflow` command, one module each.

A module defines one click command (or group) named `command`, imports what it shares from
`sqlflow.cli.support`, and imports Spark and the runtime inside the command, so `sqlflow --help`
stays fast. List the module here.
"""

from __future__ import annotations

from importlib import import_module

_MODULES: tuple[str, ...] = ("demo", "compile", "run", "dbt", "check", "compact", "diff",
                            "lineage", "mark_ready", "repair", "status", "verify", "ctl",
                            "seed", "build", "kafka", "audit")

COMMANDS = [import_module(f"sqlflow.cli.commands.{name}").command for name in _MODULES]
