"""The data files a Delta stream source handed one micro-batch, found from the table's own log
and the batch's start and end offsets, without a Spark job (docs/design.md §2.9).

A micro-batch inside one table version (a commit, or the starting snapshot, with more files than
`maxFilesPerTrigger` lets in) is named by its offsets only as positions in the order the source
admits files; this module reproduces that order from the log:

- the starting snapshot at version `v`: its live files sorted by `(modificationTime, path)`,
  `path` as the log writes it; a file's index is its place in that order;
- a later version `v`: the `add` actions of commit `v` that change data, in the order the commit
  lists them; a file's index is its place among them.

An offset `(v, i, starting)` says the source has handed out every file up to index `i` of version
`v` (`i` = -1: nothing of `v`; `starting`: `v` is the starting snapshot), and every file of every
version before it. A batch is the files after its start offset up to and including its end
offset. A batch that starts with nothing delivered and ends after the starting snapshot is
answered with the table's live files before its end version: the same rows as the snapshot and
the commits after it, because a stream only passes appends and rewrites that change no rows.

Anything this cannot read exactly (a commit that is not a plain append: `plain_commit`;
offsets that do not follow each other; a log that no longer holds a version) is None, and the caller keeps a copy of the rows instead (`sqlflow.runtime.incremental.older`).
`tests/runtime/test_source_files.py` compares every batch of real streams over real tables
with this module's answer, row for row, so a Delta release that changes the order fails there
first.

Also here: `by_version` and `file_name`, how a restart reads such files back (by file name, at a version
where each is live), and `appends_only`, whether a new stream may read a table from its first
commit instead of from its latest snapshot.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from sqlflow.runtime.delta import deltalog, logfiles
from sqlflow.runtime.offsets import Offset

Adds = list[dict[str, Any]]

# a table with more commits than this starts a new stream from its snapshot (`appends_only`)
MAX_START_COMMITS = 1000


def snapshot_order(table_dir: Path, version: int) -> Adds:
    """The live files of the table at `version` in the order a stream starting there admits
    them (raises `logfiles.Unsupported`, OSError, ValueError like `logfiles.live_adds`)."""
    adds = logfiles.live_adds(table_dir, version).values()
    return sorted(adds, key=lambda a: (int(a.get("modificationTime") or 0), str(a["path"])))


def commit_order(log: Path, version: int) -> Adds | None:
    """The data-changing `add` actions of commit `version`, in the order a stream admits them;
    None when the commit is not a plain append (`plain_commit`) or cannot be read."""
    try:
        actions = logfiles.commit(log, version)
    except (OSError, ValueError):
        return None
    return plain_commit(actions, first=version == 0)


def plain_commit(actions: list[Any], *, first: bool) -> Adds | None:
    """The data-changing `add` actions of one commit's `actions`, in order; None when a Delta
    stream source does not pass the commit as a plain append: a data-changing `remove`, a
    deletion vector, a metadata change after the table's first commit (`first`)."""
    adds = []
    for action in actions:
        if not isinstance(action, dict):
            return None
        add, remove = action.get("add"), action.get("remove")
        if isinstance(remove, dict) and remove.get("dataChange", True):
            return None
        if action.get("metaData") and not first:
            return None
        if isinstance(add, dict) and add.get("dataChange", True):
            if add.get("deletionVector"):
                return None
            adds.append(add)
    return adds


Versioned = list[tuple[int, dict[str, Any]]]


def batch_files(table_dir: Path, start: Offset | None, end: Offset, *,
                snapshot: Callable[[int], Adds] | None = None) -> Versioned | None:
    """The `add` actions of the files a micro-batch was handed, after offset `start` (None: the
    query's first batch, nothing before it) up to and including offset `end`, each with a table
    version at which the file is live (the snapshot's, or the commit's that added it: a rewrite
    that changes no rows may remove it later). `snapshot`: a (memoized) `snapshot_order` of this
    table. None when not known exactly (module docstring)."""
    order = snapshot or (lambda v: snapshot_order(table_dir, v))
    try:
        return _files(table_dir / "_delta_log", order, start, end)
    except (logfiles.Unsupported, OSError, ValueError, KeyError):
        return None


