"""The model graph from refs and sources: topological order, `--select`, cycles with their path."""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlflow.errors import Location, SqlflowError
from sqlflow.project.selector import SelectGraph, SelectNode, evaluate, parse_selection


@dataclass(frozen=True)
class Dag:
    """Models and the refs between them. `order` is topological (parents first, ties by name)."""

    order: tuple[str, ...]
    parents: Mapping[str, tuple[str, ...]]  # model -> the models it refs
    children: Mapping[str, tuple[str, ...]]  # model -> the models that ref it
    sources: Mapping[str, tuple[str, ...]]  # model -> "source.table" keys it reads
    paths: Mapping[str, str]
    tags: Mapping[str, tuple[str, ...]]
    # model id -> what selectors look at (fqn, config, ...); models missing here get one
    # from their path and tags
    nodes: Mapping[str, SelectNode] = field(default_factory=dict)
    package: str = ""  # the project's name, the first part of every fqn
    kinds: Mapping[str, str] = field(default_factory=dict)  # name -> resource type if not model

    def ancestors(self, name: str) -> set[str]:
        """Every model `name` depends on, transitively (not `name` itself)."""
        return _reach(name, self.parents)

    def descendants(self, name: str) -> set[str]:
        """Every model that depends on `name`, transitively (not `name` itself)."""
        return _reach(name, self.children)

    def select(self, selectors: Sequence[str] | str | None,
               exclude: Sequence[str] | str | None = None) -> tuple[str, ...]:
        """The models `--select` and `--exclude` pick with dbt's grammar, in topological order.

        Names, folders (`staging`, `staging.*`), `path:`, `file`, `tag:`, `config.<key>:`,
        `resource_type:`, `source:`, `package:`, with `+`/`N+` on either side and `@`; words
        unite, commas intersect (`sqlflow.project.selector_spec`). None or empty selects
        everything. A part that matches nothing raises, listing what the project has.
        """
        if not selectors and not exclude:
            return self.order
        chosen = self.select_ids(selectors, exclude)
        return tuple(n for n in self.order if node_id(self.kind(n), n) in chosen)

    def kind(self, name: str) -> str:
        """The node's dbt resource type: `model`, or `seed` for a seed file."""
        return self.kinds.get(name, "model")

    def select_ids(self, selectors: Sequence[str] | str | None,
                   exclude: Sequence[str] | str | None = None) -> set[str]:
        """The unique ids (`model.x`, `source.s.t`, ...) of every node the selection picks."""
        return evaluate(self.graph(), parse_selection(selectors, exclude))

    def graph(self) -> SelectGraph:
        """The selectable graph: the models and the sources they read, with their edges."""
        nodes = dict(self.nodes)
        parents: dict[str, tuple[str, ...]] = {}
        children: dict[str, list[str]] = {}
        for name in self.order:
            mid = node_id(self.kind(name), name)
            ups = [node_id(self.kind(p), p) for p in self.parents.get(name, ())]
            for key in self.sources.get(name, ()):
                sid = node_id("source", key)
                nodes.setdefault(sid, SelectNode(sid, key, "source", (self.package, *key.split(".", 1)),
                                                 "", self.package))
                ups.append(sid)
            parents[mid] = tuple(ups)
            for up in ups:
                children.setdefault(up, []).append(mid)
            if mid not in nodes:
                nodes[mid] = SelectNode(mid, name, self.kind(name), ("", *_folders(self.paths[name]), name),
                                        self.paths[name], "", tuple(self.tags.get(name, ())))
        return SelectGraph(nodes, parents, {k: tuple(v) for k, v in children.items()}, self.package)


def node_id(resource_type: str, name: str) -> str:
    """dbt's unique id without the package: `model.stg_a`, `source.ods.clicks`, `seed.raw_x`."""
    return f"{resource_type}.{name}"


def _folders(path: str) -> tuple[str, ...]:
    """The folders of a model file below its model path (`models/staging/a.sql` -> staging)."""
    return tuple(path.split("/")[1:-1])


def _reach(start: str, edges: Mapping[str, tuple[str, ...]]) -> set[str]:
    seen: set[str] = set()
    stack = list(edges.get(start, ()))
    while stack:
        node = stack.pop()
        if node not in seen:
            seen.add(node)
            stack.extend(edges.get(node, ()))
    return seen


def build_dag(models: Iterable[Any], fqns: Mapping[str, tuple[str, ...]] | None = None) -> Dag:
    """The DAG of rendered models (anything with name, path, refs, sources and config.tags).

    `fqns` (model name -> dbt's fqn: project, folders, name) lets selectors match folders and
    the package; without it a model's folders are read from its path.

    Raises SqlflowError naming the whole cycle (`a -> b -> a`, each with its file) when refs
    form one; refs to models not given are ignored (render has already checked them).
    """
    models = list(models)
    paths = {m.name: m.path for m in models}
    parents = {m.name: tuple(sorted(r for r in set(m.refs) if r in paths)) for m in models}
    children: dict[str, list[str]] = {name: [] for name in paths}
    for name, refs in parents.items():
        for parent in refs:
            children[parent].append(name)
    order = _toposort(parents, children)
    if len(order) < len(paths):
        _raise_cycle(parents, paths, set(paths) - set(order))
    return Dag(
        order=tuple(order), parents=parents,
        children={k: tuple(sorted(v)) for k, v in children.items()},
        sources={m.name: tuple(sorted({f"{s}.{t}" for s, t in m.sources})) for m in models},
        paths=paths, tags={m.name: tuple(m.config.tags) for m in models},
        nodes={node_id(_kind(m), m.name): _model_node(m, (fqns or {}).get(m.name)) for m in models},
        package=next(iter((fqns or {}).values()), ("",))[0],
        kinds={m.name: _kind(m) for m in models if _kind(m) != "model"})


def _kind(node: Any) -> str:
    """A node's dbt resource type: what it says (a seed says `seed`), else `model`."""
    return str(getattr(node, "resource_type", "model"))


def _model_node(model: Any, fqn: tuple[str, ...] | None) -> SelectNode:
    fqn = fqn or ("", *_folders(model.path), model.name)
    dump = getattr(model.config, "model_dump", None)
    config = dump(by_alias=True) if dump is not None else {"tags": list(model.config.tags)}
    return SelectNode(node_id(_kind(model), model.name), model.name, _kind(model), tuple(fqn), model.path,
                      fqn[0], tuple(model.config.tags), config)


def _toposort(parents: Mapping[str, tuple[str, ...]], children: Mapping[str, list[str]]) -> list[str]:
    waiting = {name: len(refs) for name, refs in parents.items()}
    ready = [name for name, count in waiting.items() if count == 0]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        name = heapq.heappop(ready)
        order.append(name)
        for child in children[name]:
            waiting[child] -= 1
            if waiting[child] == 0:
                heapq.heappush(ready, child)
    return order


def _raise_cycle(parents: Mapping[str, tuple[str, ...]], paths: Mapping[str, str],
                 stuck: set[str]) -> None:
    """Walk refs inside the unsortable models until one repeats: that loop is the cycle."""
    node = min(stuck)
    walk: list[str] = []
    while node not in walk:
        walk.append(node)
        node = min(p for p in parents[node] if p in stuck)
    cycle = walk[walk.index(node):] + [node]
    shown = " -> ".join(f"{n} ({paths[n]})" for n in cycle)
    raise SqlflowError(f"models ref each other in a cycle: {shown}",
                       location=Location(paths[cycle[0]]),
                       hint="each arrow is a ref(); remove one of them to break the cycle")
