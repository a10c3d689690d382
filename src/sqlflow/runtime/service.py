"""The stream service: `sqlflow run --mode stream` with interval triggers (docs/semantics.md,
"The stream service").

Every stream plan (a model, or a routed group) is a region: its own query, checkpoint and
failure domain. A poll loop in the calling thread watches them; a query that fails is
restarted alone after its `RestartBudget`'s backoff, and a model past `max_restarts` within
the window is marked failed (its error at the model's file) while the others keep running.
A model downstream of a failed one keeps reading what its inputs hold. The loop also writes
the heartbeat (`runtime.heartbeat`), applies `sqlflow ctl` (`runtime.control`: pause,
resume, rate) and feeds the metrics (`runtime.metrics`), and drives its companions: the Kafka
sources' live archive queries (`runtime.kafka.live`).

Over Spark Connect (docs/deploy.md, "The stream service over Connect") the server's Python
worker runs the micro-batches, so no report reaches `on_batch` while a query runs: the loop
supervises each query through its `StreamingQuery` handle as it does locally (restarts,
pause/resume, stop) and, once the checkpoint has a new commit, reads what the batches did from
the query's progress and the commit log (`dispatch.remote_reports`) and feeds those reports to
the same callback. `sqlflow ctl rate` cannot hold a batch there (it is ignored, and `ctl rate`
refuses it). The idle-timeout step of an `incremental` outer join, which locally shares a lock
with the batches, runs with the model's query stopped: stop, pad, start again from the
checkpoint, and only when the step would pad (`incremental.remote_idle`); a `stateful` model's
idle watch only appends a heartbeat to an input and runs beside the query as it does locally,
reading when the inputs last brought rows from the offset log (`runtime.input_activity`).

A stop (SIGTERM, Ctrl-C, or `stop`) stops every query within `stop_timeout_s`: Spark lets a
running micro-batch finish or abandons it; an abandoned batch is replayed after the restart
and the exactly-once journal (`runtime.delta.once`) keeps it from writing anything twice.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlflow.errors import SqlflowError
from sqlflow.runtime import control, dispatch, heartbeat
from sqlflow.runtime.batchfn import query_failed
from sqlflow.runtime.env_errors import written_paths
from sqlflow.runtime.incremental import remote
from sqlflow.runtime.incremental.remote_idle import RemoteIdle
from sqlflow.runtime.query import checkpoint_dir, committed, rebuild_command, settled
from sqlflow.runtime.restarts import RestartBudget
from sqlflow.runtime.results import StreamRow

HOUR_S = 3600.0
STOP_TIMEOUT = "spark.sql.streaming.stopTimeout"


@dataclass(frozen=True)
class RegionEvent:
    """A model's region changed state: `restarting` (in `delay` seconds, after `error`),
    `failed`, `paused`, `running` (started or resumed), `waiting` (`error` says for which
    upstream tables), `stopped`."""

    model: str
    state: str
    error: str | None = None
    delay: float | None = None

    def line(self) -> str:
        if self.state == "running" and self.delay is not None:
            return (f"{self.model}: running again after its idle-timeout step "
                    f"(stop, pad, start: {self.delay:.1f}s)")
        if self.state == "restarting":
            return f"{self.model}: query failed, restarting in {self.delay:.1f}s: {self.error}"
        if self.state == "failed":
            return f"{self.model}: FAILED, no more restarts: {self.error}"
        if self.state == "waiting":
            return f"{self.model}: waiting {self.error}"
        return f"{self.model}: {self.state}"


@dataclass
class Region:
    """One plan's query and what the service knows of it."""

    plan: Any
    budget: RestartBudget
    health: heartbeat.ModelHealth
    query: Any = None
    fn: Any = None
    restart_at: float = 0.0
    reports: list[Any] = field(default_factory=list)
    error: SqlflowError | None = None
    on_batch: Any = None
    seen: int = -1  # over Connect: the newest batch id reported
    idle: RemoteIdle | None = None  # over Connect: an outer join's idle step (`remote_idle`)


