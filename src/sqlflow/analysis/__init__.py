"""Stage 3, analyze: one rendered model's SQL → `ModelIR` (its inputs, joins, aggregations,
windows, dedups, determinism and output columns), and the stream-safety checks of
docs/design.md §2.8 (`stream_safety`). The passes live in `passes/`, one concern each.
"""

from sqlflow.analysis.analyze import analyze
from sqlflow.analysis.ir import InputRel, ModelIR

__all__ = ["InputRel", "ModelIR", "analyze"]
