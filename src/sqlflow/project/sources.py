"""Sources and yml plumbing: YAML that remembers lines, columns, and `sources:` tables.

A source table carries sqlflow's event-time semantics from the table's `meta: sqlflow:` (or
`config: meta: sqlflow:`); a source-level block gives defaults its tables can override.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sqlflow.errors import DiagnosticSink, Location, SqlflowError, did_you_mean
from sqlflow.project.config import SourceSemantics, micros, semantics_keys
from sqlflow.project.eventtime import EventTime
from sqlflow.project.kafka import KafkaBinding, kafka_keys

# --- YAML with line numbers ---------------------------------------------------------------------


class LineDict(dict):
    """A YAML mapping that remembers its own line and each key's line (1-based)."""

    line: int = 0
    key_lines: dict[str, int]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.key_lines = {}


class LineLoader(yaml.SafeLoader):
    pass


class DuplicateKey(yaml.YAMLError):
    """A key written twice in one mapping: YAML would keep the last one silently."""

    def __init__(self, key: Any, first: int, second: int) -> None:
        super().__init__(f"duplicate key {key!r}")
        self.key, self.first, self.second = key, first, second


def _check_duplicates(loader: yaml.SafeLoader, node: yaml.MappingNode) -> None:
    """Refuse a key written twice in one mapping (a `<<:` merge may still be overridden)."""
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        try:
            first = seen.get(key)
        except TypeError:  # an unhashable key: the constructor reports it
            continue
        line = key_node.start_mark.line + 1
        if first is not None:
            raise DuplicateKey(key, first, line)
        seen[key] = line


def _construct_mapping(loader: LineLoader, node: yaml.MappingNode) -> LineDict:
    _check_duplicates(loader, node)
    loader.flatten_mapping(node)
    data = LineDict()
    data.line = node.start_mark.line + 1
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        data[key] = loader.construct_object(value_node, deep=True)
        data.key_lines[key] = key_node.start_mark.line + 1
    return data


LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def load_yaml(path: Path, rel: str) -> Any:
    """Parse a YAML file; a syntax error becomes a SqlflowError at its line and column."""
    try:
        return yaml.load(path.read_text(), Loader=LineLoader)  # noqa: S506 (SafeLoader subclass)
    except DuplicateKey as exc:
        raise SqlflowError(f"key `{exc.key}` is written twice (lines {exc.first} and {exc.second}); "
                           "YAML would keep the last value silently",
                           location=Location(rel, exc.second),
                           hint=f"keep one of them (line {exc.first} or {exc.second})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        loc = Location(rel, mark.line + 1, mark.column + 1) if mark else Location(rel)
        raise SqlflowError(f"invalid YAML: {getattr(exc, 'problem', None) or exc}",
                           location=loc, hint="fix the YAML syntax") from None


def line_of(data: Any, key: str | None = None) -> int:
    """The line of a mapping (or of one of its keys), 0 when unknown."""
    if not isinstance(data, LineDict):
        return 0
    return data.key_lines.get(key, data.line) if key is not None else data.line


# --- values ---------------------------------------------------------------------------------------


class Column(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    name: str
    description: str = ""
    data_type: str | None = None
    meta: dict[str, Any] = Field(default_factory=dict)


class SourceTable(BaseModel):
    """One table of a yml `sources:` entry, with sqlflow's event-time semantics."""

    model_config = ConfigDict(frozen=True, populate_by_name=True)

    source_name: str
    name: str
    schema_: str = Field(alias="schema")
    identifier: str
    kind: Literal["stream", "static"] | None = None
    event_time: str | None = None
    ingest_time: str | None = None
    allowed_lateness: timedelta = timedelta(0)
    future_tolerance: timedelta = timedelta(0)
    partition_column: str | None = None
    ready_marker: str | None = None
    kafka: KafkaBinding | None = None  # docs/semantics.md, "Kafka sources"
    declared: frozenset[str] = frozenset()
    description: str = ""
    columns: tuple[Column, ...] = ()
    meta: dict[str, Any] = Field(default_factory=dict)
    path: str = ""
    line: int = 0

    @property
    def schema(self) -> str:  # type: ignore[override]
        return self.schema_

    @property
    def key(self) -> str:
        return f"{self.source_name}.{self.name}"

    @property
    def time(self) -> EventTime:
        """The table's event-time block, durations in microseconds."""
        return EventTime(self.event_time, self.ingest_time, micros(self.allowed_lateness),
                         micros(self.future_tolerance))

    @property
    def location(self) -> Location:
        return Location(self.path, self.line)


# --- reading `sources:` ------------------------------------------------------------------------


def columns_of(entry: dict, rel: str, sink: DiagnosticSink) -> tuple[Column, ...]:
    out = []
    for col in entry.get("columns") or []:
        try:
            out.append(Column.model_validate(col))
        except ValidationError as exc:
            sink.error(f"bad column entry: {exc.errors()[0]['msg']}", Location(rel, line_of(col)),
                       "each column needs a `name:`")
    return tuple(out)


def source_tables(entry: dict, rel: str, sink: DiagnosticSink) -> list[SourceTable]:
    source_sem = _semantics_block(entry)
    out = []
    for table in entry.get("tables") or []:
        if not isinstance(table, dict) or not isinstance(table.get("name"), str):
            sink.error("every source table needs a `name:`", Location(rel, line_of(table)),
                       "add `name: ...`")
            continue
        sem = LineDict({**(source_sem or {}), **(_semantics_block(table) or {})})
        for part in (source_sem, _semantics_block(table)):
            sem.key_lines.update(getattr(part, "key_lines", {}))
        semantics = _semantics(sem, Location(rel, _semantics_line(table) or line_of(table)), sink)
        if semantics is None:
            continue
        fields = semantics.model_dump(include=semantics.model_fields_set)
        if semantics.kafka is not None:
            fields["kafka"] = _kafka(sem.get("kafka"), Location(rel, _find_key_line(sem, "kafka")
                                                                or line_of(table)), sink)
            if fields["kafka"] is None:
                continue
            untyped = [c for c in columns_of(table, rel, sink) if not c.data_type]
            for col in untyped:  # the yml columns are the payload's schema
                sink.error(f"Kafka source `{table['name']}`: column `{col.name}` has no `data_type`",
                           Location(rel, line_of(col) or line_of(table)),
                           "give every column of a Kafka source a type (the JSON payload's schema)")
            if untyped:
                continue
        out.append(SourceTable(
            source_name=entry["name"], name=table["name"],
            schema=str(entry.get("schema") or entry["name"]),
            identifier=str(table.get("identifier") or table["name"]),
            declared=frozenset(semantics.model_fields_set), **fields,
            description=table.get("description") or "", columns=columns_of(table, rel, sink),
            meta=dict(table.get("meta") or {}), path=rel, line=line_of(table)))
    return out


def _semantics_block(entry: dict) -> LineDict | None:
    """`meta: sqlflow:` merged over `config: meta: sqlflow:`, keeping each key's line."""
    block = LineDict()
    for holder in ((entry.get("config") or {}).get("meta") or {}, entry.get("meta") or {}):
        part = holder.get("sqlflow") if isinstance(holder, dict) else None
        if isinstance(part, dict):
            block.update(part)
            block.key_lines.update(getattr(part, "key_lines", {}))
    return block or None


def _semantics_line(table: dict) -> int:
    for holder in (table.get("meta"), (table.get("config") or {}).get("meta")):
        if isinstance(holder, LineDict) and "sqlflow" in holder:
            return holder.key_lines["sqlflow"]
    return 0


def _semantics(block: dict, where: Location, sink: DiagnosticSink) -> SourceSemantics | None:
    try:
        return SourceSemantics.model_validate(block)
    except ValidationError as exc:
        for err in exc.errors():
            key = str(err["loc"][0]) if err["loc"] else ""
            line = _find_key_line(block, key) or where.line
            loc = Location(where.path, line)
            if err["type"] == "extra_forbidden":
                sink.error(f"unknown sqlflow source key `{key}`", loc,
                           did_you_mean(key, semantics_keys()))
            else:
                hint = "" if err["type"] == "value_error" else f"fix the value of `{key}`"
                sink.error(f"`{key}`: {err['msg'].removeprefix('Value error, ')}", loc, hint)
        return None


def _kafka(block: Any, where: Location, sink: DiagnosticSink) -> KafkaBinding | None:
    """The `kafka:` block as a binding; each problem reported at its key's line."""
    try:
        return KafkaBinding.model_validate(block)
    except ValidationError as exc:
        for err in exc.errors():
            key = str(err["loc"][0]) if err["loc"] else ""
            loc = Location(where.path, _find_key_line(block, key) or where.line)
            if err["type"] == "extra_forbidden":
                sink.error(f"unknown key `{key}` in the `kafka:` binding", loc,
                           did_you_mean(key, kafka_keys()))
            elif err["type"] == "missing":
                sink.error(f"the `kafka:` binding needs `{key}:`", loc,
                           f"add `{key}: ...` (e.g. `topic: ad_impressions`)")
            elif err["type"].startswith("literal_error"):
                sink.error(f"`kafka.{key}` has an invalid value {err['input']!r}", loc,
                           f"use one of {err.get('ctx', {}).get('expected', '')}")
            elif not key:  # a rule over several keys (`KafkaBinding._aligned_together`)
                sink.error(f"the `kafka:` binding: {err['msg'].removeprefix('Value error, ')}",
                           where, "see docs/semantics.md, \"Kafka sources\"")
            else:
                sink.error(f"`kafka.{key}`: {err['msg'].removeprefix('Value error, ')}", loc,
                           f"fix the value of `{key}`")
        return None


def _find_key_line(block: dict, key: str) -> int:
    return block.key_lines.get(key, 0) if isinstance(block, LineDict) else 0
