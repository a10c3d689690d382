"""When the stream service over Spark Connect stops an outer join's query for its idle step
(`incremental.remote_idle`), decided from the checkpoint's offset and commit files
(`input_activity`) and the batch function's `idle_due`: JVM-free, a fake batch function."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from sqlflow.runtime.incremental.remote_idle import RemoteIdle
from sqlflow.runtime.input_activity import InputActivity

IDS = {"id-imps": "ods.imps", "id-clicks": "ods.clicks"}


def batch(ck: Path, b: int, imps: int, clicks: int, *, commit: bool = True) -> None:
    """Batch `b` planned with the two sources' end versions (and committed)."""
    (ck / "offsets").mkdir(parents=True, exist_ok=True)
    (ck / "commits").mkdir(exist_ok=True)
    lines = ["v1", "{}"] + [json.dumps({"reservoirId": i, "reservoirVersion": v, "index": -1,
                                        "isStartingVersion": False})
                            for i, v in (("id-imps", imps), ("id-clicks", clicks))]
    (ck / "offsets" / str(b)).write_text("\n".join(lines))
    if commit:
        (ck / "commits" / str(b)).write_text("v1\n{}")


class Fn:
    """The batch function's side: whether a step for the idle inputs would move a cutoff."""

    def __init__(self, moves: bool):
        self.moves, self.asked = moves, []

    def idle_due(self, idle: set[str]) -> bool:
        self.asked.append(sorted(idle))
        return self.moves


def watch(ck: Path, began: float) -> RemoteIdle:
    return RemoteIdle(SimpleNamespace(idle_timeout_us=3_000_000), ck, InputActivity(ck, IDS, now=began))


def test_the_query_stops_only_when_the_step_would_pad(tmp_path):
    ck = tmp_path / "ck"
    idle = watch(ck, began=0.0)
    batch(ck, 0, imps=2, clicks=2)
    fn = Fn(moves=False)
    assert not idle.due(fn, now=1.0)  # both brought rows at 1.0: nothing idle yet
    assert not idle.due(fn, now=3.5) and fn.asked == []
    batch(ck, 1, imps=3, clicks=2)  # the impressions bring rows, the clicks do not
    assert not idle.due(fn, now=4.5)
    assert fn.asked == [["ods.clicks"]]  # idle since 1.0, but the cutoff stays
    assert not idle.due(fn, now=5.0) and len(fn.asked) == 1  # asked once per commit
    batch(ck, 2, imps=4, clicks=2)
    fn.moves = True
    assert idle.due(fn, now=6.0) and fn.asked[-1] == ["ods.clicks"]  # imps brought rows at 6.0


def test_never_under_a_batch_and_one_step_per_idle_timeout(tmp_path):
    ck = tmp_path / "ck"
    batch(ck, 0, imps=2, clicks=2)  # committed before the watch began: not counted again
    idle = watch(ck, began=10.0)
    fn = Fn(moves=True)
    assert not idle.due(fn, now=12.9)
    batch(ck, 1, imps=2, clicks=2, commit=False)  # in flight (reading nothing new)
    assert not idle.due(fn, now=13.0) and fn.asked == []
    (ck / "commits" / "1").write_text("v1\n{}")
    assert idle.due(fn, now=13.0)
    report = idle.pad(SimpleNamespace(idle_check=lambda settled, last_rows: (settled(), last_rows)))
    assert report == (True, {"ods.imps": 10.0, "ods.clicks": 10.0})
    assert not idle.due(fn, now=idle.padded_at + 2.9)
    assert idle.due(fn, now=idle.padded_at + 3.0)


def test_the_heartbeat_stays_fresh_while_the_loop_waits_for_a_cycle(tmp_path):
    """A stop, pad, start cycle blocks the service's loop for tens of seconds on a loaded
    server: the heartbeat file is written meanwhile (`sqlflow status` takes a heartbeat older
    than 30 s for a dead service)."""
    import time

    from sqlflow.runtime import heartbeat
    from sqlflow.runtime.service import Service

    ctx = SimpleNamespace(spark=object(), project_dir=tmp_path, target=SimpleNamespace(name="connect"))
    service = Service(ctx, [], trigger="1 second",
                      on_event=lambda e: None)
    service.beat_s = 0.05
    with service._beating():
        time.sleep(0.5)
        beat = heartbeat.read(tmp_path)
    assert beat is not None and beat["running"] and time.time() - beat["updated_at"] < 1
