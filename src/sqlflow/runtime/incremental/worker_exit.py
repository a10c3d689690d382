"""Letting go of a Spark Connect query's held rows when the server's Python worker ends.

Over Connect the server runs a query's `foreachBatch` function in a Python worker of its own
(`remote.RemoteMicroBatch`), and the frames that function caches (the held older rows and the
state-table copies, `held`, `copies`) are cached in the server's JVM, which outlives the
worker: when the query stops the server ends the worker (a SIGTERM, or the end of its input),
and nothing unpersisted them. A service that restarts a query (after a failure, or by an
operator's command) left one query's held rows cached per restart, up to 2,000,000 rows an
input each time. `release_at_exit` has the worker release them as it ends: on SIGTERM (then
the process ends as the signal would have ended it) and at a normal interpreter exit, each at
most once and within `TIMEOUT` seconds (the server may be going down with the worker; a
release that cannot reach it must not keep the worker alive). The server signals a worker
more than once as it stops it; a SIGTERM that comes while the release runs waits for it (a
handler that ended the process then cut the release short: the frames stayed cached, in two
of three runs of `tests/cluster/test_connect_worker_exit.py` on 2026-12-02)."""

from __future__ import annotations

import atexit
import os
import signal
import threading
from collections.abc import Callable
from typing import Any

TIMEOUT = 10.0  # seconds a release may take before the worker ends without it


def release_at_exit(release: Callable[[], None]) -> None:
    """Call `release` once when this process ends (SIGTERM or interpreter exit). Only the
    main thread may install the signal handler, and only where SIGTERM ends the process (not
    ignored: releasing then would leave a running query without its held rows); elsewhere
    the exit hook alone is kept."""
    done = threading.Event()

    def run() -> None:
        if done.is_set():
            return
        done.set()
        worker = threading.Thread(target=_quietly, args=(release,), daemon=True)
        worker.start()
        worker.join(TIMEOUT)

    atexit.register(run)
    if threading.current_thread() is not threading.main_thread():
        return
    before = signal.getsignal(signal.SIGTERM)
    if before is signal.SIG_IGN:  # SIGTERM does not end this process: the query may go on
        return

    def on_term(signum: int, frame: Any) -> None:
        if done.is_set():  # a SIGTERM again while the release runs: the first one ends the process
            return
        run()
        signal.signal(signal.SIGTERM, before if before is not None else signal.SIG_DFL)
        if callable(before):
            before(signum, frame)
        else:
            os.kill(os.getpid(), signal.SIGTERM)  # ends the process as the signal would have

    signal.signal(signal.SIGTERM, on_term)


def _quietly(release: Callable[[], None]) -> None:
    try:
        release()
    except Exception:  # noqa: BLE001 - the process is ending: nothing to report to
        pass
