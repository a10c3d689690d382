"""The stream service's Prometheus metrics (`sqlflow run --mode stream --metrics-port P`,
docs/semantics.md, "The stream service"): served in the text format on 127.0.0.1 by
`prometheus_client`, one registry per service (no global state).

Per model: `sqlflow_rows_in_total`, `sqlflow_rows_out_total`, `sqlflow_quarantined_total`
(label `reason`, from every runtime's reports; `all` for rows a report does not break down),
`sqlflow_microbatch_seconds` (histogram), `sqlflow_lag_seconds` (ingest-time lag: now minus
the newest ingest time processed; absent for an input without an ingest time), `sqlflow_restarts_total`, `sqlflow_dirty_partitions`, `sqlflow_model_up` (1 unless
the model failed).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r, m = self.registry, ["model"]
        self.rows_in = Counter("sqlflow_rows_in", "Input rows read", m, registry=r)
        self.rows_out = Counter("sqlflow_rows_out", "Rows appended to the sink(s)", m, registry=r)
        self.quarantined = Counter("sqlflow_quarantined", "Rows quarantined", ["model", "reason"],
                                   registry=r)
        self.seconds = Histogram("sqlflow_microbatch_seconds", "Wall seconds per micro-batch", m,
                                 buckets=BUCKETS, registry=r)
        self.lag = Gauge("sqlflow_lag_seconds", "Now minus the newest ingest time processed",
                         m, registry=r)
        self.restarts = Counter("sqlflow_restarts", "Query restarts after a failure", m, registry=r)
        self.dirty = Gauge("sqlflow_dirty_partitions", "Partitions found dirty", m, registry=r)
        self.up = Gauge("sqlflow_model_up", "1 unless the model's region failed", m, registry=r)
        self.last: dict[str, float] = {}

    def serve(self, port: int) -> Any:
        """Serve the registry on 127.0.0.1:`port` from a daemon thread; returns the server."""
        return start_http_server(port, addr="127.0.0.1", registry=self.registry)

    def batch(self, model: str, report: Any, rows_in: int, dirty: int,
              newest_ingest_at: float | None = None) -> None:
        self.rows_in.labels(model).inc(rows_in)
        self.rows_out.labels(model).inc(report.rows_out)
        reasons = dict(getattr(report, "reasons", ()))
        for reason, n in reasons.items():
            self.quarantined.labels(model, reason).inc(n)
        if report.quarantined > sum(reasons.values()):  # a runtime without the breakdown
            self.quarantined.labels(model, "all").inc(report.quarantined - sum(reasons.values()))
        if report.kind == "batch":
            self.seconds.labels(model).observe(report.seconds)
        if newest_ingest_at is not None:
            self.last[model] = newest_ingest_at
        self.dirty.labels(model).set(dirty)

    def restarted(self, model: str) -> None:
        self.restarts.labels(model).inc()

    def states(self, regions: Sequence[Any]) -> None:
        now = time.time()
        for r in regions:
            model = r.plan.model
            self.up.labels(model).set(0 if r.health.state == "failed" else 1)
            self.restarts.labels(model).inc(0)
            if model in self.last:
                self.lag.labels(model).set(now - self.last[model])
