"""Which models a change touches: the files git says changed since a ref, mapped to models.

Used by `sqlflow check --changed-since REF` and `sqlflow diff --base REF`. A model is
touched when its SQL file changed, when a macro it calls (directly or through other macros)
changed, or when a yml file that configures it or declares a source it reads changed; a
change to dbt_project.yml touches every model. Descendants of touched models are added by the
caller (their plans read the touched models' outputs).
"""

from __future__ import annotations

import re
import subprocess
import tarfile
from io import BytesIO
from pathlib import Path

from sqlflow.errors import SqlflowError
from sqlflow.project.load import Project


def git(project_dir: Path, *args: str) -> str:
    """Run git in `project_dir`; a failure is a user error naming the command."""
    try:
        done = subprocess.run(["git", "-C", str(project_dir), *args], capture_output=True,
                              check=False)
    except FileNotFoundError:
        raise SqlflowError("git was not found", hint="install git, or run without a ref") from None
    if done.returncode != 0:
        err = done.stderr.decode(errors="replace").strip().splitlines()
        if any("not a git repository" in line for line in err):
            raise SqlflowError(f"{project_dir} is not inside a git repository, so there is no "
                               "revision to compare with",
                               hint="run this in a git clone of the project (or `git init` and "
                                    "commit it first)")
        raise SqlflowError(f"`git {' '.join(args)}` failed: {err[-1] if err else done.returncode}",
                           hint="pass a commit, branch or tag that exists, e.g. origin/main")
    return done.stdout.decode()


def changed_files(project_dir: Path, ref: str) -> set[str]:
    """Project-relative paths that differ between `ref` and the working tree, untracked
    files included (a new model is a change too)."""
    diff = git(project_dir, "diff", "--name-only", "--relative", ref, "--", ".")
    untracked = git(project_dir, "ls-files", "--others", "--exclude-standard", ".")
    return {line.strip() for line in (diff + untracked).splitlines() if line.strip()}


def export_revision(project_dir: Path, ref: str, dest: Path) -> Path:
    """Write the project as it was at `ref` into `dest` (git archive: no worktree to clean up)."""
    prefix = git(project_dir, "rev-parse", "--show-prefix").strip()
    tree = f"{ref}:{prefix}" if prefix else ref
    data = subprocess.run(["git", "-C", str(project_dir), "archive", "--format=tar", tree],
                          capture_output=True, check=False)
    if data.returncode != 0:
        git(project_dir, "rev-parse", "--verify", f"{ref}^{{commit}}")  # raises the clear error
        raise SqlflowError(f"`git archive {tree}` failed: "
                           f"{data.stderr.decode(errors='replace').strip()}")
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=BytesIO(data.stdout)) as tar:
        tar.extractall(dest, filter="data")
    return dest


def touched_models(project: Project, files: set[str]) -> set[str]:
    """Models of `project` that the changed `files` affect directly (no descendants)."""
    if "dbt_project.yml" in files:
        return set(project.models)
    touched = {name for name, node in project.models.items() if node.path in files}
    touched |= set(macro_callers(project, files))
    ymls = {f for f in files if f.endswith((".yml", ".yaml"))}
    if ymls:
        for name, node in project.models.items():
            props = node.properties
            if props is not None and getattr(props, "path", None) in ymls:
                touched.add(name)
        changed_sources = {key for key, table in project.sources.items()
                           if table.location.path in ymls}
        for name, node in project.models.items():
            if any(_reads_source(node.raw_sql, key) for key in changed_sources):
                touched.add(name)
        touched |= _named_in(project, ymls)
    return touched


def macro_callers(project: Project, files: set[str]) -> dict[str, tuple[str, ...]]:
    """Models that call a macro defined in the changed `files` (directly or through other
    macros), each with the changed macros it calls, directly or not."""
    changed = _changed_macros(project, files)
    out = {}
    for name, node in project.models.items():
        called = tuple(sorted(m for m in changed if _calls(node.raw_sql, m)))
        if called:
            out[name] = called
    return out


def _changed_macros(project: Project, files: set[str]) -> set[str]:
    """Macros defined in changed files, and every macro that calls one, transitively."""
    changed = {m.name for m in project.macros.values() if m.path in files}
    while True:
        callers = {m.name for m in project.macros.values() if m.name not in changed
                   and any(_calls(project.macro_files.get(m.path, ""), c) for c in changed)}
        if not callers:
            return changed
        changed |= callers


def _calls(text: str, macro: str) -> bool:
    return re.search(rf"\b{re.escape(macro)}\s*\(", text) is not None


def _reads_source(sql: str, key: str) -> bool:
    source_name, table = key.split(".", 1)
    return re.search(rf"source\(\s*['\"]{re.escape(source_name)}['\"]\s*,\s*"
                     rf"['\"]{re.escape(table)}['\"]\s*\)", sql) is not None


def _named_in(project: Project, ymls: set[str]) -> set[str]:
    """Models whose name is a `name:` entry of a changed yml (properties, tests, columns)."""
    found: set[str] = set()
    for rel in ymls:
        path = project.root / rel
        if not path.is_file():
            continue
        names = set(re.findall(r"^\s*-?\s*name:\s*['\"]?([A-Za-z0-9_]+)", path.read_text(), re.M))
        found |= names & set(project.models)
    return found
