"""Model and source configuration: small pydantic sections with typed defaults, dbt's merge rules.

A model's final config is `dbt_project.yml` `models:` tree (root first, the most specific folder
last) < the model's yml `config:` < its `{{ config(...) }}` calls. Each layer is checked on its
own so an unknown key or a bad value is reported where it was written; the merged layers are
validated once more into a frozen `ModelConfig`.
"""

from __future__ import annotations

import copy
import re
from datetime import timedelta
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from sqlflow.errors import Diagnostic, Location, did_you_mean

# --- durations and sizes ------------------------------------------------------------------------

_UNITS: dict[str, timedelta] = {}
for _names, _delta in (
    (("us", "microsecond", "microseconds"), timedelta(microseconds=1)),
    (("ms", "millisecond", "milliseconds"), timedelta(milliseconds=1)),
    (("s", "sec", "secs", "second", "seconds"), timedelta(seconds=1)),
    (("m", "min", "mins", "minute", "minutes"), timedelta(minutes=1)),
    (("h", "hr", "hrs", "hour", "hours"), timedelta(hours=1)),
    (("d", "day", "days"), timedelta(days=1)),
    (("w", "week", "weeks"), timedelta(weeks=1)),
):
    for _name in _names:
        _UNITS[_name] = _delta

_DURATION = re.compile(r"^\s*(?:interval\s+)?(\d+(?:\.\d+)?)\s*([a-z]+)\s*$", re.IGNORECASE)
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?i?b?)\s*$", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


def parse_duration(value: Any) -> timedelta:
    """'10 minutes', '30 seconds', '1 hour', '2 days', '500 ms' (or a timedelta) as a timedelta.

    Raises ValueError with a message a user can act on; a bare number is refused because its
    unit would be a guess.
    """
    if isinstance(value, timedelta):
        return value
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(f"expected a duration like '10 minutes', got {value!r}")
    match = _DURATION.match(str(value))
    if not match:
        raise ValueError(f"`{value}` is not a duration; write it like '10 minutes' or '30 seconds'")
    amount, unit = float(match.group(1)), match.group(2).lower()
    if unit not in _UNITS:
        raise ValueError(f"`{value}` has an unknown time unit `{unit}`; "
                         "use seconds, minutes, hours or days")
    return _UNITS[unit] * amount


def micros(delta: timedelta) -> int:
    """A duration in whole microseconds, the unit every time bound in a plan uses."""
    return delta // timedelta(microseconds=1)


def column_list(value: Any) -> tuple[str, ...]:
    """A `partition_by`-style config value (None, a column, or a list) as a tuple of columns."""
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)


