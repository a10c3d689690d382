"""A stream run on a full disk (docs/semantics.md, "When a run fails"), on real Spark and Delta:
the sink's schema lives on a small tmpfs that is filled up. The run stops with one line that
says the device is full, names the path and the fix (no Py4J `An error occurred while calling
o123.append`); once space is freed the rerun resumes and its sink equals the batch plan's
output row for row.

Mounting a tmpfs needs root (CI runs as root); elsewhere the test is skipped with that reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from runtime.adkit import IMP_SCHEMA, append, assert_same, at, imp, setup_projects
from sqlflow.errors import SqlflowError
from sqlflow.runtime.dispatch import run_stream

pytestmark = pytest.mark.spark

MODELS = {"copied.sql": """{{ config(materialized='streaming_table', partition_by=['dt']) }}
SELECT i.req_id, i.ad_id, i.imp_ts, to_date(i.imp_ts) AS dt FROM {{ source('ods', 'imps') }} AS i
"""}


@pytest.fixture
def tmpfs(tmp_path):
    """A 16 MB tmpfs, unmounted afterwards; skipped where mounting is not allowed."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CI runs this test as root)")
    mnt = tmp_path / "small_disk"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mnt)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.fixture
def setup(spark, tmp_path, request):
    yield from setup_projects(spark, tmp_path, request, "rt_env_", MODELS)


def fill(mnt) -> str:
    """Fill the file system up; the filler file's path."""
    filler = mnt / "filler"
    with open(filler, "wb") as out:
        try:
            while True:
                out.write(b"\0" * (1 << 16))
                out.flush()
        except OSError:
            pass
    return str(filler)


def test_a_full_disk_is_one_line_with_path_and_fix_and_the_rerun_equals_the_batch(spark, setup, tmpfs):
    s = setup
    rows = [imp(f"r{k}", k % 3, at(1, 10, k)) for k in range(20)]
    append(spark, f"{s.ods}.imps", rows, IMP_SCHEMA)
    plan = s.stream_plans["copied"]
    schema = plan.sink.table.rsplit(".", 1)[0]
    spark.sql(f"DROP DATABASE IF EXISTS {schema} CASCADE")
    spark.sql(f"CREATE DATABASE {schema} LOCATION '{tmpfs / schema}'")
    filler = fill(tmpfs)

    with pytest.raises(SqlflowError) as err:
        run_stream(s.stream, plan)
    (diag,) = err.value.diagnostics
    text = str(err.value)
    print(text)
    assert "\n" not in diag.message
    assert "no space left on the device holding `" in text, text
    assert "An error occurred while calling" not in text and "Traceback" not in text
    assert f"`file:{tmpfs}" in text or f"`{tmpfs}" in text, text  # the full disk, not another
    assert "free space on that file system" in diag.hint

    # the batch plan on the same full disk: one line too
    batch_schema = s.batch_plans["copied"].sink.table.rsplit(".", 1)[0]
    spark.sql(f"DROP DATABASE IF EXISTS {batch_schema} CASCADE")
    spark.sql(f"CREATE DATABASE {batch_schema} LOCATION '{tmpfs / batch_schema}'")
    with pytest.raises(SqlflowError) as err:
        s.truth("copied")
    (diag,) = err.value.diagnostics
    assert "no space left on the device holding `" in diag.message, str(err.value)
    assert str(tmpfs) in diag.message and "Traceback" not in str(err.value)
    assert "free space on that file system" in diag.hint and "DROP TABLE" not in str(err.value)

    os.remove(filler)
    run_stream(s.stream, plan)
    truth, _ = s.truth("copied")
    assert_same(spark, plan.sink.table, truth)
    for name in (schema, batch_schema):
        spark.sql(f"DROP DATABASE IF EXISTS {name} CASCADE")
        shutil.rmtree(tmpfs / name, ignore_errors=True)
