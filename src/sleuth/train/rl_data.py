"""What one CISPO step trains on: schedule, task sampling, rollouts, reward and advantages.

Axes: P the tasks (prompts) of a step, G the rollouts of one task.

The step's epoch sets β and the curriculum its hop ceiling (:func:`plan_step`); its tasks and
every rollout's seed are functions of (seed, step), so a resumed run redoes a lost step exactly.
Each trajectory is scored at the step's β, advantages are normalised within each group of G, and
groups whose rewards are equal within ``zero_variance_tol`` are dropped (:func:`group_items`).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from pathlib import Path

from sleuth.harness.trajectory import Trajectory
from sleuth.metrics import compute_metrics
from sleuth.reward import RewardConfig, compute_reward
from sleuth.tasks.schema import Task
from sleuth.tools.base import Tools
from sleuth.train.advantages import (
    beta_schedule,
    curriculum_max_hops,
    group_advantages,
    is_constant_group,
)
from sleuth.train.render import clip_sequence, has_targets, recorded_turn_tokens
from sleuth.train.rl_types import RLConfig, Rollout, StepPlan, TrainItem
from sleuth.train.rollout import RolloutEngine, RolloutJob, collect_rollouts
from sleuth.train.sequences import turns_to_sequences

# ---------------------------------------------------------------- schedule and sampling


def total_steps(config: RLConfig, n_tasks: int) -> int:
    per_epoch = max(math.ceil(n_tasks / config.queries_per_step), 1)
    natural = config.epochs * per_epoch
    return min(natural, config.max_steps) if config.max_steps is not None else natural


def plan_step(step: int, n_steps: int, config: RLConfig) -> StepPlan:
    """β and the hop ceiling of a step; epochs are equal shares of the run."""
    epoch = min(step * config.epochs // n_steps, config.epochs - 1)
    beta = beta_schedule(epoch, config.epochs, config.beta_start, config.beta_end)
    max_hops = curriculum_max_hops(step, n_steps, config.curriculum_phases)
    return StepPlan(step, epoch, beta, max_hops)


def sample_tasks(tasks: Sequence[Task], plan: StepPlan, count: int, seed: int) -> list[Task]:
    """``count`` tasks of at most ``plan.max_hops`` hops (the easiest level when none qualify).

    Each step draws afresh, fixed by (seed, step); within a step a task repeats only when the
    pool holds fewer than ``count``."""
    pool = [t for t in tasks if t.hops <= plan.max_hops]
    if not pool:
        easiest = min(t.hops for t in tasks)
        pool = [t for t in tasks if t.hops == easiest]
    rng = random.Random(f"{seed}:tasks:{plan.step}")
    drawn: list[Task] = []
    while len(drawn) < count:
        drawn += rng.sample(pool, len(pool))
    return drawn[:count]


def rollout_seed(seed: int, step: int, index: int) -> int:
    """A distinct, reproducible sampler seed for rollout ``index`` of ``step``."""
    return random.Random(f"{seed}:rollout:{step}:{index}").getrandbits(31)


# ---------------------------------------------------------------- rollouts and reward


def collect_groups(
    engine: RolloutEngine,
    tools: Tools,
    tasks_P: Sequence[Task],
    plan: StepPlan,
    config: RLConfig,
) -> list[list[Trajectory]]:
    """G trajectories per task, all run concurrently; grouped by task."""
    G = config.rollouts_per_query
    folder = Path(config.out_dir) / "trajectories" / f"step_{plan.step:06d}"
    jobs = [
        RolloutJob(
            task,
            rollout_seed(config.seed, plan.step, p * G + g),
            folder / f"{p:04d}_{g:02d}.jsonl" if config.save_trajectories else None,
        )
        for p, task in enumerate(tasks_P)
        for g in range(G)
    ]
    trajectories = collect_rollouts(
        engine.policy, tools, config.harness, jobs, config.rollout_workers
    )
    return [trajectories[p * G : (p + 1) * G] for p in range(len(tasks_P))]


def score_groups(
    groups_P: Sequence[Sequence[Trajectory]], tasks_P: Sequence[Task], reward: RewardConfig
) -> list[list[Rollout]]:
    """Reward terms and metrics of every trajectory, at the reward config's β."""
    scored_P = []
    for p, (group, task) in enumerate(zip(groups_P, tasks_P, strict=True)):
        scored = []
        for trajectory in group:
            summary = trajectory.summary()
            terms = compute_reward(summary, task, reward)
            metrics = compute_metrics(summary, task, beta=reward.beta)
            scored.append(Rollout(task, p, trajectory, terms, metrics))
        scored_P.append(scored)
    return scored_P


def group_items(
    scored_P: Sequence[Sequence[Rollout]], config: RLConfig
) -> tuple[list[TrainItem], list[list[float | None]], int]:
    """Training items of the groups that vary, with each rollout's advantage (None: dropped).

    Returns:
        ``(items, advantages_P_G, n_truncated)``.
    """
    items: list[TrainItem] = []
    advantages_P: list[list[float | None]] = []
    truncated = 0
    for p, group in enumerate(scored_P):
        rewards_G = [r.reward.total for r in group]
        if is_constant_group(rewards_G, config.zero_variance_tol):
            advantages_P.append([None] * len(group))
            continue
        advantages_G = group_advantages(rewards_G, normalize_std=config.normalize_std)
        advantages_P.append(list(advantages_G))
        for rollout, advantage in zip(group, advantages_G, strict=True):
            for seq in turns_to_sequences(recorded_turn_tokens(rollout.trajectory)):
                if config.max_seq_len is not None and len(seq.input_ids) > config.max_seq_len:
                    truncated += 1
                    seq = clip_sequence(seq, config.max_seq_len)
                if has_targets(seq):
                    items.append(TrainItem(seq, advantage, p))
    return items, advantages_P, truncated
