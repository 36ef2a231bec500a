"""Score one trajectory file against its task: the JSON of ``sleuth score --json`` (SPEC §8).

Scoring reads only the trajectory record, never the harness that wrote it, so a trajectory can
be re-scored later (another β, a corrected task) without re-running anything.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from sleuth.errors import InputError
from sleuth.harness.summary import RunSummary
from sleuth.harness.trajectory import load_trajectory
from sleuth.metrics import BETA, Metrics, check_beta, compute_metrics
from sleuth.reward import RewardConfig, RewardTerms, compute_reward
from sleuth.tasks.schema import Task, load_tasks


class Score(BaseModel):
    """Every metric and every reward term of one run; its JSON is ``sleuth score --json``."""

    metrics: Metrics
    reward: RewardTerms


def score_summary(task: Task, summary: RunSummary, beta: float = BETA) -> Score:
    """Every metric and every reward term of one run."""
    metrics = compute_metrics(summary, task, beta=beta)
    reward = compute_reward(summary, task, RewardConfig(beta=beta))
    return Score(metrics=metrics, reward=reward)


def score_trajectory(task: Task, trajectory_path: str | Path, beta: float = BETA) -> Score:
    """Score a trajectory JSONL file (a run cut off mid-way scores what it wrote).

    Example::

        score_trajectory(task, "runs/q1.jsonl").reward.total
    """
    return score_summary(task, load_trajectory(trajectory_path).summary(), beta)


def score_files(
    task_file: str | Path,
    trajectory_path: str | Path,
    beta: float = BETA,
    task_id: str | None = None,
) -> Score:
    """``sleuth score``: pick the trajectory's task from a task file, then score it.

    The task is ``task_id`` if given, else the only task in the file, else the task whose query
    equals the trajectory's query.

    Raises:
        InputError: a bad β, an unreadable file, or no task (or more than one) matches.
    """
    check_beta(beta)
    trajectory = load_trajectory(trajectory_path)
    task = _pick_task(load_tasks(task_file), trajectory.query, task_id, str(task_file))
    return score_summary(task, trajectory.summary(), beta)


def _pick_task(tasks: list[Task], query: str, task_id: str | None, source: str) -> Task:
    if task_id is not None:
        matches = [t for t in tasks if t.id == task_id]
        reason = f"no task with id {task_id!r}"
    elif len(tasks) == 1:
        return tasks[0]
    else:
        matches = [t for t in tasks if t.query.strip() == query.strip()]
        reason = f"{len(matches)} tasks have the trajectory's query; pass the task id"
    if len(matches) != 1:
        raise InputError(reason, source=source)
    return matches[0]
