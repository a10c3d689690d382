"""ruff and mypy, configured in pyproject.toml, as part of the test command (so CI runs them).
No JVM: they read the source."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name(tool)
    cmd = [str(exe)] if exe.exists() else [shutil.which(tool) or tool]
    return subprocess.run([*cmd, *args], cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff() -> None:
    done = run("ruff", "check", "src", "tests", "bench", "udfs")
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-2000:]


def test_mypy() -> None:
    done = run("mypy")
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-2000:]
