"""Shared test helpers: build small dbt projects in a temp folder, render them without Spark."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

import yaml

# The JVM options of the test session's JVM and of the Connect server: the serial collector.
# On small data G1's concurrent and parallel GC threads cost CPU the two cores do not have
# (the Connect tests alone, one run each: 698 s of CPU with G1 there, 638 s serial, wall 450 s
# -> 418 s; two runtime test files on two workers, rounds side by side: 538 and 552 s of CPU
# with G1, 493 and 516 s serial, wall 285/289 s -> 267/275 s; the parallel collector: 535 s).
# Both JVMs keep C2 (they live for the whole run; with C1 only the session's was slower), but
# compile with it only what is ten times hotter than HotSpot's default thresholds: each Spark
# query brings new generated classes, and C2 compiled them as they warmed, about 17 % of a
# session JVM's CPU over a full run. Two runtime test files on two workers, side by side:
# 576 s of wall time and 1,022 s of CPU with the defaults, 519 s and 880 s with these
# (README, "Tests").
SERIAL_GC = "-XX:+UseSerialGC"
LONG_JVM = (f"{SERIAL_GC} -XX:Tier4InvocationThreshold=50000 -XX:Tier4MinInvocationThreshold=6000 "
            "-XX:Tier4CompileThreshold=150000 -XX:Tier4BackEdgeThreshold=400000")
# The JVM options of a `sqlflow` process a test starts: it lives a few minutes on small data,
# and compiling with C1 only costs it less CPU than C2 saves it (`tests/cluster/` alone on the
# two-core machine: 1,493 s of CPU -> 1,201 s, 833 s -> 715 s); the serial collector too
# (`tests/kafka_io/test_kill.py` alone: 104 s of CPU with neither, 94 s with C1, 85 s with both).
# With C1 only the JVM reserves 48 MB for compiled code, which Spark's classes fill: its code
# cache sweeper then spent 53 of the 697 s of CPU these processes took over a full run, and C1
# compiled again what it flushed. 256 MB (C2's default is 240 MB): `tests/runtime/test_kill9.py`
# alone, two rounds each, 356 and 332 s of CPU -> 307 and 279 s.
SHORT_JVM = f"-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=256m {SERIAL_GC}"

DEFAULT_PROJECT_YML = """\
name: testproj
version: "1.0.0"
config-version: 2
profile: sqlflow
model-paths: ["models"]
macro-paths: ["macros"]
"""

DEFAULT_PROFILES_YML = """\
sqlflow:
  target: local
  outputs:
    local:
      type: spark
      method: session
      host: NA
      schema: dw
"""


# the rules of `ods_sources_yml`'s tables: a row ingested more than LATENESS after its event
# time is late, one ingested more than FUTURE_TOLERANCE before it is from the future
LATENESS, FUTURE_TOLERANCE = timedelta(minutes=10), timedelta(minutes=5)


def ods_sources_yml(ods_schema: str, **event_times: str) -> str:
    """A source `ods` in `ods_schema` whose tables (name=event-time column) have ingest time
    `ingest_ts`, `LATENESS` (10 min) and `FUTURE_TOLERANCE` (5 min)."""
    rules = (f"allowed_lateness: {LATENESS.seconds // 60} minutes, "
             f"future_tolerance: {FUTURE_TOLERANCE.seconds // 60} minutes")
    tables = "".join(
        f"      - name: {name}\n        meta:\n          sqlflow: {{event_time: {column}, "
        f"ingest_time: ingest_ts, {rules}}}\n"
        for name, column in event_times.items())
    return f"version: 2\nsources:\n  - name: ods\n    schema: {ods_schema}\n    tables:\n{tables}"


def events_sources_yml(ods_schema: str) -> str:
    """One user-event source `ods.events`: the input of the routed-group tests."""
    return ods_sources_yml(ods_schema, events="event_ts")


def ad_sources_yml(ods_schema: str = "ods", dim_schema: str = "dim") -> str:
    """Two ad event sources (10 min lateness, 5 min future tolerance) and a dimension: the
    sources most compiler and runtime tests need."""
    return ods_sources_yml(ods_schema, imps="imp_ts", clicks="click_ts") + f"""\
  - name: dim
    schema: {dim_schema}
    tables:
      - name: dim_ad
        meta:
          sqlflow: {{partition_column: dt}}
