"""Which teacher trajectories the SFT warm-up trains on (SPEC §6; context1-report §4.1).

The report keeps successes and failures alike, because the spread of traces matters more than
each trace being right. Every candidate gets exactly one verdict, by the first rule that fits:

1. **malformed**: the run failed, gave no final answer, or the answer had no document list.
   Dropped.
2. **high recall**: trajectory recall > 50% and output recall > 40%. Kept in full, except that
   of several high-recall rollouts of one query only the best (output recall, then trajectory
   recall, then the earliest) is kept, so easy queries are not over-represented.
3. **explored well, concluded poorly**: ``trajectory_recall - output_recall >= explored_gap``
   (default 0.5: the search saw at least half the gold documents more than the answer listed).
   Dropped: it would teach the student to throw good evidence away.
4. **zero recall**: output recall 0. Kept as negatives, at most one per query and at most
   ``zero_max_share`` (5%) of the kept set; the queries that keep one are drawn at random.
5. **low recall**: everything else. Kept with probability :func:`low_keep_probability`, which
   is 1 at the high-recall boundary and falls faster than linearly as recall drops.

Draws use ``random.Random(seed)`` in candidate order, so a filter run repeats exactly.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from sleuth.harness.trajectory import Trajectory
from sleuth.metrics import compute_metrics
from sleuth.tasks.schema import Task

ItemT = TypeVar("ItemT")

HIGH_TRAJECTORY_RECALL = 0.5  # report §4.1: trajectory recall > 50% ...
HIGH_OUTPUT_RECALL = 0.4  # ... and output recall > 40% are kept in full
ZERO_MAX_SHARE = 0.05  # report §4.1: at most 5% zero-recall negatives, one per query
EXPLORED_GAP = 0.5  # ours: the report's "trajectory recall >> output recall"
LOW_KEEP_POWER = 2.0  # ours: how fast the keep rate of low-recall rollouts diminishes


class Verdict(StrEnum):
    """What the filter did with one candidate, and why."""

    KEPT_HIGH = "kept_high"
    KEPT_LOW = "kept_low"
    KEPT_ZERO = "kept_zero"
    DROPPED_MALFORMED = "dropped_malformed"
    DROPPED_DUPLICATE_HIGH = "dropped_duplicate_high"
    DROPPED_EXPLORED_NOT_CONCLUDED = "dropped_explored_not_concluded"
    DROPPED_ZERO_EXCESS = "dropped_zero_excess"
    DROPPED_LOW_DRAW = "dropped_low_draw"


KEPT = frozenset({Verdict.KEPT_HIGH, Verdict.KEPT_LOW, Verdict.KEPT_ZERO})


class SFTFilterConfig(BaseModel):
    """Thresholds of the SFT filter; defaults are the report's where it gives numbers."""

    model_config = ConfigDict(frozen=True)

    high_trajectory_recall: float = Field(default=HIGH_TRAJECTORY_RECALL, ge=0, le=1)
    """Trajectory recall must exceed this for the high-recall rule."""
    high_output_recall: float = Field(default=HIGH_OUTPUT_RECALL, ge=0, le=1)
    """Output recall must exceed this for the high-recall rule."""
    explored_gap: float = Field(default=EXPLORED_GAP, gt=0, le=1)
    """Drop when trajectory recall exceeds output recall by at least this."""
    zero_max_share: float = Field(default=ZERO_MAX_SHARE, ge=0, lt=1)
    """Largest share of zero-recall negatives in the kept set."""
    low_keep_power: float = Field(default=LOW_KEEP_POWER, gt=0)
    """Exponent of :func:`low_keep_probability`; larger keeps fewer low-recall rollouts."""
    seed: int = 0
    """Seeds the low-recall draws and the choice of zero-recall queries."""

    @model_validator(mode="after")
    def _thresholds_positive(self) -> SFTFilterConfig:
        if self.high_trajectory_recall <= 0 or self.high_output_recall <= 0:
            raise ValueError("high-recall thresholds must be > 0 (they scale the low-recall rate)")
        return self


@dataclass(frozen=True)
class Candidate(Generic[ItemT]):
    """One teacher rollout as the filter sees it; ``item`` (the trajectory) rides along."""

    query_id: str
    trajectory_recall: float
    output_recall: float
    malformed: bool
    item: ItemT


class SFTFilterReport(BaseModel):
    """How many candidates each rule kept or dropped."""

    total: int
    kept: int
    counts: dict[str, int]
    """Verdict name -> number of candidates, every verdict listed (0 when unused)."""
    queries: int
    queries_kept: int


@dataclass(frozen=True)
class FilterResult(Generic[ItemT]):
    kept: list[ItemT]
    """The kept items, in candidate order."""
    verdicts: list[Verdict]
    """One verdict per candidate, in candidate order."""
    report: SFTFilterReport


