"""Build the SparkSession for a profile target, with the project's UDFs registered.

dbt-spark's `session` method builds its session from the same `server_side_parameters`, so a
`dbt run` and a `sqlflow run` against one target see the same warehouse and metastore.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from sqlflow.engine import jars
from sqlflow.errors import Location, SqlflowError
from sqlflow.project.profiles import PROFILES_FILE, Target
from sqlflow.secrets import is_secret

# Config keys whose values are filesystem paths, relative to the project root in the profile.
_PATH_KEYS = ("spark.sql.warehouse.dir", "spark.local.dir", "spark.sql.streaming.checkpointLocation")
_DERBY_NAME = re.compile(r"(databaseName=)([^;]+)")
_DERBY_HOME = re.compile(r"(-Dderby\.system\.home=)(\S+)")


def check_java() -> None:
    """Fail with a fix when no Java 17+ is reachable; Spark 4 needs it to start."""
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if not java or not Path(java).exists():
        raise SqlflowError(
            "Java was not found; Spark needs Java 17 or newer",
            hint="install it (e.g. `apt-get install openjdk-17-jre-headless`) or set JAVA_HOME",
        )
    out = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
    m = re.search(r'version "(\d+)', out)
    if m and int(m.group(1)) < 17:
        raise SqlflowError(
            f"Java {m.group(1)} found at {java}; Spark 4 needs Java 17 or newer",
            hint="install Java 17 and point JAVA_HOME at it",
        )


def spark_conf(target: Target, project_dir: Path, overrides: dict[str, str] | None = None) -> dict[str, str]:
    """The target's Spark config with project-relative paths made absolute."""
    conf = dict(target.server_side_parameters)
    conf.update(overrides or {})
    root = project_dir.resolve()

    def absolute(p: str) -> str:
        return p if os.path.isabs(p) or "://" in p else str(root / p)

    for key in _PATH_KEYS:
        if key in conf:
            conf[key] = absolute(conf[key])
    for key in ("spark.hadoop.javax.jdo.option.ConnectionURL",):
        if key in conf:
            conf[key] = _DERBY_NAME.sub(lambda m: m.group(1) + absolute(m.group(2)), conf[key])
    if "spark.driver.extraJavaOptions" in conf:
        conf["spark.driver.extraJavaOptions"] = _DERBY_HOME.sub(
            lambda m: m.group(1) + absolute(m.group(2)), conf["spark.driver.extraJavaOptions"]
        )
    return conf


def build_session(
    target: Target, project_dir: Path, overrides: dict[str, str] | None = None
):
    """Create (or reuse) the SparkSession for `target` and register the project's UDFs."""
    conf = spark_conf(target, project_dir, overrides)
    if target.is_connect:
        spark = _start(target, conf)
    else:
        check_java()
        for key in ("spark.sql.warehouse.dir",):
            if key in conf and "://" not in conf[key]:
                Path(conf[key]).mkdir(parents=True, exist_ok=True)
        spark = _start_resolved(target, conf)
        spark.sparkContext.setLogLevel("ERROR")
        _quiet(spark, "org.apache.hadoop.hive.metastore.HiveAlterHandler")
    from sqlflow.engine.udfs import register_udfs

    register_udfs(spark, project_dir)
    return spark


def _start_resolved(target: Target, conf: dict[str, str]):
    """Start a JVM session, its packages passed as the jars an earlier start resolved; the
    start that has to resolve them holds the Ivy folder meanwhile (`jars.resolving`) and
    records them for the next one."""
    version = _spark_version()
    found = jars.resolved(conf, version)
    if jars.PACKAGES not in found:  # nothing to resolve, or resolved by an earlier start
        return _start(target, found)
    with jars.resolving(jars.ivy_dir(conf)):
        found = jars.resolved(conf, version)  # another process may have resolved them meanwhile
        spark = _start(target, found)
        if jars.PACKAGES in found:  # this start ran Ivy: record what it resolved
            jars.remember(found, version, spark.sparkContext.getConf().get(jars.JARS, ""))
    return spark


def _start(target: Target, conf: dict[str, str]):
    """The session for `conf` (a running one reused), its runtime settings set after start."""
    from pyspark.sql import SparkSession

    later = deferred_conf(target, conf)
    builder = SparkSession.builder
    for key, value in with_defaults(target, conf).items():
        if key not in later:
            builder = builder.config(key, value)
    if not target.is_connect:
        builder = builder.enableHiveSupport()
    try:
        spark = builder.getOrCreate()
    except ImportError as exc:
        raise SqlflowError(
            f"the Spark Connect client is not installed ({exc.name or exc})",
            hint="pip install -e '.[connect]'",
        ) from exc
    except Exception as exc:  # JVM start failures surface as assorted Py4J/Runtime errors
        raise SqlflowError(
            f"Spark could not start for target `{target.name}`: {str(exc).splitlines()[0]}",
            hint="check the target's server_side_parameters in profiles/profiles.yml "
            "(run with --debug for the full error)",
        ) from exc
    set_after_start(spark, target, later)
    return spark