def _files(log: Path, order: Callable[[int], Adds], start: Offset | None, end: Offset) -> Versioned | None:
    def at(version: int, adds: Adds) -> Versioned:
        return [(version, a) for a in adds]

    if end.starting and end.index < 0:
        return []  # the stream has not begun its snapshot
    if start is None or (start.starting and start.index < 0):  # nothing delivered before
        if end.starting:
            return at(end.version, order(end.version)[:end.index + 1])
        before = [] if end.version == 0 else at(end.version - 1, list(
            logfiles.live_adds(log.parent, end.version - 1).values()))
        return _then(log, before, end.version, end)
    if start.starting:  # inside the starting snapshot
        rest = at(start.version, order(start.version)[start.index + 1:])
        if end.starting:
            if end.version != start.version or end.index < start.index:
                return None
            return rest[:end.index - start.index]
        return _then(log, rest, start.version + 1, end)
    if end.starting or (end.version, end.index) < (start.version, start.index):
        return None
    if start.index < 0:
        return _then(log, [], start.version, end)
    first = commit_order(log, start.version)
    if first is None:
        return None
    if end.version == start.version:
        return at(start.version, first[start.index + 1:end.index + 1])
    return _then(log, at(start.version, first[start.index + 1:]), start.version + 1, end)


def _then(log: Path, files: Versioned, version: int, end: Offset) -> Versioned | None:
    """`files`, then every data file of the commits from `version` up to `end`'s (whole before
    it, up to its index in it)."""
    last = end.version if end.index >= 0 else end.version - 1
    out = list(files)
    for v in range(version, last + 1):
        adds = commit_order(log, v)
        if adds is None:
            return None
        out += [(v, a) for a in (adds if v < end.version else adds[:end.index + 1])]
    return out


def by_version(table_dir: Path, files: Versioned) -> dict[int, Adds] | None:
    """`files` grouped by the version to read each at, for a read that picks a table's files
    by `_metadata.file_name` (`file_name`); None when a name is not unique among the files live
    at its version (Delta's writers name each file with a random UUID, so this is a guard) or
    the log cannot say."""
    out: dict[int, Adds] = {}
    for version, add in files:
        out.setdefault(version, []).append(add)
    try:
        for version, adds in out.items():
            live = Counter(file_name(path) for path in logfiles.live_adds(table_dir, version))
            if any(live[file_name(a["path"])] != 1 for a in adds):
                return None
    except (logfiles.Unsupported, OSError, ValueError, KeyError):
        return None
    return out


def file_name(path: str) -> str:
    """A data file's name without its folders, as Spark's `_metadata.file_name` gives it."""
    return unquote(path).rsplit("/", 1)[-1]


def appends_only(table_dir: Path, max_commits: int = MAX_START_COMMITS) -> bool:
    """Whether every commit of the table since its creation is still in its log and only adds
    files: no `remove` at all (a rewrite that changes no rows removes files too, and a vacuum
    may have deleted them since), no deletion vector, no metadata change after the first
    commit, and at most `max_commits` of them. A new stream may then start from version 0
    instead of the latest snapshot (`startingVersion`): every file ever added is live, so it
    is handed exactly the snapshot's rows, commit by commit (module docstring), and the Delta
    source finds each batch's files in the commit files instead of a Spark job over the
    snapshot per trigger."""
    log = table_dir / "_delta_log"
    try:
        versions = sorted(deltalog.commit_versions(str(log)))
    except OSError:
        return False
    if not versions or versions != list(range(len(versions))) or len(versions) > max_commits:
        return False
    for version in versions:
        try:
            actions = logfiles.commit(log, version)
        except (OSError, ValueError):
            return False
        if any(isinstance(a, dict) and a.get("remove") for a in actions) or \
                plain_commit(actions, first=version == 0) is None:
            return False
    return True
