"""The demo project run by `sqlflow` processes of their own against a target, and the
comparison of their tables with the `local` target's run (the reference), read by path with
the shared session: EXCEPT ALL both ways over every column, never a row count alone."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SQLFLOW = [str(Path(sys.executable).with_name("sqlflow"))]  # the console script of this venv
DEMO = ["--rows", "200", "--days", "1", "--seed", "5"]  # small: ~200 impressions, ~400 events


def copy_project(dest: Path) -> Path:
    dest.mkdir(parents=True)
    for name in ("models", "macros", "udfs", "profiles"):
        shutil.copytree(ROOT / name, dest / name)
    shutil.copy(ROOT / "dbt_project.yml", dest / "dbt_project.yml")
    return dest


def sqlflow(project: Path, env: dict[str, str], *args: str, timeout: float = 600) -> str:
    done = subprocess.run([*SQLFLOW, "--project-dir", str(project), *args], env=env, cwd=project,
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"sqlflow {' '.join(args)}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def tables(project: Path) -> dict[str, Path]:
    """Every Delta table sqlflow built or read: sources, models, quarantine tables (not the
    commit log, nor a stream's `__sqlflow_*` state and heartbeat tables: run-specific)."""
    warehouse = project / ".sqlflow" / "warehouse" if (project / ".sqlflow").is_dir() else project
    found = {f"{db.name.removesuffix('.db')}.{t.name}": t
             for db in warehouse.glob("*.db") if db.name != "sqlflow.db"
             for t in db.iterdir() if (t / "_delta_log").is_dir() and not t.name.startswith("__sqlflow_")}
    assert found, f"no tables under {warehouse}"
    return found


def assert_same_tables(spark, got: Path, want: Path, databases: tuple[str, ...] = (),
                       skip: tuple[str, ...] = ()) -> None:
    """Every table of `want`'s project (of `databases`, default all) is in `got`'s with the
    same rows; `got` is a project folder or, for a Connect server, its warehouse folder."""
    mine = tables(got)
    theirs = {n: p for n, p in tables(want).items()
              if (not databases or n.split(".")[0] in databases) and n.split(".")[-1] not in skip}
    mine = {n: p for n, p in mine.items()
            if (not databases or n.split(".")[0] in databases) and n.split(".")[-1] not in skip}
    for name in sorted(set(mine) | set(theirs)):
        if name not in mine or name not in theirs:  # a stream creates a quarantine table lazily
            there = mine.get(name) or theirs[name]
            rows = spark.read.format("delta").load(str(there)).collect()
            assert rows == [], f"{name} only in {there.parents[1]}: {rows[:5]}"
            continue
        a = spark.read.format("delta").load(str(mine[name]))
        b = spark.read.format("delta").load(str(theirs[name]))
        if "origin" in b.columns and name.endswith("__quarantine"):
            a, b = a.drop("origin"), b.drop("origin")
        missing, extra = b.exceptAll(a).collect(), a.exceptAll(b).collect()
        assert (missing, extra) == ([], []), f"{name}: missing {missing[:5]}, unexpected {extra[:5]}"
    # not vacuous: every kind of model of the demo wrote rows
    for name in ("dw.dwd_ad_click_samples", "dw.dwd_ad_clicks_attributed",
                 "dw.dwd_user_events_enriched", "dw.ue_live", "dw.ue_ad"):
        if name.split(".")[-1] in skip:
            continue
        assert spark.read.format("delta").load(str(theirs[name])).count() > 0, name


@pytest.fixture(scope="session")
def local_run(tmp_path_factory):
    """The reference: `sqlflow demo` (generate, then every model in batch) on `local[2]`."""
    project = copy_project(tmp_path_factory.mktemp("cluster_ref") / "project")
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    started = time.monotonic()
    sqlflow(project, env, "--target", "local", "demo", *DEMO)
    print(f"\nlocal reference demo run: {time.monotonic() - started:.1f}s")
    return project