# What sqlflow sets on a classic session unless the profile says otherwise. PySpark's DataFrame
# debugging (on by default) records the Python call site of every `functions` call and column
# operator in the JVM: four or more round trips each (the active session, the origin class, the
# stack-trace depth setting, the call site). sqlflow builds its quarantine reasons, statistics
# and writes with hundreds of them (the interval join's batch run: about 800 round trips, 280
# without), and the call sites it would add to a runtime error are sqlflow's own lines, not
# the model's: a model's errors are placed in its file by its SQL (`rendering/sourcemap.py`,
# `runtime/analysis_errors.py`, which reads SQL query contexts only). Spark reads it only at
# launch.
#
# Spark's streaming checkpoint logs (a query's `offsets/` and `commits/` files every micro-batch,
# the state stores' files) are written by default through Hadoop's FileContext, whose local file
# system has no native library here: each file's atomic rename asks `getFileLinkStatus` of the
# file and of its checksum file, before and after, and Hadoop answers each by starting a
# `readlink` process (Hadoop's `FileUtil.readLink`), eight per file, two more `chmod` processes
# per file created: 20 processes a micro-batch, Spark's walCommit + commitOffsets 0.09 s of a
# 1,000-row micro-batch, 0.02 s through the FileSystem API (`bench/microbatch_cost.py`,
# 2026-12-02, README "Benchmarks"). The FileSystem API's rename is one `rename(2)` (atomic on a
# local file system; sqlflow's checkpoints are always folders under the project, the planner's
# `.sqlflow/checkpoints/<model>`, `runtime/query.checkpoint_dir`), and its "already exists"
# check is the same check-then-rename FileContext makes on a local file system. One query per
# checkpoint is sqlflow's own rule (`runtime/run_lock`). Not set on a Connect session: the
# server's operator chooses it for the server's file system (docs/deploy.md, "Spark Connect").
#
# Spark's whole-stage code generation compiles each generated class once per distinct source
# and keeps `CODEGEN_CACHE` of them (100 by default). By default the code carries its stage's
# id in its class name, and a running `incremental` query's held rows are a union of pieces
# whose stage ids move by one whenever a piece is added or merged: the same scan, new source,
# a compile each (Janino, about 8% of a steady micro-batch's CPU), and more shapes than 100
# over a 16-batch merge cycle. Without the id, and with room for them, a 330-s run at 20,000
# rows/s compiled 12.3 classes a micro-batch, not 63.5-64.7 (README "Benchmarks", 2026-12-03).
CHECKPOINT_FILES = "spark.sql.streaming.checkpointFileManagerClass"
CODEGEN_IDS = "spark.sql.codegen.useIdInClassName"
CODEGEN_CACHE = "spark.sql.codegen.cache.maxEntries"  # read at launch only
SESSION_DEFAULTS = {
    "spark.python.sql.dataFrameDebugging.enabled": "false",
    CHECKPOINT_FILES: "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager",
    CODEGEN_IDS: "false",
    CODEGEN_CACHE: "2048",
}

# Settings the JVM reads only at launch: they must be on its command line.
_LAUNCH_ONLY = ("spark.master", "spark.remote", "spark.app.name", "spark.driver.", "spark.executor.",
                "spark.jars", "spark.submit.", "spark.sql.warehouse.dir", "spark.sql.extensions",
                "spark.sql.catalogImplementation", "spark.ui.")


def with_defaults(target: Target, conf: dict[str, str]) -> dict[str, str]:
    """`conf` over `SESSION_DEFAULTS` for a classic session (a Connect client keeps its call
    sites on its own side, with no round trip, and cannot set a launch setting of the server)."""
    return conf if target.is_connect else {**SESSION_DEFAULTS, **conf}


def deferred_conf(target: Target, conf: dict[str, str]) -> dict[str, str]:
    """The profile settings whose values come from environment variables, to set after the JVM
    starts: PySpark launches the JVM with every builder setting as `--conf k=v`, readable by any
    local user in `ps` (docs/deploy.md, "Secrets"). A launch-only setting stays on the command
    line, and one that reads a secret variable there is refused."""
    later = {}
    for key, names in target.env_sourced.items():
        if key not in conf:
            continue
        if key.startswith(_LAUNCH_ONLY):
            secret = [n for n in names if is_secret(n)]
            if secret:
                raise SqlflowError(
                    f"profile setting `{key}` reads the secret `{secret[0]}`, but Spark reads it "
                    "only at launch, where every local user can see it on the command line",
                    location=Location(str(PROFILES_FILE)),
                    hint="keep secrets to runtime settings (e.g. spark.hadoop.*), or put this one "
                         "in a spark-defaults.conf readable only by you (docs/deploy.md)")
            continue
        later[key] = conf[key]
    return later


def set_after_start(spark, target: Target, later: dict[str, str]) -> None:
    """Set the deferred settings on the running session (Hadoop settings on its Hadoop
    configuration too, where file systems read them)."""
    for key, value in later.items():
        if key.startswith("spark.hadoop.") and not target.is_connect:
            spark.sparkContext._jsc.hadoopConfiguration().set(key.removeprefix("spark.hadoop."), value)
        try:
            spark.conf.set(key, value)
        except Exception as exc:  # a static setting: Spark refuses it on a running session
            raise SqlflowError(
                f"profile setting `{key}` takes its value from an environment variable, but Spark "
                f"accepts it only at launch ({str(exc).splitlines()[0]})",
                location=Location(str(PROFILES_FILE)),
                hint="write the value in the profile, or in a spark-defaults.conf readable only "
                     "by you (docs/deploy.md)") from None


def _spark_version() -> str:
    import pyspark

    return pyspark.__version__


def _quiet(spark, logger: str) -> None:
    """Silence a JVM logger. The Hive metastore logs an ERROR on every rebuild of an existing
    Delta table even though Spark recovers and the write succeeds."""
    jvm = spark.sparkContext._jvm
    level = jvm.org.apache.logging.log4j.Level.OFF
    jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(logger, level)
