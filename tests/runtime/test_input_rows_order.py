"""`input_rows.rows_read` without a JVM: the tables the caller located are counted first, so
one that cannot be counted (Spark Connect: no local log) ends it before any catalog call."""

from __future__ import annotations

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