def parse_size(value: Any) -> int:
    """'128MB', '1 GiB', '512k' or a byte count as bytes."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    match = _SIZE.match(str(value)) if isinstance(value, str) else None
    if not match:
        raise ValueError(f"`{value}` is not a size; write it like '128MB'")
    unit = match.group(2).lower()[:1] if match.group(2) else ""
    return int(float(match.group(1)) * _SIZE_UNITS[unit])


def _trigger(value: Any) -> Any:
    if value is None or value in ("available-now", "once"):
        return value
    try:
        return parse_duration(value)
    except ValueError:
        raise ValueError(f"`{value}` is not a trigger; use 'available-now', 'once' or an "
                         "interval like '30 seconds'") from None


Duration = Annotated[timedelta, BeforeValidator(parse_duration)]
ByteSize = Annotated[int, BeforeValidator(parse_size)]
Materialized = Literal["streaming_table", "table", "view", "incremental", "ephemeral"]
StrOrList = str | list[str]


class ModelConfig(BaseModel):
    """A model's merged configuration: dbt's common keys plus sqlflow's streaming keys."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    # dbt
    materialized: Materialized = "view"
    enabled: bool = True
    schema_: str | None = Field(default=None, alias="schema")
    alias: str | None = None
    database: str | None = None
    tags: list[str] = Field(default_factory=list)
    meta: dict[str, Any] = Field(default_factory=dict)
    pre_hook: list[str | dict[str, Any]] = Field(default_factory=list)
    post_hook: list[str | dict[str, Any]] = Field(default_factory=list)
    persist_docs: dict[str, Any] = Field(default_factory=dict)
    full_refresh: bool | None = None
    on_schema_change: str | None = "ignore"
    on_configuration_change: str | None = None
    unique_key: StrOrList | None = None
    incremental_strategy: str | None = None
    incremental_predicates: list[str] | None = None
    merge_update_columns: list[str] | None = None
    merge_exclude_columns: list[str] | None = None
    file_format: str | None = None
    location_root: str | None = None
    partition_by: StrOrList | None = None
    clustered_by: StrOrList | None = None
    buckets: int | None = None
    options: dict[str, Any] | None = None
    tblproperties: dict[str, Any] | None = None
    docs: dict[str, Any] = Field(default_factory=dict)
    grants: dict[str, Any] = Field(default_factory=dict)
    contract: dict[str, Any] = Field(default_factory=dict)
    quoting: dict[str, Any] = Field(default_factory=dict)
    column_types: dict[str, Any] = Field(default_factory=dict)
    sql_header: str | None = None
    group: str | None = None
    access: Literal["private", "protected", "public"] | None = None
    packages: list[str] = Field(default_factory=list)
    batch_size: str | None = None
    lookback: int | None = None
    begin: Any = None
    concurrent_batches: bool | None = None
    freshness: dict[str, Any] | None = None
    static_analysis: str | bool | None = None
    # sqlflow
    stream_strategy: Literal["incremental", "stateful"] = "incremental"
    skew_margin: Duration = timedelta(0)
    # interval triggers: after an input got no rows for this long, close what its silence holds
    # open (incremental: pad by the busy side's frontier; stateful: a heartbeat). None: wait
    idle_timeout: Duration | None = None
    trigger: Annotated[Literal["available-now", "once"] | timedelta | None,
                       BeforeValidator(_trigger)] = None
    # the stream service (docs/semantics.md, "The stream service"): a model whose query fails
    # is restarted alone, after `restart_backoff` doubled per restart, at most `max_restarts`
    # times within `restart_window`; then it is marked failed and the others keep running
    max_restarts: int = Field(default=3, ge=0)
    restart_window: Duration = timedelta(minutes=10)
    restart_backoff: Duration = timedelta(seconds=1)
    event_time: str | None = None
    quarantine: str | None = None
    max_files_per_partition: int | None = Field(default=None, gt=0)
    target_file_size: ByteSize | None = None
    backfill_partition: StrOrList | None = None
    routing: dict[str, Any] | None = None  # fan-out routing group (sqlflow.planning.fusion.RoutingConfig)

    @property
    def schema_name(self) -> str | None:
        """The custom schema (`schema:` config), before generate_schema_name."""
        return self.schema_


def config_keys() -> list[str]:
    """Every valid model config key as a user writes it."""
    return sorted((f.alias or name) for name, f in ModelConfig.model_fields.items())


_KEY_SPELLINGS = {"pre-hook": "pre_hook", "post-hook": "post_hook", "schema_": "schema"}
_APPEND = {"tags", "pre_hook", "post_hook", "packages"}
_UPDATE = {"meta", "docs", "contract", "quoting", "column_types"}
_LISTIFY = _APPEND


def normalize_keys(layer: dict[str, Any]) -> dict[str, Any]:
    """A config layer with dbt's alternative spellings (`pre-hook`) folded to one key."""
    out: dict[str, Any] = {}
    for key, value in layer.items():
        key = _KEY_SPELLINGS.get(key, key)
        out[key] = _listify(value) if key in _LISTIFY else value
    return out


