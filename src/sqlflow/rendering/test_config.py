"""A dbt data test's config, merged as dbt merges it (docs/semantics.md, "sqlflow build").

Layers, later over earlier: dbt's defaults (`TestConfig`), the root project's `tests:` /
`data_tests:` tree of dbt_project.yml matched on the test's fqn (`+severity: warn`, per
folder), the yml test entry's own keys (`severity:`, `where:` ... beside the arguments, or
under `config:`), and a singular test's `{{ config(...) }}`. `store_failures_as` decides over
`store_failures` when set (dbt's `TestConfig.finalize_and_validate`).

>>> c = resolve([{"+severity": "warn"}, {"where": "x > 1", "store_failures": True}])
>>> (c.severity, c.where, c.store_as, c.fail_calc, c.warn_if, c.schema)
('warn', 'x > 1', 'table', 'count(*)', '!= 0', 'dbt_test__audit')
>>> resolve([{"store_failures": True}, {"store_failures_as": "ephemeral"}]).store_as is None
True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

KEYS = ("severity", "enabled", "where", "limit", "warn_if", "error_if", "fail_calc",
        "store_failures", "store_failures_as", "schema", "alias", "database", "tags", "meta")


@dataclass(frozen=True)
class TestConfig:
    """What running the test needs. `store_as`: `table` / `view` when its failing rows are
    stored (in `schema`, named `alias`), None when not."""

    __test__ = False  # not a pytest class

    severity: str = "error"
    enabled: bool = True
    where: str | None = None
    limit: int | None = None
    fail_calc: str = "count(*)"
    warn_if: str = "!= 0"
    error_if: str = "!= 0"
    store_as: str | None = None
    schema: str = "dbt_test__audit"
    alias: str | None = None


def resolve(layers: list[dict[str, Any]]) -> TestConfig:
    """The config of the merged `layers` (each a dict of config keys, `+` prefixes allowed);
    ValueError for a value dbt refuses."""
    merged: dict[str, Any] = {}
    for layer in layers:
        for key, value in (layer or {}).items():
            key = str(key).lstrip("+")
            if key in KEYS and value is not None:
                merged[key] = value
    severity = str(merged.get("severity", "error")).lower()
    if severity not in ("warn", "error"):
        raise ValueError(f"severity must be either 'warn' or 'error', not '{merged['severity']}'")
    store_as = merged.get("store_failures_as")
    if store_as is None:
        store_as = "table" if merged.get("store_failures") is True else None
    elif store_as == "ephemeral":
        store_as = None
    elif store_as not in ("table", "view"):
        raise ValueError(f"'{store_as}' is not a valid value for `store_failures_as`. "
                         "Accepted values are: ['ephemeral', 'table', 'view']")
    limit = merged.get("limit")
    return TestConfig(
        severity=severity, enabled=merged.get("enabled", True) is not False,
        where=str(merged["where"]) if merged.get("where") else None,
        limit=int(limit) if limit is not None else None,
        fail_calc=str(merged.get("fail_calc", "count(*)")),
        warn_if=str(merged.get("warn_if", "!= 0")), error_if=str(merged.get("error_if", "!= 0")),
        store_as=store_as, schema=str(merged.get("schema", "dbt_test__audit")),
        alias=str(merged["alias"]) if merged.get("alias") else None)


def as_dict(config: TestConfig) -> dict[str, Any]:
    """The config as `config.get` sees it in the test's SQL (dbt's finalized `TestConfig`)."""
    return {"severity": config.severity.upper(), "where": config.where, "limit": config.limit,
            "fail_calc": config.fail_calc, "warn_if": config.warn_if, "error_if": config.error_if,
            "store_failures": config.store_as is not None,
            "store_failures_as": config.store_as or "ephemeral", "schema": config.schema,
            "alias": config.alias, "enabled": config.enabled}
