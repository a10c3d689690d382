"""A `Selection` (sqlflow.project.selector_spec) evaluated over the project's nodes, as dbt does.

Nodes are anything with a `resource_type` (models and sources today; seeds join by being
nodes of type `seed` in the graph). Each criterion matches nodes by its method, then adds its
graph neighbours (`N+x` ancestors up to N hops, `x+N` descendants, `@x` descendants and all
their ancestors); the parts of one word intersect, words unite, `--exclude` is subtracted
(dbt-core's `dbt/graph/selector.py`). A criterion that matches nothing is an error that says
what exists, so a typo never runs (or skips) the wrong models silently.

>>> graph = SelectGraph({"model.a": SelectNode("model.a", "a", "model", ("p", "staging", "a"),
...                                             "models/staging/a.sql", "p")}, {}, {})
>>> sorted(evaluate(graph, parse_selection("staging.*")))
['model.a']
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase
from typing import Any

from sqlflow.errors import SqlflowError, did_you_mean
from sqlflow.project.selector_spec import Criterion, Intersection, Selection, parse_selection

# dbt's NodeType values: any of them is a valid `resource_type:` (one sqlflow has no node of
# matches nothing and says which types the project has)
RESOURCE_TYPES = ("model", "analysis", "test", "snapshot", "operation", "seed", "rpc",
                  "sql_operation", "doc", "source", "macro", "exposure", "metric", "group",
                  "saved_query", "semantic_model", "unit_test", "fixture", "function")

__all__ = ["RESOURCE_TYPES", "SelectGraph", "SelectNode", "evaluate", "parse_selection"]


@dataclass(frozen=True)
class SelectNode:
    """What a selector can look at: dbt's unique id, name, type, fqn, file, package, tags, config."""

    id: str
    name: str
    resource_type: str
    fqn: tuple[str, ...]
    path: str
    package: str
    tags: tuple[str, ...] = ()
    config: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SelectGraph:
    """Nodes by unique id, and the edges between them (parent ids and child ids)."""

    nodes: Mapping[str, SelectNode]
    parents: Mapping[str, tuple[str, ...]]
    children: Mapping[str, tuple[str, ...]]
    project: str = ""  # the root project's name: what `package:this` means


def evaluate(graph: SelectGraph, selection: Selection) -> set[str]:
    """The unique ids `selection` picks (every node when it includes nothing)."""
    chosen = (set().union(*(_intersect(graph, word) for word in selection.include))
              if selection.include else set(graph.nodes))
    for word in selection.exclude:
        chosen -= _intersect(graph, word, flag="--exclude")
    return chosen


def _intersect(graph: SelectGraph, word: Intersection, flag: str = "--select") -> set[str]:
    sets = [_with_neighbours(graph, c, _match(graph, c, flag)) for c in word]
    return set.intersection(*sets)


def _with_neighbours(graph: SelectGraph, c: Criterion, matched: set[str]) -> set[str]:
    out = set(matched)
    if c.childrens_parents:
        below = _reach(matched, graph.children, None) | matched
        out |= below | _reach(below, graph.parents, None)
    if c.parents:
        out |= _reach(matched, graph.parents, c.parents_depth)
    if c.children:
        out |= _reach(matched, graph.children, c.children_depth)
    return out


def _reach(start: Iterable[str], edges: Mapping[str, tuple[str, ...]], depth: int | None) -> set[str]:
    """Nodes within `depth` hops of `start` along `edges` (None: any number), not `start` itself
    unless reached again."""
    seen: set[str] = set()
    frontier = set(start)
    hops = 0
    while frontier and (depth is None or hops < depth):
        frontier = {n for node in frontier for n in edges.get(node, ())} - seen
        seen |= frontier
        hops += 1
    return seen


def _match(graph: SelectGraph, c: Criterion, flag: str) -> set[str]:
    nodes = graph.nodes.values()
    method = _METHODS[c.method]
    if c.method == "package" and c.value == "this":
        c = replace(c, value=graph.project)
    found = {n.id for n in nodes if method(n, c)}
    if not found:
        what, known = _missing(c, nodes)
        raise SqlflowError(f"{flag} `{c.raw}`: {what}", hint=_hint(c.value, known))
    return found


def _hint(value: str, known: list[str]) -> str:
    suggestion = did_you_mean(value, known)
    if suggestion.startswith("did you mean") or not known:
        return suggestion
    return suggestion.replace("valid choices", "the project has")


# --- the methods (dbt-core's dbt/graph/selector_methods.py) -------------------------------------


def _fqn(node: SelectNode, c: Criterion) -> bool:
    # dbt's QualifiedNameSelectorMethod: sources are not searched; a name matches with or
    # without its package in front
    if node.resource_type == "source":
        return False
    return _fqn_matches(node.fqn, c.value) or _fqn_matches(node.fqn[1:], c.value)


def _fqn_matches(fqn: tuple[str, ...], selector: str) -> bool:
    """dbt's is_selected_node: the leaf name, a dotted prefix, or a wildcard over the rest."""
    if not fqn:
        return False
    if fqn[-1] == selector:
        return True
    flat = [part for segment in fqn for part in segment.split(".")]
    wanted = selector.split(".")
    if len(flat) < len(wanted):
        return False
    for i, part in enumerate(wanted):
        if any(w in part for w in "*?[]"):
            if fnmatchcase(".".join(flat[i:]), ".".join(wanted[i:])):
                return True
            return "." not in selector and fnmatchcase(fqn[-1], selector)
        if flat[i] != part:
            return False
    return True


