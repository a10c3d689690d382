"""A target's Maven packages are resolved by Ivy once, then passed as jars from the cache
(`sqlflow.engine.jars`): a Spark start prints no Ivy resolution report."""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace

import pyspark

from sqlflow.engine import jars, session

PKG = "io.delta:delta-spark_4.2_2.13:4.4.0"


def test_packages_become_the_jars_an_earlier_start_resolved(tmp_path):
    conf = {"spark.jars.packages": PKG, "spark.jars.ivy": str(tmp_path), "spark.jars": "/own.jar"}
    assert jars.resolved(conf, "4.2.0") == conf  # nothing recorded yet: Spark resolves
    a, b = tmp_path / "jars" / "a.jar", tmp_path / "jars" / "b.jar"
    a.parent.mkdir()
    a.write_text("x")
    b.write_text("y")
    jars.remember(conf, "4.2.0", f"/own.jar,file://{a},file://{b}")
    out = jars.resolved(conf, "4.2.0")
    assert "spark.jars.packages" not in out
    assert out["spark.jars"] == f"/own.jar,file://{a},file://{b}"
    # another package set, or another Spark, resolves again
    assert jars.resolved({**conf, "spark.jars.packages": PKG + ",x:y:1"}, "4.2.0")["spark.jars.packages"]
    assert jars.resolved(conf, "4.3.0") == conf
    b.unlink()  # the Ivy cache was cleaned: resolve again
    assert jars.resolved(conf, "4.2.0") == conf


def test_no_packages_no_record(tmp_path):
    conf = {"spark.jars.ivy": str(tmp_path)}
    jars.remember(conf, "4.2.0", "")
    assert jars.resolved(conf, "4.2.0") == conf
    assert not (tmp_path / jars.FOLDER).exists()


def test_one_resolution_at_a_time_in_an_ivy_folder(tmp_path):
    """Two Ivy runs at once in an empty cache corrupt it: a second start waits for the first."""
    entered = threading.Event()

    def second() -> None:
        with jars.resolving(tmp_path):
            entered.set()

    with jars.resolving(tmp_path):
        other = threading.Thread(target=second)
        other.start()
        assert not entered.wait(1.0), "a second resolution ran while the first held the folder"
    other.join(30)
    assert entered.is_set(), "the second resolution never ran after the first ended"


class _Started:
    """What `session._start` was given, and a stand-in session whose `spark.jars` is `jars`."""

    def __init__(self, jars_: str):
        self.confs: list[dict[str, str]] = []
        self.jars = jars_

    def __call__(self, target, conf):
        self.confs.append(dict(conf))
        get = lambda key, default="": self.jars if key == jars.JARS else default  # noqa: E731
        return SimpleNamespace(sparkContext=SimpleNamespace(getConf=lambda: SimpleNamespace(get=get)))


def _jar_files(folder: Path) -> str:
    found = []
    for name in ("a.jar", "b.jar"):
        (folder / name).write_text(name)
        found.append(f"file://{folder / name}")
    return ",".join(found)


def test_the_start_that_resolves_records_its_jars_for_the_next(tmp_path, monkeypatch):
    conf = {jars.PACKAGES: PKG, "spark.jars.ivy": str(tmp_path)}
    started = _Started(_jar_files(tmp_path))
    monkeypatch.setattr(session, "_start", started)
    session._start_resolved(None, conf)
    assert started.confs[0][jars.PACKAGES] == PKG  # Ivy resolved them
    session._start_resolved(None, conf)
    assert jars.PACKAGES not in started.confs[1] and started.confs[1][jars.JARS] == started.jars


def test_a_start_that_waited_for_another_resolution_starts_from_its_jars(tmp_path, monkeypatch):
    conf = {jars.PACKAGES: PKG, "spark.jars.ivy": str(tmp_path)}
    started = _Started("")
    monkeypatch.setattr(session, "_start", started)
    other = threading.Thread(target=session._start_resolved, args=(None, conf))
    with jars.resolving(tmp_path):  # another process is resolving
        other.start()
        other.join(1.0)
        assert not started.confs, "a start resolved beside a running resolution"
        recorded = _jar_files(tmp_path)
        jars.remember(conf, pyspark.__version__, recorded)
    other.join(30)
    assert started.confs == [{"spark.jars.ivy": str(tmp_path), jars.JARS: recorded}]
