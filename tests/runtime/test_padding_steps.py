"""The close rule of outer stream joins (`sqlflow.runtime.incremental.padding`), without a JVM: how a
step's frontiers become cutoffs, to the microsecond, and when flush and idle steps move them."""

from __future__ import annotations

from sqlflow.planning.plan import PruneRange, SourceBinding
from sqlflow.project.eventtime import EventTime
from sqlflow.runtime.incremental import padding

MIN = 60_000_000
IMPS = SourceBinding("ods.imps", "ods.imps", "stream", time=EventTime("imp_ts", "ingest_ts", 10 * MIN),
                     pending_view="p_imps", old_view="o_imps",
                     view="d_imps", prune=(PruneRange("imp_ts", "ods.clicks", "click_ts", -20 * MIN, 0),))
CLICKS = SourceBinding("ods.clicks", "ods.clicks", "stream", time=EventTime("click_ts", "ingest_ts", 5 * MIN),
                       old_view="o_clicks",
                       view="d_clicks",
                       prune=(PruneRange("click_ts", "ods.imps", "imp_ts", 0, 20 * MIN),))
LEFT = padding.Side(IMPS, CLICKS, "SELECT 1", upper_us=20 * MIN, lower_us=0)


def test_a_batch_cutoff_is_the_other_sides_frontier_minus_its_lateness_and_the_bound():
    now = padding.advance(padding.Progress(), [LEFT], [IMPS, CLICKS], 0,
                          {"ods.imps": 100 * MIN, "ods.clicks": 60 * MIN})
    # rows of imps with t < 60 min - 5 min (clicks' lateness) - 20 min are closed
    assert now.cutoff_of("ods.imps") == 35 * MIN
    assert now.cutoff_of("ods.clicks") is None  # not a preserved side
    # a later batch with an older clicks frontier keeps the frontier and the cutoff
    later = padding.advance(now, [LEFT], [IMPS, CLICKS], 1, {"ods.clicks": 50 * MIN})
    assert (later.frontier_of("ods.clicks"), later.cutoff_of("ods.imps")) == (60 * MIN, 35 * MIN)
    assert later.batch == 1 and later.flushed == -1


def test_no_frontier_of_the_other_side_closes_nothing():
    now = padding.advance(padding.Progress(), [LEFT], [IMPS, CLICKS], 0, {"ods.imps": 100 * MIN})
    assert now.cutoff_of("ods.imps") is None


def test_an_idle_step_uses_the_busy_sides_frontier_once():
    now = padding.advance(padding.Progress(), [LEFT], [IMPS, CLICKS], 3,
                          {"ods.imps": 100 * MIN, "ods.clicks": 60 * MIN})
    assert padding.idle(now, [LEFT], {"ods.imps"}) is None  # only an idle OTHER side counts
    step = padding.idle(now, [LEFT], {"ods.clicks"})
    assert step.cutoff_of("ods.imps") == 100 * MIN - 5 * MIN - 20 * MIN
    assert (step.batch, step.seq) == (3, 1)
    assert padding.idle(step, [LEFT], {"ods.clicks"}) is None  # nothing moves a second time


def test_a_flush_closes_every_batch_so_far_once():
    assert padding.flush(padding.Progress()) is None  # no batch yet
    now = padding.advance(padding.Progress(), [LEFT], [IMPS, CLICKS], 4, {})
    step = padding.flush(now)
    assert (step.flushed, step.batch, step.seq) == (4, 4, 1)
    assert padding.flush(step) is None  # flushed already: a restart pads nothing twice
