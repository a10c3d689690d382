"""The `sqlflow` command line: `main` is the group, `commands/` holds every command."""

from sqlflow.cli.main import main

__all__ = ["main"]
