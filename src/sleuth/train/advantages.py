"""Group advantages, the zero-variance filter and the RL schedules (SPEC §6).

Axes: ``G`` rollouts of one query (a group), ``P`` groups (prompts) in a step.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from itertools import pairwise
from typing import TypeVar, cast

GroupT = TypeVar("GroupT")

ZERO_VARIANCE_TOL = 1e-6  # rewards are continuous, so "identical" needs a tolerance (SkyRL's 1e-6)
BETA_START = 4.0  # SPEC §5: F_β weights recall 16x at first...
BETA_END = 2.0  # ...then 4x after annealing across epochs


def group_advantages(
    rewards_G: Sequence[float], normalize_std: bool = True, eps: float = 1e-6
) -> list[float]:
    """Advantage of each rollout relative to its group: ``(r - mean) / (std + eps)``.

    ``normalize_std=False`` keeps only the centring (Dr. GRPO, tinker-cookbook), which leaves a
    group's spread of rewards in the size of its update. The std is the population std, so the
    normalised advantages of a group have unit variance (up to ``eps``).
    """
    if not rewards_G:
        return []
    mean = statistics.fmean(rewards_G)
    scale = statistics.pstdev(rewards_G) + eps if normalize_std else 1.0
    return [(r - mean) / scale for r in rewards_G]


def is_constant_group(rewards_G: Sequence[float], tol: float = ZERO_VARIANCE_TOL) -> bool:
    """True when all rewards lie within ``tol`` of each other: the group carries no signal."""
    return not rewards_G or max(rewards_G) - min(rewards_G) <= tol


def filter_constant_groups(
    groups_P: Sequence[GroupT],
    tol: float = ZERO_VARIANCE_TOL,
    rewards_of: Callable[[GroupT], Sequence[float]] | None = None,
) -> tuple[list[GroupT], int]:
    """Drop groups whose rewards are identical within ``tol``; return the rest and how many went.

    Such groups have zero advantage everywhere, so they only dilute a token-mean loss.
    ``rewards_of`` reads a group's rewards; by default a group is its sequence of rewards.
    """
    read = rewards_of or (lambda group: cast(Sequence[float], group))
    kept_P = [g for g in groups_P if not is_constant_group(read(g), tol)]
    return kept_P, len(groups_P) - len(kept_P)


def beta_schedule(
    epoch: int, n_epochs: int, start: float = BETA_START, end: float = BETA_END
) -> float:
    """F_β's β for an epoch, linear from ``start`` at epoch 0 to ``end`` at the last epoch."""
    if n_epochs < 1:
        raise ValueError(f"n_epochs must be >= 1, got {n_epochs}")
    if n_epochs == 1:
        return start
    progress = min(max(epoch / (n_epochs - 1), 0.0), 1.0)
    return start + (end - start) * progress


def curriculum_max_hops(step: int, n_steps: int, phases: Sequence[int] = (1, 2, 3)) -> int:
    """Highest hop level allowed at a step: training is cut into equal phases of rising difficulty.

    With the default phases, the first third of the steps samples 1-hop tasks only, the second
    third up to 2 hops and the rest up to 3 hops.
    """
    if n_steps < 1:
        raise ValueError(f"n_steps must be >= 1, got {n_steps}")
    if not phases or any(a > b for a, b in pairwise(phases)):
        raise ValueError(f"phases must be a non-empty, non-decreasing list of hops, got {phases}")
    phase = min(max(step, 0) * len(phases) // n_steps, len(phases) - 1)
    return phases[phase]
