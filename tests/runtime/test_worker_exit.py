"""`runtime.incremental.worker_exit` in a child process of its own, without a JVM: the release
runs once when the process is ended by SIGTERM (which still ends it) or exits normally, and a
release that hangs does not keep the process alive past its timeout."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

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


def test_sigterm_releases_once_and_still_ends_the_process(tmp_path):
    proc, out = _child(tmp_path, "term")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == -signal.SIGTERM
    assert out.read_text() == "released\n"  # the exit hook did not run it a second time


def test_a_normal_exit_releases_once(tmp_path):
    proc, out = _child(tmp_path, "exit")
    assert proc.wait(timeout=20) == 0
    assert out.read_text() == "released\n"


def test_a_release_that_hangs_does_not_keep_the_process_alive(tmp_path):
    proc, out = _child(tmp_path, "hang")
    began = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == -signal.SIGTERM
    assert time.monotonic() - began < 20
    assert out.read_text() == "released\n"
