"""Stage 4, plan: a `ModelIR` becomes a `BatchPlan`, a `StreamPlan` or (fan-out fusion) a
`RoutedPlan`: plain frozen values the runtime runs (docs/design.md §3). `delta/` is the delta
rule of §2.9; `dimplan` plans §2.3; `fusion` and `shared_calls` plan §2.4.
"""

from sqlflow.planning.plan import BatchPlan, Plan, RoutedPlan, StreamPlan
from sqlflow.planning.planner import build_plan

__all__ = ["BatchPlan", "Plan", "RoutedPlan", "StreamPlan", "build_plan"]
