"""One spelling of a partition everywhere in the commit log, NULL values included (no JVM)."""

from sqlflow.runtime.delta import commitlog as C
from sqlflow.runtime.delta.sinks import PartitionWrite, WriteResult


def test_a_null_partition_value_is_spelled_the_same_by_sink_writes_and_the_commit_log():
    values = (("dt", None), ("hour", "03"))
    written = PartitionWrite(values, 4, 1)
    assert written.spec == "dt=__HIVE_DEFAULT_PARTITION__/hour=03"  # Spark's directory name
    assert written.spec == C.partition_spec(dict(values))
    assert C.parse_partition(written.spec) == {"dt": None, "hour": "03"}
    entries = C.write_entries(WriteResult("dw.m", "append_once", 1, rows=4, partitions=(written,)),
                              mode="stream", model="m")
    assert [e.partition for e in entries] == ["dt=__HIVE_DEFAULT_PARTITION__/hour=03"]
