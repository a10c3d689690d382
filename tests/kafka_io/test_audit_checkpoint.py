"""What `sqlflow audit` reads from a stream's checkpoint, without a JVM: the input versions of
its last committed micro-batch, or why they cannot be told (`sqlflow.workflows.audit`)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from sqlflow.workflows.audit import partition_predicate, processed_versions

PLAN = SimpleNamespace(sources=(SimpleNamespace(read="stream", relation="ods.clicks"),
                                SimpleNamespace(read="static", relation="dim.ads"),
                                SimpleNamespace(read="stream", relation="ods.shows")))


def _batch(root, batch_id: int, *ends: tuple[int, int, bool], committed: bool = True) -> None:
    lines = ["v1", json.dumps({"batchWatermarkMs": 0})] + [
        json.dumps({"reservoirVersion": v, "index": i, "isStartingVersion": s}) for v, i, s in ends]
    (root / "offsets").mkdir(exist_ok=True)
    (root / "offsets" / str(batch_id)).write_text("\n".join(lines))
    if committed:
        (root / "commits").mkdir(exist_ok=True)
        (root / "commits" / str(batch_id)).write_text('v1\n{"nextBatchWatermarkMs":0}')


def test_the_last_committed_batch_names_the_versions(tmp_path) -> None:
    assert "has not committed a micro-batch" in processed_versions(tmp_path, PLAN)
    _batch(tmp_path, 0, (3, -1, False), (5, -1, False))
    _batch(tmp_path, 1, (7, -1, False), (9, -1, False))
    _batch(tmp_path, 2, (8, -1, False), (10, -1, False), committed=False)  # planned, not done
    # a Delta source's end (v, -1) delivered the table as of version v - 1
    assert processed_versions(tmp_path, PLAN) == {"ods.clicks": 6, "ods.shows": 8}


def test_a_batch_ending_inside_a_version_is_not_audited(tmp_path) -> None:
    _batch(tmp_path, 0, (3, 4, False), (5, -1, False))
    assert "ended inside a version of `ods.clicks`" in processed_versions(tmp_path, PLAN)
    _batch(tmp_path, 1, (3, -1, True), (5, -1, False))
    assert "processed nothing of `ods.clicks`" in processed_versions(tmp_path, PLAN)


def test_partition_predicates_quote_values() -> None:
    assert partition_predicate("dt=2025-11-24/region=o'hare", ["dt", "region"]) == (
        "CAST(`dt` AS STRING) = '2025-11-24' AND CAST(`region` AS STRING) = 'o\\'hare'")
    # Spark reads a backslash in a literal as an escape: it is doubled
    assert partition_predicate("region=a\\", ["region"]) == "CAST(`region` AS STRING) = 'a\\\\'"
    # the default partition holds NULL and the empty string, as Spark's directories do
    assert partition_predicate("dt=__HIVE_DEFAULT_PARTITION__", ["dt"]) == (
        "(CAST(`dt` AS STRING) IS NULL OR CAST(`dt` AS STRING) = '')")
    assert partition_predicate("(whole table)", []) == "true"


def test_partition_predicates_read_escaped_specs() -> None:
    # a value holding `/` or `=` is one level of the spec (`sqlflow.runtime.delta.partition_path`)
    assert partition_predicate("dt=2025-11-24/lane=a%2Fb%3Dc", ["dt", "lane"]) == (
        "CAST(`dt` AS STRING) = '2025-11-24' AND CAST(`lane` AS STRING) = 'a/b=c'")
    with pytest.raises(ValueError, match="not a partition like"):  # an unescaped `/`
        partition_predicate("dt=2025-11-24/lane=a/b", ["dt", "lane"])
    with pytest.raises(ValueError, match="does not name the 2 partition column"):
        partition_predicate("dt=2025-11-24", ["dt", "lane"])