def stop_signals(stop: threading.Event) -> Callable[[], None]:
    """Make SIGTERM set `stop` (Ctrl-C arrives as KeyboardInterrupt); returns the undo. Only
    the main thread can install handlers: elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    before = signal.signal(signal.SIGTERM, lambda *_: stop.set())

    def undo() -> None:
        signal.signal(signal.SIGTERM, before)
    return undo


class Service:
    """Run `plans` (stream plans, compile order) until `stop` is set or every region ended."""

    def __init__(self, ctx: Any, plans: Sequence[Any], *, trigger: str | None,
                 on_event: Callable[[Any], None], stop_timeout_s: float = 30.0,
                 metrics: Any = None, poll_s: float = 0.5,
                 stop: threading.Event | None = None, companions: Sequence[Any] = ()) -> None:
        self.ctx, self.trigger, self.on_event = ctx, trigger, on_event
        # what runs beside the regions, driven by the same loop (`start`, `poll`, `stop`): the
        # Kafka sources' live archive queries (`runtime.kafka.live`)
        self.companions = list(companions)
        self.stop_timeout_s, self.metrics, self.poll_s = stop_timeout_s, metrics, poll_s
        self.beat_s = 5.0  # the heartbeat's period while the loop waits (`_beating`)
        self.stop = stop or threading.Event()
        self.lock = threading.Lock()
        self.project_dir = Path(ctx.project_dir)
        self.regions = [Region(p, RestartBudget(p.restarts), heartbeat.ModelHealth(
            p.model, p.path, str(checkpoint_dir(self.project_dir, p)))) for p in plans]
        self.began = time.monotonic()
        # the server's worker runs the micro-batches (docs/deploy.md, "Spark Connect")
        self.remote = remote.is_remote(ctx.spark)

    # --- the loop -------------------------------------------------------------------------

    def run(self) -> list[Region]:
        undo = stop_signals(self.stop)
        # a stop waits this long for a running micro-batch (Spark reads it at query start);
        # the session is shared (tests, notebooks, dbt): its own value is put back at the end
        conf = self.ctx.spark.conf
        before = conf.getAll.get(STOP_TIMEOUT)  # None: not set in this session
        conf.set(STOP_TIMEOUT, str(int(self.stop_timeout_s * 1000)))
        try:
            # created once here: queries starting together raced to create it, and the loser
            # failed on Delta's ProtocolChangedException and spent a restart
            from sqlflow.runtime.delta import commitlog

            commitlog.ensure(self.ctx.spark)
            for companion in self.companions:
                companion.start()
            for region in self.regions:
                self._start_when_ready(region)
            while not self.stop.is_set():
                self._poll()
                if all(r.health.state in ("failed", "stopped") for r in self.regions):
                    break
                self.stop.wait(self.poll_s)
        except KeyboardInterrupt:
            pass
        finally:
            self._stop_all()
            undo()
            if before is None:
                conf.unset(STOP_TIMEOUT)
            else:
                conf.set(STOP_TIMEOUT, before)
        return self.regions

    def _poll(self) -> None:
        now = time.monotonic()
        for companion in self.companions:
            companion.poll(now)
        controls = control.read(self.project_dir)
        for r in self.regions:
            state = r.health.state
            paused = r.plan.model in controls.paused
            if state in ("running", "starting") and r.query is not None:
                if paused:
                    self._halt(r)
                    self._set(r, "paused")
                elif not r.query.isActive:
                    self._remote_batches(r)  # what it committed before it ended
                    self._failed(r, now)
                elif self.remote:
                    self._remote_batches(r)
                    self._remote_idle(r)
                else:
                    self._idle_check(r)
            elif state == "restarting" and now >= r.restart_at and not paused:
                self._start(r)
            elif state == "waiting" and not paused:
                self._start_when_ready(r)
            elif state == "paused" and not paused:
                self._start(r)
        self._beat(running=True)

    # --- one region ------------------------------------------------------------------------

    def _start_when_ready(self, r: Region) -> None:
        """Start `r`, or leave it `waiting` (no restart spent) while a table it reads that
        another region of this service writes does not exist yet: on a fresh project or after
        `--full-refresh`, a model's query would otherwise fail until its upstream query has
        written its first micro-batch, and spend its restarts on that."""
        missing = [t for t in self._upstream(r) if not self.ctx.spark.catalog.tableExists(t)]
        if not missing:
            self._start(r)
        elif r.health.state != "waiting":
            self._set(r, "waiting", error=f"until {', '.join(missing)} exist")

    def _upstream(self, r: Region) -> list[str]:
        """The tables `r` reads that other regions of this service write."""
        written = {t.lower() for o in self.regions if o is not r for t, _ in o.plan.outputs}
        return sorted({b.relation.lower() for b in r.plan.sources} & written)

    def _start(self, r: Region, *, after_idle: float | None = None) -> None:
        """Start `r`'s query; `after_idle`: when (monotonic) its stop for an idle step over
        Connect began (`_remote_idle`): the region keeps what it knows of its idle inputs."""
        trigger = self.trigger or r.plan.trigger
        r.on_batch = self._on_batch(r)
        release = getattr(r.fn, "release", None)  # the ended query's held rows (`MicroBatch`)
        if release is not None:
            release()
        r.query, r.fn = None, None
        try:
            r.query, r.fn = dispatch.start_stream(self.ctx, r.plan, trigger=trigger,
                                                  on_batch=r.on_batch)
            if after_idle is None:
                r.idle = self._idle_watch(r)
        except Exception as exc:  # refused or failed to start: the same budget as a failure
            self._halt(r)  # a query that started before the failure
            r.query, r.fn = None, None
            self._failed(r, time.monotonic(), exc)
            return
        self._set(r, "running", **({} if after_idle is None else
                                   {"delay": time.monotonic() - after_idle}))

    def _idle_watch(self, r: Region) -> RemoteIdle | None:
        """Over Connect, for an `incremental` outer join whose `idle_timeout` pads: what decides
        when to stop its query for the idle step (a `stateful` model's watch runs beside its
        query, `stateful.stream.IdleWatch`)."""
        plan = r.plan
        if not self.remote or not dispatch.needs_idle_padding(plan) or plan.strategy == "stateful":
            return None
        return RemoteIdle.of(self.ctx.spark, plan, checkpoint_dir(self.project_dir, plan))

    def _failed(self, r: Region, now: float, exc: BaseException | None = None) -> None:
        cause = exc or (r.query.exception() if r.query is not None else None)
        if cause is None:  # ended by itself (an available-now trigger): done
            self._set(r, "stopped")
            return
        err = query_failed(f"model `{r.plan.model}`", r.plan.path,
                           getattr(r.fn, "error", None), cause, rebuild=rebuild_command(r.plan),
                           written=written_paths(self.ctx, r.plan))
        r.error = err
        text = "; ".join(d.format() for d in err.diagnostics)
        r.health.last_error = text
        delay = r.budget.next_delay(now)
        r.health.restarts = r.budget.total
        if self.metrics is not None and delay is not None:
            self.metrics.restarted(r.plan.model)
        if delay is None:
            self._set(r, "failed", error=text)
        else:
            r.restart_at = now + delay
            self._set(r, "restarting", error=text, delay=delay)

    def _set(self, r: Region, state: str, **detail: Any) -> None:
        r.health.state = state
        self.on_event(RegionEvent(r.plan.model, state, **detail))

    def _halt(self, r: Region) -> None:
        if r.query is not None:
            try:
                r.query.stop()
            except Exception:  # a stop that timed out: the batch is replayed, never doubled
                pass

    def _idle_check(self, r: Region) -> None:
        if getattr(r.plan, "idle_timeout_us", None) and hasattr(r.fn, "idle_check"):
            r.fn.idle_check(lambda: settled(r.fn.checkpoint))

    def _remote_idle(self, r: Region) -> None:
        """Over Connect: the idle-timeout step of an outer join, when it would pad, with the
        query stopped (stop, wait until inactive, pad here, start again from the checkpoint:
        `incremental.remote_idle`). A query that failed meanwhile, or a step that failed,
        takes the failure path (its restart's `redo` finishes a recorded step)."""
        if r.idle is None or r.query is None:
            return
        try:
            if not r.idle.due(r.fn):
                return
        except Exception:  # the query stopped under us: the poll's next state check sees it
            return
        began = time.monotonic()
        with self._beating():  # the loop waits for the cycle: `sqlflow status` must not
            self._halt(r)
            deadline = began + self.stop_timeout_s + 30
            while r.query.isActive and time.monotonic() < deadline and not self.stop.is_set():
                self.stop.wait(0.2)
            self._remote_batches(r)  # what it committed before it stopped
            if r.query.isActive:  # a stop that did not end it (or the service stops): no step
                return
            if r.query.exception() is not None:
                self._failed(r, time.monotonic())
                return
            try:
                r.idle.pad(r.fn)  # its report reaches `on_batch` through the batch function
            except Exception as exc:
                self._failed(r, time.monotonic(), exc)
                return
            if self.stop.is_set():
                self._set(r, "stopped")
                return
            self._start(r, after_idle=began)

    @contextmanager
    def _beating(self) -> Iterator[None]:
        """Keep the heartbeat fresh while the loop waits for something long (a stop, pad,
        start cycle: tens of seconds on a loaded server), so the service is not taken for
        dead (`sqlflow status`: a heartbeat older than 30 s)."""
        done = threading.Event()

        def beat() -> None:
            while not done.wait(self.beat_s):
                self._beat(running=True)
        thread = threading.Thread(target=beat, name="sqlflow-heartbeat", daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join()

    def _remote_batches(self, r: Region) -> None:
        """Over Connect: report the batches the server committed since the last report. A
        batch is done once the checkpoint has its commit file and the query's progress has
        its `addBatch` time (an idle trigger's progress names the next batch id too)."""
        if not self.remote or r.query is None or r.fn is None:
            return
        newest = committed(checkpoint_dir(self.project_dir, r.plan))
        if newest <= r.seen:
            return
        try:
            ran = {p.batchId for p in r.query.recentProgress if "addBatch" in p.durationMs}
            fresh = [b for b in dispatch.remote_reports(self.ctx, r.plan, r.query, r.fn)
                     if r.seen < b.batch_id <= newest and b.batch_id in ran]
        except Exception:  # the query stopped under us: the poll's next state check sees it
            return
        for report in sorted(fresh, key=lambda b: b.batch_id):
            r.seen = report.batch_id
            r.on_batch(report)

    def _on_batch(self, r: Region) -> Callable[[Any], None]:
        def on_batch(report: Any) -> None:
            now = time.time()
            rows_in = report.rows_in if isinstance(report.rows_in, int) else \
                sum(n for _, n in report.rows_in)
            with self.lock:
                r.reports.append(report)
                h = r.health
                if report.kind == "batch":
                    h.last_batch_id, h.last_batch_at = report.batch_id, now
                    h.last_batch_seconds = report.seconds
                newest = getattr(report, "newest_ingest_us", None)
                if newest is not None:
                    h.newest_ingest_at = max(h.newest_ingest_at or 0.0, newest / 1e6)
                h.rows_in += rows_in
                h.rows_out += report.rows_out
                reasons = dict(getattr(report, "reasons", ()))  # every runtime reports them
                if report.quarantined > sum(reasons.values()):
                    reasons["all"] = report.quarantined - sum(reasons.values())
                for reason, n in reasons.items():
                    h.quarantined[reason] = h.quarantined.get(reason, 0) + n
                h.dirty = sorted({*h.dirty, *(p for p, _ in getattr(report, "dirty", ()))})
                h.batches = [b for b in h.batches if now - b[0] < HOUR_S] + \
                    [[now, rows_in, report.rows_out, report.quarantined]]
            if self.metrics is not None:
                self.metrics.batch(r.plan.model, report, rows_in, len(r.health.dirty),
                                   r.health.newest_ingest_at)
            self.on_event(report)
            self._throttle(r, report)
        return on_batch

    def _throttle(self, r: Region, report: Any) -> None:
        """`sqlflow ctl rate M SOURCE N`: after a micro-batch that read n rows of SOURCE,
        wait until n / N seconds have passed since it began (the next one starts later)."""
        if isinstance(report.rows_in, int) or self.remote:  # over Connect: too late to hold it
            return
        controls = control.read(self.project_dir)
        waits = [n / rate - report.seconds for src, n in report.rows_in
                 if (rate := controls.rate(r.plan.model, src))]
        if waits and max(waits) > 0:
            self.stop.wait(max(waits))

    # --- stop --------------------------------------------------------------------------------

    def _stop_all(self) -> None:
        live = [r for r in self.regions if r.query is not None and r.query.isActive]
        if live:  # in parallel: the whole stop is bounded by one timeout, not one per model
            with ThreadPoolExecutor(len(live)) as pool:
                list(pool.map(self._halt, live))
        for companion in self.companions:
            companion.stop()
        for r in self.regions:
            if r.health.state in ("running", "starting", "paused", "restarting", "waiting"):
                r.health.state = "stopped"
        self._beat(running=False)

    def _beat(self, *, running: bool) -> None:
        with self.lock:
            heartbeat.write(self.project_dir, [r.health for r in self.regions], running=running,
                            now=time.time(),
                            connect=self.ctx.target.name if self.remote else None)
        if self.metrics is not None:
            self.metrics.states(self.regions)

    # --- the result ------------------------------------------------------------------------

    def rows(self) -> list[StreamRow]:
        seconds = time.monotonic() - self.began
        return [StreamRow(r.plan.model, "stream", sum(b.kind == "batch" for b in r.reports),
                          sum(b.rows_out for b in r.reports),
                          sum(b.quarantined for b in r.reports), seconds,
                          len({p for b in r.reports for p, _ in getattr(b, "dirty", ())}),
                          state=r.health.state, restarts=r.health.restarts,
                          error=r.health.last_error if r.health.state == "failed" else None)
                for r in self.regions]
