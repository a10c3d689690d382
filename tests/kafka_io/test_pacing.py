"""The archive's source control without a JVM (`sqlflow.runtime.kafka.pacing`): the rate held
across micro-batches, playback at N x then live, and an alignment group whose live source waits
for the one replaying its backlog (real threads, as Spark's micro-batch threads call them)."""

from __future__ import annotations

import threading
import time

from sqlflow.runtime.kafka.pacing import Aligner, Pacer


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_rate_is_held_across_micro_batches_and_a_slow_batch_is_not_held() -> None:
    clock = _Clock()
    pacer = Pacer(rows_per_second=50, clock=clock, sleep=clock.sleep)
    writes = []
    for rows, busy in ((100, 0.1), (50, 0.1), (50, 5.0), (50, 0.0)):
        pacer.hold(rows=rows, first_ms=None, last_ms=None)
        writes.append(clock.now)
        clock.now += busy  # the write itself
    # 100 rows cost 2 s, 50 cost 1 s; a batch written after a slow one is not held
    assert [round(w - writes[0], 3) for w in writes] == [0.0, 2.0, 3.0, 8.0]


def test_playback_at_n_times_then_live() -> None:
    clock = _Clock()
    pacer = Pacer(speed=4, clock=clock, sleep=clock.sleep)
    start = clock.now
    # a backlog: batches of 20 s of ingest time each, written 5 s apart at 4x
    for k in range(3):
        pacer.hold(rows=10, first_ms=k * 20_000, last_ms=(k + 1) * 20_000)
        assert clock.now - start == (k + 1) * 5.0
    # caught up: a batch whose records are behind the 4x schedule is written at once
    clock.now += 100
    assert pacer.hold(rows=10, first_ms=60_000, last_ms=80_000) == 0.0


def test_the_live_source_waits_for_the_backlog_within_max_skew() -> None:
    aligner = Aligner(max_skew_ms=30, members=["backlog", "live"], poll_s=0.01)
    aligner.start("backlog", None)
    aligner.start("live", None)
    written: list[tuple[str, int, float]] = []  # (source, newest ms, backlog's position then)

    def run(name: str, batches: list[tuple[int, int]]) -> None:
        for first, last in batches:
            aligner.hold(name, first_ms=first, last_ms=last)
            time.sleep(0.05)  # the write: a Spark micro-batch takes a while
            written.append((name, last, aligner.positions["backlog"] or 0))
            aligner.wrote(name, last)
        aligner.finish(name)

    live = threading.Thread(target=run, args=("live", [(115, 120)]))
    live.start()
    backlog = threading.Thread(target=run, args=("backlog", [(k * 10, k * 10 + 9) for k in range(12)]))
    backlog.start()
    live.join(10)
    backlog.join(10)
    assert not live.is_alive() and not backlog.is_alive()
    [(_, newest, position)] = [w for w in written if w[0] == "live"]
    assert newest - position <= 30 and aligner.lead_ms["live"] <= 30
    assert [w[1] for w in written if w[0] == "backlog"] == [k * 10 + 9 for k in range(12)]


def test_two_waiting_sources_never_wait_for_each_other() -> None:
    aligner = Aligner(max_skew_ms=5, members=["a", "b"], poll_s=0.01)
    aligner.start("a", None)
    aligner.start("b", None)
    done = []

    def run(name: str, first: int, last: int) -> None:
        aligner.hold(name, first_ms=first, last_ms=last)
        done.append(name)
        aligner.wrote(name, last)
        aligner.finish(name)

    threads = [threading.Thread(target=run, args=("a", 0, 100)),
               threading.Thread(target=run, args=("b", 50, 60))]
    for th in threads:
        th.start()
    for th in threads:
        th.join(10)
    assert done == ["a", "b"]  # the slowest goes first, then the other
