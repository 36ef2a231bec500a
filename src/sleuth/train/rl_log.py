"""The log lines of one RL step: a flat, slash-keyed record per step and one per rollout.

Axes: P the tasks of a step, G the rollouts of one task.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from typing import Any

from sleuth.harness.trajectory import Trajectory
from sleuth.metrics import aggregate
from sleuth.reward import RewardTerms
from sleuth.train.rl_types import Rollout, StepPlan


def step_record(
    plan: StepPlan,
    scored_P: Sequence[Sequence[Rollout]],
    advantages_P: Sequence[Sequence[float | None]],
    train: dict[str, float],
    n_items: int,
    truncated: int,
    timings: dict[str, float],
) -> dict[str, Any]:
    """The flat, slash-keyed log line of one step."""
    rollouts = [r for group in scored_P for r in group]
    record: dict[str, Any] = {
        "step": plan.step,
        "epoch": plan.epoch,
        "beta": plan.beta,
        "max_hops": plan.max_hops,
        "rollouts": len(rollouts),
    }
    for term in RewardTerms.model_fields:
        values = [float(getattr(r.reward, term)) for r in rollouts]
        record[f"reward/{term}"] = statistics.fmean(values) if values else 0.0
    spreads = [statistics.pstdev([r.reward.total for r in g]) for g in scored_P if g]
    record["reward/group_std"] = statistics.fmean(spreads) if spreads else 0.0
    for key, value in aggregate([r.metrics for r in rollouts]).items():
        if key != "count" and value is not None:
            record[f"metrics/{key}"] = value
    stops = Counter(str(r.trajectory.stop_reason) for r in rollouts)
    record.update({f"stop/{reason}": n / len(rollouts) for reason, n in stops.items()})
    kept = sum(any(a is not None for a in advantages_G) for advantages_G in advantages_P)
    record["groups/total"] = len(scored_P)
    record["groups/kept"] = kept
    record["groups/dropped_constant"] = len(scored_P) - kept
    record["train/sequences"] = n_items
    record["train/truncated"] = truncated
    record.update({f"train/{k}": v for k, v in train.items()})
    sampled = sum(_sampled_tokens(r.trajectory) for r in rollouts)
    record["throughput/sampled_tokens"] = sampled
    record["throughput/sampled_tokens_per_s"] = sampled / max(timings["rollout_s"], 1e-9)
    record["throughput/trajectories_per_min"] = 60 * len(rollouts) / max(timings["rollout_s"], 1e-9)
    record.update({f"time/{k}": v for k, v in timings.items()})
    return record


def _sampled_tokens(trajectory: Trajectory) -> int:
    return sum(len(t.output.token_ids or []) for t in trajectory.turns if t.output is not None)


def rollout_records(
    plan: StepPlan, scored_P: Sequence[Sequence[Rollout]], advantages_P: list[list[float | None]]
) -> list[dict[str, Any]]:
    """One log line per rollout: its task, reward terms, key metrics and advantage."""
    records = []
    for group, advantages_G in zip(scored_P, advantages_P, strict=True):
        for g, (r, advantage) in enumerate(zip(group, advantages_G, strict=True)):
            records.append(
                {
                    "step": plan.step,
                    "group": r.group,
                    "rollout": g,
                    "task_id": r.task.id,
                    "hops": r.task.hops,
                    "advantage": advantage,
                    "stop_reason": str(r.trajectory.stop_reason),
                    "sampled_tokens": _sampled_tokens(r.trajectory),
                    **{f"reward/{k}": v for k, v in r.reward.model_dump().items()},
                    "recall": r.metrics.recall,
                    "trajectory_recall": r.metrics.trajectory_recall,
                    "final_answer_found": r.metrics.final_answer_found,
                    "turns": r.metrics.turns,
                    "tool_calls": r.metrics.tool_calls,
                }
            )
    return records
