"""Machine failures in a Spark error become one line with the path and the fix
(`sqlflow.runtime.env_errors`; docs/semantics.md, "When a run fails"). The texts are Spark's,
Hadoop's and the JDK's own formats; the first is copied from a real run on a full tmpfs
(tests/runtime/test_env_errors_run.py runs it)."""

from __future__ import annotations

import pytest

from sqlflow.errors import SqlflowError
from sqlflow.runtime.batchfn import query_failed
from sqlflow.runtime.env_errors import environment_problem

TRACE = "\n\tat org.apache.hadoop.fs.RawLocalFileSystem$LocalFSFileOutputStream.write(RawLocalFileSystem.java:326)"

CASES = [
    # a real one: the Delta log write of a stream's sink on a full tmpfs; no path in the text
    ("An error occurred while calling o370.create.\n"
     ": org.apache.hadoop.fs.FSError: java.io.IOException: No space left on device" + TRACE,
     ("/mnt/small/dw", "/project/.sqlflow/checkpoints/m"),
     "no space left on the device holding `/mnt/small/dw`", "free space on that file system"),
    ("An error occurred while calling o1320.append.\n: org.apache.spark.SparkException: "
     "[TASK_WRITE_FAILED] Task failed while writing rows to file:/wh/dw.db/t. SQLSTATE: 58030"
     + TRACE + "\nCaused by: java.io.IOException: No space left on device" + TRACE, (),
     "no space left on the device holding `file:/wh/dw.db/t`", "then run again"),
    ("An error occurred while calling o88.save.\n: java.io.FileNotFoundException: "
     "/wh/dw.db/t/_delta_log/00000000000000000003.json (Permission denied)" + TRACE, (),
     "permission denied on `/wh/dw.db/t/_delta_log/00000000000000000003.json`", "write access"),
    ("An error occurred while calling o12.start.\n: java.nio.file.AccessDeniedException: "
     "/project/.sqlflow/checkpoints/m/offsets" + TRACE, (),
     "permission denied on `/project/.sqlflow/checkpoints/m/offsets`", "write access"),
    ("An error occurred while calling o9.saveAsTable.\n: java.nio.file.FileSystemException: "
     "/ro/wh/dw.db/t: Read-only file system" + TRACE, (),
     "`/ro/wh/dw.db/t` is on a read-only file system", "remount it read-write"),
    ("An error occurred while calling o45.collectToPython.\n: org.apache.spark.SparkException: "
     "Job aborted due to stage failure: java.io.FileNotFoundException: "
     "/tmp/blockmgr-1/0c/shuffle_0_1_0.data (Too many open files)" + TRACE, (),
     "too many open files (at `/tmp/blockmgr-1/0c/shuffle_0_1_0.data`)", "ulimit -n"),
    ("mkdirs failed: Mkdirs failed to create file:/wh/dw.db/t/dt=2026-11-01 "
     "(exists=false, cwd=file:/p): Permission denied", (),
     "permission denied on `file:/wh/dw.db/t/dt=2026-11-01`", "write access"),
]


@pytest.mark.parametrize("text, written, message, fix", CASES, ids=[c[2][:40] for c in CASES])
def test_machine_failures_name_the_path_and_the_fix(text, written, message, fix):
    problem = environment_problem(RuntimeError(text), written)
    assert problem is not None and problem.message == message
    assert fix in problem.fix


def test_the_cause_is_found_down_the_exception_chain():
    try:
        try:
            raise OSError("java.io.IOException: No space left on device")
        except OSError as inner:
            raise RuntimeError("An error occurred while calling o1.append.") from inner
    except RuntimeError as outer:
        problem = environment_problem(outer, ("/wh",))
    assert problem is not None and problem.message == "no space left on the device holding `/wh`"


def test_other_failures_are_not_machine_failures():
    assert environment_problem(RuntimeError(
        "An error occurred while calling o7.sql.\n: org.apache.spark.sql.AnalysisException: "
        "[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column `x` cannot be resolved")) is None


def test_a_stream_failure_is_one_line_and_says_to_fix_before_running_again():
    err = query_failed("model `m`", "models/m.sql", None, RuntimeError(CASES[1][0]))
    assert isinstance(err, SqlflowError)
    (diag,) = err.diagnostics
    assert diag.message == ("model `m`: stream query failed: no space left on the device "
                            "holding `file:/wh/dw.db/t`")
    assert diag.hint.startswith("free space on that file system")
    other = query_failed("model `m`", "models/m.sql", None, RuntimeError("boom\nat x"))
    assert other.diagnostics[0].message == "model `m`: stream query failed: boom"


def test_paths_on_one_full_disk_name_the_first_while_others_fill_it(tmp_path, monkeypatch):
    # the free space of one file system, asked once: a disk the other writers keep filling
    # (the suite's other worker) gave each path its own figure and named either of them
    from collections import namedtuple

    from sqlflow.runtime import env_errors

    usage, left = namedtuple("usage", "total used free"), iter(range(10_000, 0, -1))
    monkeypatch.setattr(env_errors.shutil, "disk_usage", lambda p: usage(0, 0, next(left)))
    first, second = tmp_path / "warehouse" / "dw", tmp_path / "checkpoints" / "m"
    text = "java.io.IOException: No space left on device" + TRACE
    problem = environment_problem(RuntimeError(text), (str(first), str(second)))
    assert problem is not None and problem.path == str(first)