def _listify(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def merge_config(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """`override` applied over `base` with dbt's merge behaviours.

    `tags`, hooks and `packages` append (tags deduplicated), `meta`/`docs`/`contract`/... update
    like a dict, `grants` update per privilege (a `+privilege` key extends the grantee list),
    everything else is replaced by the more specific value.
    """
    out = copy.copy(base)
    for key, value in normalize_keys(override).items():
        if key in _APPEND and key in out:
            merged = out[key] + value
            out[key] = list(dict.fromkeys(merged)) if key == "tags" else merged
        elif key in _UPDATE and isinstance(out.get(key), dict) and isinstance(value, dict):
            out[key] = {**out[key], **value}
        elif key == "grants" and isinstance(out.get(key), dict) and isinstance(value, dict):
            out[key] = _merge_grants(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _merge_grants(base: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    out = {k: _listify(v) for k, v in base.items()}
    for key, value in other.items():
        name = key.lstrip("+")
        if key.startswith("+") and name in out:
            out[name] = out[name] + _listify(value)
        else:
            out[name] = _listify(value)
    return out


def check_layer(layer: dict[str, Any], where: Location,
                key_lines: dict[str, int] | None = None) -> list[Diagnostic]:
    """Problems with one config layer (unknown keys, bad values), each at its key's line."""
    diags: list[Diagnostic] = []
    try:
        ModelConfig.model_validate(normalize_keys(layer))
    except ValidationError as exc:
        for err in exc.errors():
            key = str(err["loc"][0]) if err["loc"] else ""
            raw_key = next((k for k in layer if _KEY_SPELLINGS.get(k, k) == key), key)
            loc = _at_key(where, key_lines, raw_key)
            diags.append(config_error(err, key, loc))
    return diags


def _at_key(where: Location, key_lines: dict[str, int] | None, key: str) -> Location:
    line = (key_lines or {}).get(key) or (key_lines or {}).get(f"+{key}")
    return Location(where.path, line) if line else where


def config_error(err: Any, key: str, loc: Location | None) -> Diagnostic:
    """One pydantic error about a config key, as a user-facing diagnostic."""
    if err["type"] == "extra_forbidden":
        return Diagnostic(f"unknown config key `{key}`", loc, did_you_mean(key, config_keys()))
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"].startswith("literal_error"):
        choices = err.get("ctx", {}).get("expected", "")
        return Diagnostic(f"config `{key}` has an invalid value {err['input']!r}", loc,
                          f"use one of {choices}")
    hint = "" if err["type"] == "value_error" else f"fix the value of `{key}`"
    return Diagnostic(f"config `{key}`: {msg}", loc, hint)


# --- sources --------------------------------------------------------------------------------------


class SourceSemantics(BaseModel):
    """sqlflow's per-table source semantics (yml `meta: sqlflow:` or `config: meta: sqlflow:`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["stream", "static"] | None = None
    event_time: str | None = None
    ingest_time: str | None = None
    allowed_lateness: Duration = timedelta(0)
    future_tolerance: Duration = timedelta(0)
    partition_column: str | None = None
    ready_marker: str | None = None
    kafka: dict[str, Any] | None = None  # checked by `sqlflow.project.kafka.KafkaBinding`


def semantics_keys() -> list[str]:
    return sorted(SourceSemantics.model_fields)


def tree_layer(level: dict[str, Any]) -> dict[str, Any]:
    """The configs of one level of the `models:` tree (dbt: `+key`, or a non-dict value)."""
    out: dict[str, Any] = {}
    for key, value in level.items():
        if isinstance(key, str) and key.startswith("+"):
            out[key[1:].strip()] = value
        elif not isinstance(value, dict):
            out[key] = value
    return out


def project_layers(models_tree: dict[str, Any], fqn: tuple[str, ...]) -> list[dict[str, Any]]:
    """Config layers for a model with `fqn`, least specific first (dbt's fqn_search)."""
    layers = [tree_layer(models_tree)]
    level: Any = models_tree
    for part in fqn:
        level = level.get(part) if isinstance(level, dict) else None
        if not isinstance(level, dict):
            break
        layers.append(tree_layer(level))
    return layers
