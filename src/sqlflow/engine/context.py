"""What every command needs: the project root, its dbt profile name, the target, a session.

The session is built lazily and once per process, so commands that need no Spark (compile,
check) never start a JVM.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from sqlflow.errors import Location, SqlflowError
from sqlflow.project.profiles import Target, load_target
from sqlflow.project.runmode import STATE_DIR


def find_project_dir(start: Path | None = None) -> Path:
    """The nearest folder at or above `start` holding a dbt_project.yml."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "dbt_project.yml").is_file():
            return folder
    raise SqlflowError(
        f"no dbt_project.yml in {here} or any parent folder",
        hint="run sqlflow inside the project, or pass --project-dir",
    )


def profile_name(project_dir: Path) -> str:
    path = project_dir / "dbt_project.yml"
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise SqlflowError(f"dbt_project.yml is not valid YAML: {exc}",
                           location=Location("dbt_project.yml")) from None
    name = data.get("profile")
    if not isinstance(name, str):
        raise SqlflowError("dbt_project.yml has no `profile:`", location=Location("dbt_project.yml"),
                           hint="add `profile: sqlflow` (the name in profiles/profiles.yml)")
    return name


@dataclass
class Context:
    """The project and target a command runs against; `spark` starts Spark on first use."""

    project_dir: Path
    target_name: str | None = None
    spark_overrides: dict[str, str] = field(default_factory=dict)
    _target: Target | None = None
    _spark: object | None = None

    @classmethod
    def discover(cls, project_dir: Path | None = None, target_name: str | None = None) -> Context:
        root = find_project_dir(project_dir)
        return cls(project_dir=root, target_name=target_name)

    @classmethod
    def with_session(cls, spark, project_dir: Path, target_name: str | None = None) -> Context:
        """A Context over an existing SparkSession (tests, notebooks): no second session starts,
        and the session's own warehouse and metastore are used, whatever the profile says."""
        return cls(project_dir=Path(project_dir).resolve(), target_name=target_name, _spark=spark)

    @property
    def state_dir(self) -> Path:
        return self.project_dir / STATE_DIR

    @property
    def target(self) -> Target:
        if self._target is None:
            self._target = load_target(self.project_dir, profile_name(self.project_dir), self.target_name)
        return self._target

    @property
    def spark(self):
        if self._spark is None:
            from sqlflow.engine.session import build_session

            self._spark = build_session(self.target, self.project_dir, self.spark_overrides)
        return self._spark

    @property
    def has_spark(self) -> bool:
        return self._spark is not None
