"""How long broker trouble is waited out (docs/semantics.md, "Kafka sources: broker trouble").

Spark's Kafka connector itself waits out a short outage (its admin and consumer clients retry
within their timeouts). A query that still fails on a broker it cannot reach is started again
from its checkpoint after a backoff that doubles, at most `retries` times; then the failure is
the run's. The target sets both (`server_side_parameters`):

- `spark.sqlflow.kafka.retries` (default 3),
- `spark.sqlflow.kafka.retry_backoff` (default `5 seconds`, doubled at each retry).

>>> r = Retry(retries=2, backoff_s=1.0, reachable=lambda servers: False)
>>> r.after(RuntimeError("boom"), "h:9092", 0), r.after(RuntimeError("boom"), "h:9092", 1)
(1.0, 2.0)
>>> r.after(RuntimeError("boom"), "h:9092", 2) is None  # retries spent
True
>>> up = Retry(retries=2, backoff_s=1.0, reachable=lambda servers: True)
>>> up.after(RuntimeError("AnalysisException: no such column"), "h:9092", 0) is None
True
>>> up.after(RuntimeError("org.apache.kafka.common.errors.TimeoutException: ..."), "h:9092", 0)
1.0
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from sqlflow.engine.broker import reachable as _reachable
from sqlflow.errors import SqlflowError
from sqlflow.project.config import parse_duration

RETRIES_KEY = "spark.sqlflow.kafka.retries"
BACKOFF_KEY = "spark.sqlflow.kafka.retry_backoff"
# a broker the client lost, in the words of the Kafka client and Spark's connector
_BROKER_TROUBLE = ("TimeoutException", "Timed out waiting", "DisconnectException",
                   "Connection refused", "NetworkException", "LEADER_NOT_AVAILABLE",
                   "NotLeaderOrFollowerException")


def any_reachable(servers: str, timeout: float = 3.0) -> bool:
    return any(_reachable(a.strip(), timeout=timeout) for a in servers.split(",") if a.strip())


@dataclass(frozen=True)
class Retry:
    """At most `retries` restarts, the k-th after `backoff_s * 2**k` seconds."""

    retries: int = 3
    backoff_s: float = 5.0
    reachable: Callable[[str], bool] = field(default=any_reachable, compare=False)

    @staticmethod
    def of(server_side_parameters: dict[str, str]) -> Retry:
        """The target's retry settings; a bad value is an error naming the key."""
        raw_n = server_side_parameters.get(RETRIES_KEY, "3")
        raw_b = server_side_parameters.get(BACKOFF_KEY, "5 seconds")
        try:
            n = int(str(raw_n).strip())
            if n < 0:
                raise ValueError
        except ValueError:
            raise SqlflowError(f"`{RETRIES_KEY}` is `{raw_n}`, not a whole number >= 0",
                               hint="set it in the target's server_side_parameters "
                                    "(profiles/profiles.yml), e.g. \"3\"") from None
        try:
            backoff = parse_duration(str(raw_b)).total_seconds()
        except ValueError as exc:
            raise SqlflowError(f"`{BACKOFF_KEY}`: {exc}",
                               hint="e.g. \"5 seconds\" (profiles/profiles.yml)") from None
        return Retry(n, backoff)

    def after(self, error: BaseException, servers: str, done: int) -> float | None:
        """Seconds to wait before starting the failed query again (`done` restarts so far),
        or None: the failure is not broker trouble, or the retries are spent."""
        if done >= self.retries:
            return None
        text = str(error)
        if not any(s in text for s in _BROKER_TROUBLE) and self.reachable(servers):
            return None
        return self.backoff_s * 2 ** done
