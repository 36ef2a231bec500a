"""The self-editing search harness: loop, budget, context view, trajectory."""

from sleuth.harness.budget import BudgetConfig
from sleuth.harness.loop import Harness, HarnessConfig
from sleuth.harness.run import RankedDocument, RunResult, RunTimings, run_query
from sleuth.harness.trajectory import StopReason, Trajectory, load_trajectory

__all__ = [
    "BudgetConfig",
    "Harness",
    "HarnessConfig",
    "RankedDocument",
    "RunResult",
    "RunTimings",
    "StopReason",
    "Trajectory",
    "load_trajectory",
    "run_query",
]
