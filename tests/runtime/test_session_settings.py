"""`session_settings.changed` and `small_plan`: settings changed for a block and put back, on
a stand-in session (no JVM)."""

from __future__ import annotations

import pytest

from sqlflow.runtime import small_plan
from sqlflow.runtime.session_settings import changed


class Conf:
    def __init__(self, **values: str) -> None:
        self.values = dict(values)

    def get(self, key, default=None):
        return self.values.get(key, default)

    def set(self, key, value):
        self.values[key] = value

    def unset(self, key):
        self.values.pop(key, None)


class Session:
    def __init__(self, cores: int | None, **values: str) -> None:
        self.conf = Conf(**values)
        self._cores = cores

    @property
    def sparkContext(self):
        if self._cores is None:
            raise RuntimeError("no SparkContext over Spark Connect")
        return type("Context", (), {"defaultParallelism": self._cores})()


def test_settings_are_put_back_as_they_were_even_when_the_block_fails():
    spark = Session(2, a="1")
    with pytest.raises(ValueError), changed(spark, {"a": "2", "b": "3"}):
        assert spark.conf.values == {"a": "2", "b": "3"}
        raise ValueError
    assert spark.conf.values == {"a": "1"}  # `b` unset again, not left behind


def test_a_small_batch_is_planned_without_adaptive_execution_and_few_shuffle_partitions():
    spark = Session(2, **{small_plan.SHUFFLE: "200", small_plan.ADAPTIVE: "true"})
    with small_plan.small_plan(spark, True):
        assert spark.conf.values == {small_plan.SHUFFLE: "2", small_plan.ADAPTIVE: "false"}
    assert spark.conf.values == {small_plan.SHUFFLE: "200", small_plan.ADAPTIVE: "true"}
    with small_plan.small_plan(spark, True, interpreted=True):  # few rows read: no code generation
        assert spark.conf.values == {small_plan.SHUFFLE: "2", small_plan.ADAPTIVE: "false",
                                     **small_plan.INTERPRETED}
    assert spark.conf.values == {small_plan.SHUFFLE: "200", small_plan.ADAPTIVE: "true"}
    with small_plan.small_plan(spark, False, interpreted=True):  # a large batch: as configured
        assert spark.conf.values == {small_plan.SHUFFLE: "200", small_plan.ADAPTIVE: "true"}
    connect = Session(None, **{small_plan.SHUFFLE: "200"})
    with small_plan.small_plan(connect, True):  # no cores to ask: the partitions as they are
        assert connect.conf.values == {small_plan.SHUFFLE: "200", small_plan.ADAPTIVE: "false"}
    assert connect.conf.values == {small_plan.SHUFFLE: "200"}