"""


AD_SOURCES_YML = ad_sources_yml()


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))


def _under(prefix: str, rel: str) -> str:
    return rel if rel.startswith(prefix + "/") else f"{prefix}/{rel}"


def make_project(
    tmp_path: Path,
    models: Mapping[str, str] | None = None,
    yml: Mapping[str, str | dict[str, Any]] | None = None,
    macros: Mapping[str, str] | None = None,
    project_yml: str | dict[str, Any] | None = None,
    files: Mapping[str, str] | None = None,
    profiles_yml: str | None = DEFAULT_PROFILES_YML,
) -> Path:
    """Write a dbt project under `tmp_path` and return its folder.

    `models` maps paths (relative to `models/`, or starting with `models/`) to SQL; `yml` maps
    paths to YAML text or a dict; `macros` maps paths (relative to `macros/`) to Jinja;
    `project_yml` replaces (text) or extends (dict) the default dbt_project.yml; `files` writes
    anything else. Text is dedented, so triple-quoted literals can be indented.
    A `profiles/profiles.yml` with a session target `local` (schema `dw`) is written too.
    """
    root = Path(tmp_path)
    project_text = project_yml if isinstance(project_yml, str) else None
    if isinstance(project_yml, dict):
        base = yaml.safe_load(DEFAULT_PROJECT_YML)
        base.update(project_yml)
        project_text = yaml.safe_dump(base, sort_keys=False)
    _write(root, "dbt_project.yml", project_text or DEFAULT_PROJECT_YML)
    if profiles_yml:
        _write(root, "profiles/profiles.yml", profiles_yml)
    for rel, sql in (models or {}).items():
        _write(root, _under("models", rel), sql)
    for rel, text in (yml or {}).items():
        text = yaml.safe_dump(text, sort_keys=False) if isinstance(text, dict) else text
        _write(root, _under("models", rel), text)
    for rel, text in (macros or {}).items():
        _write(root, _under("macros", rel), text)
    for rel, text in (files or {}).items():
        _write(root, rel, text)
    (root / "models").mkdir(exist_ok=True)
    return root


def make_target(schema: str = "dw", name: str = "local"):
    """A dbt-spark session target as `profiles.load_target` returns it, without a file."""
    from sqlflow.project.profiles import Target

    return Target.model_validate({"name": name, "type": "spark", "method": "session",
                                  "schema": schema})


def render(tmp_path: Path, model: str = "m", *, mode: str = "batch",
           vars: dict[str, Any] | None = None, target=None, **project: Any):
    """Build a project with `make_project(**project)` and render `model` in it."""
    from sqlflow.project.load import load_project
    from sqlflow.rendering.render import render_model

    root = make_project(tmp_path, **project)
    return render_model(load_project(root), model, target=target or make_target(), mode=mode,
                        vars=vars)


def render_sql(tmp_path: Path, sql: str, **project: Any) -> str:
    """The rendered SQL of a one-model project whose model `m` is `sql`."""
    models = {"m.sql": sql, **project.pop("models", {})}
    return render(tmp_path, "m", models=models, **project).sql


def stop_query(spark, name: str, thread) -> None:
    """Stop the active streaming query `name` (an interval run has no end of its own) and
    wait for the thread running it to return."""
    for query in spark.streams.active:
        if query.name == name:
            query.stop()
    thread.join(120)


def table_names(spark, schema: str | None = None, *, temporary: bool = False) -> list[str]:
    """The tables and views of `schema` (default: the session's current one); temporary views
    only with `temporary`. `SHOW TABLES`, not `spark.catalog.listTables`: the catalog API
    decodes its rows with an expression the session's interpreted mode cannot evaluate
    (EXPRESSION_DECODING_FAILED; tests/conftest.py, README "Tests")."""
    from sqlflow.identifiers import quote

    rows = spark.sql("SHOW TABLES" if schema is None else f"SHOW TABLES IN {quote(schema)}").collect()
    return [r["tableName"] for r in rows if temporary or not r["isTemporary"]]


def delta_writers(spark, table: str) -> list[str]:
    """The engine that wrote each commit of Delta table `table`, oldest first: `Apache-Spark`
    or `delta-rs` (sqlflow's appends from the driver, `runtime.delta.local_append`)."""
    from sqlflow.runtime.delta import deltalog

    location = deltalog.describe(spark, table).location
    versions = list(range((deltalog.latest_version(spark, table, location) or 0) + 1))
    return [action["commitInfo"].get("engineInfo", "").split("/")[0].split(":")[0]
            for _, action in deltalog.commit_actions(spark, location, versions) if "commitInfo" in action]