def _tag(node: SelectNode, c: Criterion) -> bool:
    return any(fnmatchcase(tag, c.value) for tag in node.tags)


def _path(node: SelectNode, c: Criterion) -> bool:
    """dbt globs the value under the project root and matches a node's file or any folder
    holding it; the same over the node's project-relative path, without touching the disk."""
    if not node.path:
        return False
    pattern = _clean_path(c.value)
    parts = node.path.split("/")
    candidates = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    return any(_glob(candidate, pattern) for candidate in candidates)


def _clean_path(value: str) -> str:
    value = value.replace("\\", "/").rstrip("/")
    while value.startswith("./"):
        value = value[2:]
    return value


def _glob(path: str, pattern: str) -> bool:
    """pathlib's glob rule: `*` stays inside one folder, `**` spans any number of them."""
    if "**" in pattern:
        return fnmatchcase(path, pattern)
    got, want = path.split("/"), pattern.split("/")
    return len(got) == len(want) and all(fnmatchcase(g, w) for g, w in zip(got, want, strict=True))


def _file(node: SelectNode, c: Criterion) -> bool:
    if not node.path:
        return False
    name = node.path.rsplit("/", 1)[-1]
    return fnmatchcase(name, c.value) or fnmatchcase(name.rsplit(".", 1)[0], c.value)


def _config(node: SelectNode, c: Criterion) -> bool:
    value = _config_value(node, c.args)
    if value is _ABSENT:
        return False
    truth = c.value.lower()
    values = value if isinstance(value, list | tuple) else [value]
    return any(v == c.value or (truth == "true" and v is True) or (truth == "false" and v is False)
               for v in values)


_ABSENT = object()


def _config_value(node: SelectNode, keys: tuple[str, ...]) -> Any:
    value: Any = node.config
    for key in keys:
        if not isinstance(value, Mapping) or key not in value:
            return _ABSENT
        value = value[key]
    return value


def _resource_type(node: SelectNode, c: Criterion) -> bool:
    if c.value not in RESOURCE_TYPES:
        raise SqlflowError(f"`{c.raw}`: `{c.value}` is not a dbt resource type",
                           hint=did_you_mean(c.value, RESOURCE_TYPES))
    return node.resource_type == c.value


def _source(node: SelectNode, c: Criterion) -> bool:
    # dbt's SourceSelectorMethod: `src`, `src.table` or `package.src.table`, each part a glob
    if node.resource_type != "source":
        return False
    package, source, table = node.fqn[0], node.fqn[-2], node.fqn[-1]
    wanted = c.value.split(".")
    target = {1: [source], 2: [source, table], 3: [package, source, table]}.get(len(wanted))
    return target is not None and all(fnmatchcase(t, w) for t, w in zip(target, wanted, strict=True))


def _package(node: SelectNode, c: Criterion) -> bool:
    return fnmatchcase(node.package, c.value)

_METHODS = {"fqn": _fqn, "tag": _tag, "path": _path, "file": _file, "config": _config,
            "resource_type": _resource_type, "source": _source, "package": _package}


def _missing(c: Criterion, nodes: Iterable[SelectNode]) -> tuple[str, list[str]]:
    """What the error says was not found, and the values that do exist for that method."""
    nodes = list(nodes)
    selectable = [n for n in nodes if n.resource_type != "source"]
    if c.method == "fqn":
        folders = {".".join(n.fqn[1:i]) for n in selectable for i in range(2, len(n.fqn))}
        return f"no model named `{c.value}`", sorted({n.name for n in selectable} | folders)
    if c.method == "tag":
        return (f"no model has tag `{c.value}`",
                sorted({t for n in nodes for t in n.tags}))
    if c.method == "path":
        return (f"no model file under `{c.value}`",
                sorted({n.path.rsplit("/", 1)[0] for n in nodes if n.path}))
    if c.method == "file":
        return (f"no model file named `{c.value}`",
                sorted({n.path.rsplit("/", 1)[-1] for n in nodes if n.path}))
    if c.method == "config":
        key = ".".join(c.args)
        present = {repr_value(v) for n in nodes
                   for v in _listed(_config_value(n, c.args)) if v is not _ABSENT}
        return f"no model has config `{key}` = `{c.value}`", sorted(present)
    if c.method == "resource_type":
        return (f"the project has no node of type `{c.value}`",
                sorted({n.resource_type for n in nodes}))
    if c.method == "source":
        return (f"no source named `{c.value}`",
                sorted({".".join(n.fqn[-2:]) for n in nodes if n.resource_type == "source"}))
    return f"no package named `{c.value}`", sorted({n.package for n in nodes})


def _listed(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else [value]


def repr_value(value: Any) -> str:
    """A config value as it would be written after `config.<key>:` (booleans lower-case).

    >>> repr_value(True), repr_value("view")
    ('true', 'view')
    """
    return str(value).lower() if isinstance(value, bool) else str(value)
