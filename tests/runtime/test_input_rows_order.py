"""`input_rows` without a JVM: the tables the caller located are counted first, so one that
cannot be counted (Spark Connect: no local log) ends it before any catalog call; and a count
that fails leaves the run as configured instead of failing it."""

from __future__ import annotations

import pytest
from pyspark.errors import AnalysisException

from sqlflow.runtime import input_rows
from sqlflow.runtime.delta.deltalog import TableInfo


def test_an_uncountable_located_input_ends_the_count_before_the_catalog_is_asked(monkeypatch):
    asked: list[list[str]] = []
    monkeypatch.setattr(input_rows, "locate", lambda spark, names: asked.append(names) or {})
    monkeypatch.setattr(input_rows, "local_log", lambda spark, location: None)  # as over Connect
    known = {"dw.fact": TableInfo("delta", "/warehouse/dw.db/fact", ())}
    assert input_rows.rows_read(object(), ["dim.d", "DW.FACT", "sqlflow.commit_log"], known) is None
    assert asked == []


def test_the_inputs_not_located_are_located_once_after_the_located_ones(monkeypatch):
    asked: list[list[str]] = []
    info = {n: TableInfo("delta", f"/w/{n}", ()) for n in ("dim.d", "sqlflow.commit_log")}
    monkeypatch.setattr(input_rows, "locate", lambda spark, names: asked.append(names) or info)
    counted: list[str] = []

    def rows(spark, name, found):
        counted.append(name)
        return {"dw.fact": 5, "dim.d": 2, "sqlflow.commit_log": 1}[name] if found else None

    monkeypatch.setattr(input_rows, "_table_rows", rows)
    known = {"dw.fact": TableInfo("delta", "/w/dw.fact", ())}
    assert input_rows.rows_read(object(), ["dim.d", "dw.fact", "sqlflow.commit_log", "DIM.D"], known) == 8
    assert counted == ["dw.fact", "dim.d", "sqlflow.commit_log"]
    assert asked == [["dim.d", "sqlflow.commit_log"]]


@pytest.mark.parametrize("error", [AnalysisException("[INSUFFICIENT_PERMISSIONS] not allowed"),
                                   PermissionError(13, "Permission denied"), ValueError("bad JSON")])
def test_a_count_that_fails_runs_the_backfill_as_configured(monkeypatch, error):
    """The count is a choice of speed: a catalog or log it cannot read (a database it may not
    list, an unreadable `_delta_log`) is not the run's failure; the run's own reads say it."""
    def fail(*args):
        raise error

    monkeypatch.setattr(input_rows, "locate", fail)
    assert input_rows.small(object(), ["dim.d"], {}) is False
    monkeypatch.setattr(input_rows, "locate", lambda spark, names: {"dim.d": TableInfo("delta", "/w/d", ())})
    monkeypatch.setattr(input_rows, "_table_rows", fail)
    assert input_rows.small(object(), ["dim.d"], {}) is False
    with pytest.raises(type(error)):  # rows_read itself does not hide it
        input_rows.rows_read(object(), ["dim.d"], {})
