"""`runtime.incremental.worker_exit` in a child process of its own, without a JVM: the release
runs once when the process is ended by SIGTERM (which still ends it) or exits normally, and a
release that hangs does not keep the process alive past its timeout."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

CHILD = r"""
import sys, time
from pathlib import Path
from sqlflow.runtime.incremental import worker_exit

out, mode = Path(sys.argv[1]), sys.argv[2]
worker_exit.TIMEOUT = 1.0

def release():
    with out.open("a") as f:
        f.write("released\n")
    if mode == "hang":
        time.sleep(60)
    if mode == "slow":  # a release that takes a while, within the timeout
        time.sleep(0.6)
        with out.open("a") as f:
            f.write("finished\n")

worker_exit.release_at_exit(release)
print("ready", flush=True)
if mode != "exit":
    time.sleep(60)
"""


def _child(tmp_path: Path, mode: str) -> tuple[subprocess.Popen, Path]:
    out = tmp_path / f"{mode}.txt"
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(out), mode], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc, out


def _ended(proc: subprocess.Popen, timeout: float) -> int:
    """The child's exit status, waited for up to `timeout` seconds; past it the child is killed
    and the test fails with its signal state (`/proc/<pid>/status`: blocked, pending, caught
    and ignored signals, as hexadecimal masks; SIGTERM is 0x4000 in each), which says whether the
    SIGTERM reached a handler (once, a child of the full suite outlived it by 30 s)."""
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:  # (the child may end between the timeout and this read)
            state = [line for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines()
                     if line.startswith(("State", "Threads", "Sig", "ShdPnd"))]
        except OSError:
            state = []
        proc.kill()
        proc.wait()
        pytest.fail(f"the child did not end within {timeout} s: {state}")


def test_sigterm_releases_once_and_still_ends_the_process(tmp_path):
    proc, out = _child(tmp_path, "term")
    proc.send_signal(signal.SIGTERM)
    assert _ended(proc, 20) == -signal.SIGTERM
    assert out.read_text() == "released\n"  # the exit hook did not run it a second time


def test_a_second_sigterm_during_the_release_does_not_cut_it_short(tmp_path):
    """The Connect server signals its worker more than once as it stops it: a SIGTERM that
    comes while the release runs leaves it to finish (within its timeout), then the process
    ends as the signal ends it."""
    proc, out = _child(tmp_path, "slow")
    proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 10
    while not (out.exists() and out.read_text()) and time.monotonic() < deadline:
        time.sleep(0.02)  # until the release has started
    proc.send_signal(signal.SIGTERM)
    assert _ended(proc, 20) == -signal.SIGTERM
    assert out.read_text() == "released\nfinished\n"


def test_a_normal_exit_releases_once(tmp_path):
    proc, out = _child(tmp_path, "exit")
    assert _ended(proc, 20) == 0
    assert out.read_text() == "released\n"


def test_a_release_that_hangs_does_not_keep_the_process_alive(tmp_path):
    proc, out = _child(tmp_path, "hang")
    began = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert _ended(proc, 30) == -signal.SIGTERM
    assert time.monotonic() - began < 20
    assert out.read_text() == "released\n"


IGNORED = r"""
import signal, sys, time
from pathlib import Path
from sqlflow.runtime.incremental import worker_exit

out = Path(sys.argv[1])
signal.signal(signal.SIGTERM, signal.SIG_IGN)
worker_exit.release_at_exit(lambda: out.write_text("released\n"))
print("ready", flush=True)
sys.stdin.readline()  # until the test closes stdin
"""


def test_where_sigterm_is_ignored_it_releases_nothing_until_the_process_exits(tmp_path):
    out = tmp_path / "ignored.txt"
    proc = subprocess.Popen([sys.executable, "-c", IGNORED, str(out)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdin is not None
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGTERM)
    time.sleep(1.0)
    assert proc.poll() is None and not out.exists()  # still running, its held rows kept
    proc.stdin.close()
    assert proc.wait(timeout=20) == 0
    assert out.read_text() == "released\n"  # at its exit
