"""Read `profiles/profiles.yml`, the one connection config dbt and sqlflow share.

The file is dbt's own format (profile -> target -> outputs); values may use
`{{ env_var('NAME', 'default') }}` exactly as in dbt. sqlflow only understands dbt-spark
`method: session` targets, whose `server_side_parameters` become the SparkSession's config.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import jinja2
import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from sqlflow.errors import Location, SqlflowError, did_you_mean
from sqlflow.project.sources import DuplicateKey, LineLoader
from sqlflow.sandbox import Sandbox

PROFILES_FILE = Path("profiles") / "profiles.yml"


class Target(BaseModel):
    """One dbt-spark output, as sqlflow uses it."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    name: str = ""
    type: Literal["spark"]
    method: Literal["session"]
    schema_: str = Field(alias="schema")
    server_side_parameters: dict[str, str] = Field(default_factory=dict)
    # server_side_parameters keys whose value came from env_var(), and the variables it read:
    # the session sets them after the JVM starts, off its command line (docs/deploy.md)
    _env_sourced: dict[str, tuple[str, ...]] = PrivateAttr(default_factory=dict)

    @property
    def env_sourced(self) -> dict[str, tuple[str, ...]]:
        return self._env_sourced

    @property
    def is_connect(self) -> bool:
        return "spark.remote" in self.server_side_parameters


class Profile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    target: str
    outputs: dict[str, dict[str, Any]]


def _env_var(name: str, default: str | None = None) -> str:
    if name in os.environ:
        return os.environ[name]
    if default is None:
        raise SqlflowError(
            f"environment variable `{name}` is not set",
            hint=f"export {name}=... or give env_var('{name}', 'default') a default",
        )
    return default


def _render(value: Any, env: jinja2.Environment) -> Any:
    if isinstance(value, str) and "{{" in value:
        return env.from_string(value).render()
    if isinstance(value, dict):
        return {k: _render(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [_render(v, env) for v in value]
    return value


def load_target(
    project_dir: Path, profile_name: str, target_name: str | None = None
) -> Target:
    """The named target (or the profile's default) of `profile_name`, env vars rendered.

    Raises SqlflowError with the file and a fix for a missing file, an unknown profile or
    target, or a target sqlflow cannot drive.
    """
    path = project_dir / PROFILES_FILE
    where = Location(str(PROFILES_FILE))
    if not path.is_file():
        raise SqlflowError(
            "profiles file not found", location=where,
            hint="create it (see the README's Profiles section) or run from the project root",
        )
    try:
        raw = yaml.load(path.read_text(), Loader=LineLoader) or {}  # noqa: S506 (SafeLoader)
    except DuplicateKey as exc:
        raise SqlflowError(f"key `{exc.key}` is written twice (lines {exc.first} and {exc.second})",
                           location=Location(str(PROFILES_FILE), exc.second),
                           hint="keep one of them") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        loc = Location(str(PROFILES_FILE), mark.line + 1, mark.column + 1) if mark else where
        raise SqlflowError(f"profiles file is not valid YAML: {getattr(exc, 'problem', exc)}",
                           location=loc, hint="fix the YAML syntax") from None
    if profile_name not in raw:
        raise SqlflowError(
            f"profile `{profile_name}` (named in dbt_project.yml) is not in the profiles file",
            location=where, hint=did_you_mean(profile_name, [k for k in raw if k != "config"]),
        )
    try:
        profile = Profile.model_validate(raw[profile_name])
    except ValidationError as exc:
        raise SqlflowError(f"profile `{profile_name}` is malformed: {_first_error(exc)}",
                           location=where, hint="it needs `target:` and `outputs:`") from None
    name = target_name or profile.target
    if name not in profile.outputs:
        raise SqlflowError(
            f"unknown target `{name}`", location=where,
            hint=did_you_mean(name, list(profile.outputs)),
        )
    env = Sandbox(undefined=jinja2.StrictUndefined)  # profiles come with pull requests too
    used: list[str] = []

    def recording_env_var(var: str, default: str | None = None) -> str:
        used.append(var)
        return _env_var(var, default)

    env.globals["env_var"] = recording_env_var
    try:
        rendered = _render(profile.outputs[name], env)
        target = Target.model_validate({**rendered, "name": name})
        for key, value in (profile.outputs[name].get("server_side_parameters") or {}).items():
            used.clear()
            _render(value, env)
            if used:
                target._env_sourced[str(key)] = tuple(used)
    except ValidationError as exc:
        raise SqlflowError(
            f"target `{name}` is not a dbt-spark session target: {_first_error(exc)}",
            location=where, hint="use `type: spark`, `method: session` and a `schema:`",
        ) from None
    except jinja2.TemplateError as exc:
        raise SqlflowError(f"target `{name}`: {exc}", location=where,
                           hint="only env_var('NAME', 'default') is available here") from None
    target.server_side_parameters = {k: str(v) for k, v in target.server_side_parameters.items()}
    return target


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    field = ".".join(str(p) for p in err["loc"]) or "(top level)"
    return f"`{field}`: {err['msg']}"
