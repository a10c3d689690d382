"""dbt's node selection grammar (`--select`, `--exclude`) parsed into a spec value.

The grammar is dbt-core's (`dbt/graph/selector_spec.py`, `cli.py`): arguments and the
space-separated words inside them are a union, the comma-separated parts of one word an
intersection, `--exclude` is subtracted; each part is `[@][N+][method[.arg...]:]value[+N]`.
A value without a method is a path when it holds a `/`, a file when it ends in `.sql`/`.py`/
`.csv`, else a fully qualified name (`fqn`: a node's name, a folder, `staging.*`). Evaluating
a spec over the project's nodes is `sqlflow.project.selector` (docs/design.md §3).

>>> spec = parse_selection(["+stg_a+1,tag:nightly", "@mart"], ["config.materialized:view"])
>>> [[c.raw for c in word] for word in spec.include], [c.args for w in spec.exclude for c in w]
([['+stg_a+1', 'tag:nightly'], ['@mart']], [('materialized',)])
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from sqlflow.errors import SqlflowError, did_you_mean

# dbt-core's RAW_SELECTOR_PATTERN, unchanged
_PATTERN = re.compile(
    r"\A"
    r"(?P<childrens_parents>(\@))?"
    r"(?P<parents>((?P<parents_depth>(\d*))\+))?"
    r"((?P<method>([\w.]+)):)?(?P<value>(.*?))"
    r"(?P<children>(\+(?P<children_depth>(\d*))))?"
    r"\Z"
)

# dbt's methods that make sense for the nodes sqlflow knows; `config` takes arguments
METHODS = ("fqn", "tag", "path", "file", "config", "resource_type", "source", "package")


@dataclass(frozen=True)
class Criterion:
    """One `[@][N+]method:value[+N]` part. A depth of None with its flag set means unlimited."""

    raw: str
    method: str
    args: tuple[str, ...]
    value: str
    parents: bool
    parents_depth: int | None
    children: bool
    children_depth: int | None
    childrens_parents: bool


# one word of a --select argument: its comma-separated criteria, all of which must match
Intersection = tuple[Criterion, ...]


@dataclass(frozen=True)
class Selection:
    """What `--select` and `--exclude` ask for: a union of intersections, minus another.

    An empty `include` means everything (dbt's default); an empty `exclude` removes nothing.
    """

    include: tuple[Intersection, ...]
    exclude: tuple[Intersection, ...] = ()


def parse_selection(select: Sequence[str] | str | None,
                    exclude: Sequence[str] | str | None = None) -> Selection:
    """The spec of `--select` and `--exclude` arguments (each may hold several words)."""
    return Selection(_union(select, "--select"), _union(exclude, "--exclude"))


def _union(args: Sequence[str] | str | None, flag: str) -> tuple[Intersection, ...]:
    if not args:
        return ()
    if isinstance(args, str):
        args = [args]
    words = [word for arg in args for word in arg.split()]
    return tuple(tuple(parse_criterion(part, flag) for part in word.split(",")) for word in words)


def parse_criterion(raw: str, flag: str = "--select") -> Criterion:
    """One selector part, with dbt's defaults and errors that say what is valid.

    >>> parse_criterion("2+staging.*").parents_depth, parse_criterion("2+staging.*").value
    (2, 'staging.*')
    >>> parse_criterion("models/staging").method, parse_criterion("stg_a.sql").method
    ('path', 'file')
    """
    match = _PATTERN.match(raw)
    if match is None or not match["value"]:
        raise SqlflowError(f"{flag} `{raw}`: not a selector (no value to search for)",
                           hint="write [@][N+][method:]value[+N], e.g. `+stg_orders`, "
                                "`tag:nightly`, `staging.*`, `config.materialized:view`")
    value = match["value"]
    if match["method"] is None:
        method, args = _default_method(value), ()
    else:
        method, *rest = match["method"].split(".")
        args = tuple(rest)
        if method not in METHODS:
            raise SqlflowError(f"{flag} `{raw}`: unknown selector method `{method}:`",
                               hint=did_you_mean(method, METHODS))
        if method == "config" and not args:
            raise SqlflowError(f"{flag} `{raw}`: `config:` needs the key to compare",
                               hint="write config.<key>:<value>, e.g. `config.materialized:view`")
    if match["childrens_parents"] and match["children"]:
        raise SqlflowError(f"{flag} `{raw}`: the `@` prefix and a `+` suffix cannot be combined",
                           hint="`@x` already selects x's descendants and their ancestors")
    return Criterion(
        raw=raw, method=method, args=args, value=value,
        parents=bool(match["parents"]), parents_depth=_depth(match["parents_depth"]),
        children=bool(match["children"]), children_depth=_depth(match["children_depth"]),
        childrens_parents=bool(match["childrens_parents"]))


def _default_method(value: str) -> str:
    """dbt's choice when no method is written (SelectionCriteria.default_method)."""
    if "/" in value or "\\" in value:
        return "path"
    if value.lower().endswith((".sql", ".py", ".csv")):
        return "file"
    return "fqn"


def _depth(text: str | None) -> int | None:
    return int(text) if text else None
