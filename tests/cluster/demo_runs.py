"""The demo project run by `sqlflow` processes of their own against a target, and the
comparison of their tables with the `local` target's run (the reference), read by path with
the shared session: the same multiset of rows over every column, never a row count alone."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from functools import reduce
from pathlib import Path

import pytest
import yaml
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from helpers import SHORT_JVM
from rowdiff import row_diff

ROOT = Path(__file__).resolve().parents[2]
SQLFLOW = [str(Path(sys.executable).with_name("sqlflow"))]  # the console script of this venv
DEMO = ["--rows", "200", "--days", "1", "--seed", "5"]  # small: ~200 impressions, ~400 events


# The `local` and `cluster` targets of a copy split work in two (the profile's 4): one task per
# core of `local[*]` on the test machine and per worker of the session's cluster (1 core
# each). A setting of speed, not of rows: half the tasks, and half the files a partition of a
# Delta write gets, for ~600 rows a run.
SMALL_RUN = {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"}


def copy_project(dest: Path) -> Path:
    dest.mkdir(parents=True)
    for name in ("models", "macros", "udfs", "profiles"):
        shutil.copytree(ROOT / name, dest / name)
    shutil.copy(ROOT / "dbt_project.yml", dest / "dbt_project.yml")
    profiles = dest / "profiles" / "profiles.yml"
    doc = yaml.safe_load(profiles.read_text())
    for name in ("local", "cluster"):
        params = doc["sqlflow"]["outputs"][name]["server_side_parameters"]
        params.update(SMALL_RUN)  # and C1 only for the drivers and the cluster's executors
        params["spark.driver.extraJavaOptions"] += f" {SHORT_JVM}"
        params["spark.executor.extraJavaOptions"] = SHORT_JVM
    profiles.write_text(yaml.safe_dump(doc, sort_keys=False))
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


# every column to the microsecond (Spark's JSON default keeps milliseconds)
_JSON = {"timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX", "timestampNTZFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSS"}
NOT_EMPTY = ("dw.dwd_ad_click_samples", "dw.dwd_ad_clicks_attributed", "dw.dwd_user_events_enriched",
             "dw.ue_live", "dw.ue_ad")  # every kind of model of the demo


def _rows(spark, found: dict[str, Path]) -> DataFrame:
    """Every row of `found` as (table, row as JSON of every column in table order): one
    DataFrame, so comparing all tables is one Spark job (`rowdiff`), not one per table. A
    quarantine row's `origin` (where it was read) differs by mode: dropped."""
    frames = []
    for name, path in sorted(found.items()):
        df = spark.read.format("delta").load(str(path))
        if name.endswith("__quarantine") and "origin" in df.columns:
            df = df.drop("origin")
        frames.append(df.select(F.lit(name).alias("t"), F.to_json(F.struct(*df.columns), _JSON).alias("row")))
    return reduce(DataFrame.unionAll, frames)


def assert_same_tables(spark, got: Path, want: Path, databases: tuple[str, ...] = (),
                       skip: tuple[str, ...] = ()) -> None:
    """Every table of `want`'s project (of `databases`, default all) is in `got`'s with the
    same rows, as multisets over every column (`rowdiff`); `got` is a project folder or, for a
    Connect server, its warehouse folder. A table only one side has (a stream creates a
    quarantine table lazily) must be empty."""
    def chosen(found: dict[str, Path]) -> dict[str, Path]:
        return {n: p for n, p in found.items()
                if (not databases or n.split(".")[0] in databases) and n.split(".")[-1] not in skip}

    mine, theirs = _rows(spark, chosen(tables(got))), _rows(spark, chosen(tables(want)))
    diff = row_diff(theirs, mine)
    assert diff.equal, f"missing {diff.missing}, unexpected {diff.extra}"
    # not vacuous: every kind of model of the demo wrote rows
    counts = {r["t"]: r["n"] for r in theirs.groupBy("t").agg(F.count("*").alias("n")).collect()}
    empty = [n for n in NOT_EMPTY if n.split(".")[-1] not in skip and not counts.get(n)]
    assert not empty, f"no rows in the reference's {empty}"


class Reference:
    """The reference run, started in the background (`sqlflow demo` on `local[2]`: generate,
    then every model in batch); `project()` waits for it and returns its project folder."""

    def __init__(self, project: Path, env: dict[str, str]):
        self.folder, self.log = project, project.parent / "reference.log"
        self.began = time.monotonic()
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen([*SQLFLOW, "--project-dir", str(project), "--target", "local",
                                          "demo", *DEMO], env=env, cwd=project, stdout=out,
                                         stderr=subprocess.STDOUT, text=True)
        self.seconds: float | None = None

    def project(self) -> Path:
        if self.seconds is None:
            try:  # (under pytest's 1,500 s per test: this fails first, with the run's log)
                code = self.proc.wait(timeout=1200)  # a machine under load: about 300 s in CI
            except subprocess.TimeoutExpired:
                pytest.fail(f"sqlflow demo (local reference) still running after 1,200 s\n"
                            f"{self.log.read_text()[-4000:]}", pytrace=False)
            assert code == 0, f"sqlflow demo (local reference)\n{self.log.read_text()[-4000:]}"
            self.seconds = time.monotonic() - self.began
            print(f"\nlocal reference demo run: {self.seconds:.1f}s")
        return self.folder

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="session")
def local_launch(tmp_path_factory):
    """Start the reference run of the session, shared by the cluster and the Connect tests."""
    project = copy_project(tmp_path_factory.mktemp("cluster_ref") / "project")
    reference = Reference(project, {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
    yield reference
    reference.stop()


@pytest.fixture(scope="session")
def local_run(local_launch) -> Path:
    """The reference run's project folder, once it has finished."""
    return local_launch.project()
