"""A target's Maven packages are resolved by Ivy once, then passed as jars from the cache
(`sqlflow.engine.jars`): a Spark start prints no Ivy resolution report."""

from __future__ import annotations

import threading

from sqlflow.engine import jars

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
