"""When the stream service restarts a failed query (docs/semantics.md, "The stream service").

A model's query that fails is restarted alone, after a backoff that doubles per restart
within the window; past `max_restarts` restarts within `window_s` seconds the model is
marked failed. Pure bookkeeping over a clock the caller passes, so it is tested without Spark:

>>> from sqlflow.planning.plan import RestartPolicy
>>> budget = RestartBudget(RestartPolicy(max_restarts=2, window_s=60, backoff_s=1))
>>> budget.next_delay(0.0), budget.next_delay(5.0), budget.next_delay(6.0)
(1.0, 2.0, None)
>>> budget.next_delay(70.0), budget.total  # the first two left the window
(1.0, 3)
"""

from __future__ import annotations

from sqlflow.planning.plan import RestartPolicy


class RestartBudget:
    """The restarts one model's query has had, against its `RestartPolicy`."""

    def __init__(self, policy: RestartPolicy) -> None:
        self.policy = policy
        self.recent: list[float] = []
        self.total = 0

    def next_delay(self, now: float) -> float | None:
        """Seconds to wait before restarting a query that failed at `now`, or None: the
        model has had `max_restarts` restarts within the window, it is failed."""
        self.recent = [t for t in self.recent if now - t < self.policy.window_s]
        if len(self.recent) >= self.policy.max_restarts:
            return None
        delay = float(self.policy.backoff_s * 2 ** len(self.recent))
        self.recent.append(now)
        self.total += 1
        return delay
