"""Where a model's config names something: the line of `key=` in its `config()` call.

Refusals about a table a config names (ownership, identifiers) point at the config line that
chose it, so the analyst sees which setting to change. A key set in yml or dbt_project.yml (no
`key=` in the model file) points at the model file itself.
"""

from __future__ import annotations

import re

from sqlflow.errors import Location


def config_line(path: str, raw_sql: str, *keys: str) -> Location:
    """The first line of the model file setting one of `keys` (`key=` or `'key':`), else the file."""
    for key in keys:
        pattern = re.compile(rf"(\b{re.escape(key)}\s*=[^=]|['\"]{re.escape(key)}['\"]\s*:)")
        for number, line in enumerate(raw_sql.split("\n"), 1):
            if pattern.search(line):
                return Location(path, number)
    return Location(path)
