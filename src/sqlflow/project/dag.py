"""The model graph from refs and sources: topological order, `--select`, cycles with their path."""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlflow.errors import Location, SqlflowError, did_you_mean


@dataclass(frozen=True)
class Dag:
    """Models and the refs between them. `order` is topological (parents first, ties by name)."""

    order: tuple[str, ...]
    parents: Mapping[str, tuple[str, ...]]  # model -> the models it refs
    children: Mapping[str, tuple[str, ...]]  # model -> the models that ref it
    sources: Mapping[str, tuple[str, ...]]  # model -> "source.table" keys it reads
    paths: Mapping[str, str]
    tags: Mapping[str, tuple[str, ...]]

    def ancestors(self, name: str) -> set[str]:
        """Every model `name` depends on, transitively (not `name` itself)."""
        return _reach(name, self.parents)

    def descendants(self, name: str) -> set[str]:
        """Every model that depends on `name`, transitively (not `name` itself)."""
        return _reach(name, self.children)

    def select(self, selectors: Sequence[str] | str | None) -> tuple[str, ...]:
        """The models matched by dbt-style selectors (union), in topological order.

        `name`, `+name` (with ancestors), `name+` (with descendants), `tag:x`,
        `path:models/staging`; `+`/`+` work on every method. None or empty selects everything.
        """
        if not selectors:
            return self.order
        if isinstance(selectors, str):
            selectors = [selectors]
        chosen: set[str] = set()
        for selector in (part for s in selectors for part in s.split()):
            chosen |= self._select_one(selector)
        return tuple(n for n in self.order if n in chosen)

    def _select_one(self, selector: str) -> set[str]:
        up, down = selector.startswith("+"), selector.endswith("+")
        core = selector.strip("+")
        matched = self._match(core, selector)
        out = set(matched)
        for name in matched:
            if up:
                out |= self.ancestors(name)
            if down:
                out |= self.descendants(name)
        return out

    def _match(self, core: str, selector: str) -> set[str]:
        method, _, value = core.partition(":") if ":" in core else ("", "", core)
        if method == "tag":
            found = {n for n, tags in self.tags.items() if value in tags}
            known = sorted({t for tags in self.tags.values() for t in tags})
            what = f"no model has tag `{value}`"
        elif method == "path" or (not method and ("/" in value or value.endswith(".sql"))):
            prefix = value.rstrip("/")
            found = {n for n, p in self.paths.items()
                     if p == prefix or p.startswith(prefix + "/")}
            known = sorted({p.rsplit("/", 1)[0] for p in self.paths.values()})
            what = f"no model file under `{value}`"
        elif not method:
            found = {value} if value in self.paths else set()
            known, what = sorted(self.paths), f"no model named `{value}`"
        else:
            raise SqlflowError(f"unknown selector method `{method}:` in `{selector}`",
                               hint=did_you_mean(method, ["tag", "path"]))
        if not found:
            raise SqlflowError(f"--select `{selector}`: {what}", hint=did_you_mean(value, known))
        return found


def _reach(start: str, edges: Mapping[str, tuple[str, ...]]) -> set[str]:
    seen: set[str] = set()
    stack = list(edges.get(start, ()))
    while stack:
        node = stack.pop()
        if node not in seen:
            seen.add(node)
            stack.extend(edges.get(node, ()))
    return seen


def build_dag(models: Iterable[Any]) -> Dag:
    """The DAG of rendered models (anything with name, path, refs, sources and config.tags).

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
        paths=paths, tags={m.name: tuple(m.config.tags) for m in models})


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
