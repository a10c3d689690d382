"""How a project runs, defined once: the two compile modes, the bounded trigger, and the
folder (under the project) that holds everything sqlflow generates."""

from __future__ import annotations

from typing import Literal

Mode = Literal["stream", "batch"]
"""`stream`: Structured Streaming plans; `batch`: backfill plans of the same models."""

AVAILABLE_NOW = "available-now"
"""The bounded trigger: process what the inputs hold, flush, stop."""

STATE_DIR = ".sqlflow"
"""Tables, metastore, checkpoints and verify scratch, under the project root (git-ignored)."""
