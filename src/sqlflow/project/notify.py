"""A routed group's commit notification: an operator setting of the profile, never a model's.

A notification runs a shell command or POSTs to a URL when a run commits a partition
(docs/design.md §2.5). A model's config arrives with pull requests and must never run code
(docs/semantics.md, "What the Jinja sandbox guarantees"), so the hooks live in the target of
`profiles/profiles.yml`, which the operator deploys and which already holds code the run
trusts (Spark's configuration):

    outputs:
      prod:
        type: spark
        ...
        sqlflow_notify:
          user_events_by_department:            # the routed group's name
            url: http://scheduler:8080/ready    # POST once per committed partition
            command: ./bin/on_ready.sh          # and/or run this (env SQLFLOW_*)

`routing.notify_url` / `routing.notify_command` in a model's config are a compile error that
says where they go.

>>> from sqlflow.project.profiles import Target
>>> notify_hooks(Target(type="spark", method="session", schema="dw",
...                      sqlflow_notify={"by_dept": {"url": "http://scheduler/ready"}}))
{'by_dept': NotifyHook(url='http://scheduler/ready', command=None)}
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from sqlflow.errors import Location, SqlflowError

PROFILE_KEY = "sqlflow_notify"
MODEL_KEYS = ("notify_url", "notify_command")  # refused in a model's `routing` config


class NotifyHook(BaseModel):
    """What fires when a routed group commits a partition."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str | None = None
    command: str | None = None

    @field_validator("url")
    @classmethod
    def _http(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(f"`{value}` is not an http(s) URL")
        return value


def notify_hooks(target: Any) -> dict[str, NotifyHook]:
    """Routed group name -> its hook, from the target's `sqlflow_notify` (none: {})."""
    raw = (getattr(target, "model_extra", None) or {}).get(PROFILE_KEY) or {}
    where = Location("profiles/profiles.yml")
    if not isinstance(raw, dict):
        raise SqlflowError(f"target `{target.name}`: `{PROFILE_KEY}` must map routed group names "
                           "to `{url, command}`", location=where)
    try:
        return {str(group): NotifyHook.model_validate(hook or {}) for group, hook in raw.items()}
    except ValidationError as exc:
        err = exc.errors()[0]
        raise SqlflowError(
            f"target `{target.name}`: bad `{PROFILE_KEY}` entry at "
            f"{'.'.join(map(str, err['loc']))}: {err['msg']}", location=where,
            hint="each routed group maps to `url:` (http or https) and/or `command:`") from None


def model_setting_hint(group: str) -> str:
    """Where a notification hook goes instead of a model's config."""
    return (f"a model's config may not run commands or call URLs (it comes with pull requests): "
            f"remove it, and let the operator set it in profiles/profiles.yml under the target's "
            f"`{PROFILE_KEY}: {{{group}: {{url: ..., command: ...}}}}` (docs/deploy.md)")