def candidate_from_run(trajectory: Trajectory, task: Task) -> Candidate[Trajectory]:
    """Score a teacher trajectory against its task (document-level recalls)."""
    summary = trajectory.summary()
    metrics = compute_metrics(summary, task)
    malformed = summary.error is not None or trajectory.answer is None or summary.malformed_answer
    return Candidate(task.id, metrics.trajectory_recall, metrics.recall, malformed, trajectory)


def low_keep_probability(
    trajectory_recall: float, output_recall: float, config: SFTFilterConfig
) -> float:
    """Keep rate of a low-recall rollout: ``q ** low_keep_power``, where ``q`` is the mean of the
    two recalls as fractions of their high-recall thresholds (each capped at 1).

    ``q`` is 1 on the high-recall boundary, so the rate is continuous with "kept in full"; with
    the default power 2, a rollout halfway to both thresholds is kept a quarter of the time.
    """
    q_traj = min(trajectory_recall / config.high_trajectory_recall, 1.0)
    q_out = min(output_recall / config.high_output_recall, 1.0)
    keep: float = ((q_traj + q_out) / 2) ** config.low_keep_power
    return keep


def filter_for_sft(
    candidates: Sequence[Candidate[ItemT]], config: SFTFilterConfig | None = None
) -> FilterResult[ItemT]:
    """Apply the rules of the module docstring; return the kept items and the counts per rule."""
    config = config or SFTFilterConfig()
    rng = random.Random(config.seed)
    verdicts = [_first_verdict(c, config, rng) for c in candidates]
    _keep_best_high_per_query(candidates, verdicts)
    _cap_zero_recall(candidates, verdicts, config, rng)
    kept = [c.item for c, v in zip(candidates, verdicts, strict=True) if v in KEPT]
    counts = Counter(verdicts)
    report = SFTFilterReport(
        total=len(candidates),
        kept=len(kept),
        counts={v.value: counts.get(v, 0) for v in Verdict},
        queries=len({c.query_id for c in candidates}),
        queries_kept=len(
            {c.query_id for c, v in zip(candidates, verdicts, strict=True) if v in KEPT}
        ),
    )
    return FilterResult(kept, verdicts, report)


def _first_verdict(
    candidate: Candidate[Any], config: SFTFilterConfig, rng: random.Random
) -> Verdict:
    """Rules 1-5 on one candidate alone; the per-query rules are applied afterwards."""
    traj, out = candidate.trajectory_recall, candidate.output_recall
    if candidate.malformed:
        return Verdict.DROPPED_MALFORMED
    if traj > config.high_trajectory_recall and out > config.high_output_recall:
        return Verdict.KEPT_HIGH
    if traj - out >= config.explored_gap:
        return Verdict.DROPPED_EXPLORED_NOT_CONCLUDED
    if out == 0.0:
        return Verdict.KEPT_ZERO
    draw = rng.random()  # drawn for every low candidate, so each one's draw is fixed by order
    if draw < low_keep_probability(traj, out, config):
        return Verdict.KEPT_LOW
    return Verdict.DROPPED_LOW_DRAW


def _keep_best_high_per_query(
    candidates: Sequence[Candidate[Any]], verdicts: list[Verdict]
) -> None:
    best: dict[str, int] = {}
    for i, c in enumerate(candidates):
        if verdicts[i] != Verdict.KEPT_HIGH:
            continue
        j = best.get(c.query_id)
        if j is None or _score(c) > _score(candidates[j]):
            best[c.query_id] = i
    for i, c in enumerate(candidates):
        if verdicts[i] == Verdict.KEPT_HIGH and best[c.query_id] != i:
            verdicts[i] = Verdict.DROPPED_DUPLICATE_HIGH


def _score(candidate: Candidate[Any]) -> tuple[float, float]:
    return candidate.output_recall, candidate.trajectory_recall


def _cap_zero_recall(
    candidates: Sequence[Candidate[Any]],
    verdicts: list[Verdict],
    config: SFTFilterConfig,
    rng: random.Random,
) -> None:
    """One zero-recall negative per query, for at most ``zero_max_share`` of the kept set."""
    first_per_query: dict[str, int] = {}
    for i, c in enumerate(candidates):
        if verdicts[i] == Verdict.KEPT_ZERO:
            first_per_query.setdefault(c.query_id, i)
    positives = sum(v in (Verdict.KEPT_HIGH, Verdict.KEPT_LOW) for v in verdicts)
    share = config.zero_max_share
    # z / (positives + z) <= share  <=>  z <= share * positives / (1 - share)
    allowed = math.floor(share * positives / (1 - share) + 1e-9)
    chosen = list(first_per_query.values())
    rng.shuffle(chosen)
    keep = set(chosen[:allowed])
    for i, v in enumerate(verdicts):
        if v == Verdict.KEPT_ZERO and i not in keep:
            verdicts[i] = Verdict.DROPPED_ZERO_EXCESS
