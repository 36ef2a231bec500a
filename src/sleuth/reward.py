"""Trajectory reward (SPEC §5), computed on the full unpruned trajectory, every term kept apart.

    r_pre = w_f·F_β + w_traj·trajectory_recall + r_fa
    raw   = r_pre − p_prune − p_turn
    error-free run:  total = min(max(raw, ε), r_pre)
    failed run:      total = raw            (no floor; raw ≤ r_pre since penalties are ≥ 0)

The floor lets a run that finished cleanly but was penalised below ε still beat a failed one, and
the cap at r_pre means the floor never lifts a reward above what it earned before penalties; when
r_pre < ε (nothing found) an error-free run gets exactly r_pre. So an error-free total always lies
in [min(ε, r_pre), r_pre].

ε = 0.01 is 0.5% of the largest possible reward (2.0 = 0.7 + 0.3 + 1.0): big enough to order a
clean-but-penalised run above a failed one, small enough never to reorder runs with real credit.

Prune streaks: a *prune turn* is a turn whose tool calls are all ``prune_chunks`` (a turn that
prunes while it also searches or reads is productive and breaks a streak). In each maximal run of
consecutive prune turns the first ``prune_streak_free`` turns are free and every prune call in a
later turn of the run costs ``prune_penalty_per_call``; the sum over all runs is capped at
``prune_penalty_cap``. This targets pruning a chunk at a time across many turns instead of batching.

Turn penalty: linear from 0 at ``turn_penalty_start`` turns to ``turn_penalty_max`` at
``turn_penalty_end``, constant beyond.

With ``use_facts`` and a task that has ``gold_chunk_groups``, F_β and trajectory recall are the
fact-level variants of :mod:`sleuth.metrics`; otherwise the document-level ones.

A malformed answer (no ``<Document id=...>`` block) still has a list: the harness salvages the ids
its text names, and by default that list is scored like any other (SPEC). With
``credit_malformed_list=False`` it earns no F_β and no answer bonus, so in RL a reply that drifts
off the answer format loses the list's whole value; trajectory recall still counts (the search
itself happened).
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field, model_validator

from sleuth.harness.summary import RunSummary
from sleuth.metrics import BETA, compute_metrics
from sleuth.tasks.schema import Task
from sleuth.tools.spec import PRUNE

PRUNE_TOOL = PRUNE.name


class RewardConfig(BaseModel):
    """Reward weights and thresholds; defaults are the report's (β is annealed by training)."""

    model_config = ConfigDict(frozen=True)

    beta: float = Field(default=BETA, gt=0)
    w_f: float = Field(default=0.7, ge=0)
    w_traj: float = Field(default=0.3, ge=0)
    answer_bonus: float = Field(default=1.0, ge=0)
    prune_streak_free: int = Field(default=3, ge=0)
    prune_penalty_per_call: float = Field(default=0.1, ge=0)
    prune_penalty_cap: float = Field(default=0.5, ge=0)
    turn_penalty_start: int = Field(default=64, ge=0)
    turn_penalty_end: int = Field(default=128, ge=1)
    turn_penalty_max: float = Field(default=0.5, ge=0)
    epsilon: float = Field(default=0.01, ge=0)
    use_facts: bool = True
    credit_malformed_list: bool = True

    @model_validator(mode="after")
    def _turn_window(self) -> RewardConfig:
        if self.turn_penalty_end <= self.turn_penalty_start:
            raise ValueError("turn_penalty_end must be greater than turn_penalty_start")
        return self


class RewardTerms(BaseModel):
    """The reward and its parts; ``f_beta`` and ``trajectory_recall`` are unweighted."""

    total: float
    f_beta: float
    trajectory_recall: float
    answer_bonus: float
    prune_penalty: float
    turn_penalty: float
    pre_penalty: float
    floored: bool  # the ε floor lifted the total above the penalised value


def _is_prune_turn(tools: Sequence[str]) -> bool:
    return bool(tools) and all(name == PRUNE_TOOL for name in tools)


def prune_penalty(turn_tools: Sequence[Sequence[str]], config: RewardConfig) -> float:
    """Cost of prune calls made after ``prune_streak_free`` consecutive prune-only turns."""
    excess_calls = 0
    streak = 0
    for tools in turn_tools:
        streak = streak + 1 if _is_prune_turn(tools) else 0
        if streak > config.prune_streak_free:
            excess_calls += len(tools)
    return min(excess_calls * config.prune_penalty_per_call, config.prune_penalty_cap)


def turn_penalty(turns: int, config: RewardConfig) -> float:
    """Linear ramp between the start and end turn counts, clamped to [0, turn_penalty_max]."""
    span = config.turn_penalty_end - config.turn_penalty_start
    share = min(max((turns - config.turn_penalty_start) / span, 0.0), 1.0)
    return share * config.turn_penalty_max


def compute_reward(
    summary: RunSummary, task: Task, config: RewardConfig | None = None
) -> RewardTerms:
    """SPEC §5 reward of one trajectory, floored and capped as the module docstring says."""
    config = config or RewardConfig()
    m = compute_metrics(summary, task, beta=config.beta)
    facts = config.use_facts and m.fact_f_beta is not None
    fb = m.fact_f_beta if facts else m.f_beta
    traj = m.fact_trajectory_recall if facts else m.trajectory_recall
    assert fb is not None and traj is not None  # fact fields are set together
    list_credit = config.credit_malformed_list or not summary.malformed_answer
    fb = fb if list_credit else 0.0
    bonus = config.answer_bonus if m.final_answer_found and list_credit else 0.0
    p_prune = prune_penalty(summary.turn_tools, config)
    p_turn = turn_penalty(summary.turns, config)
    pre = config.w_f * fb + config.w_traj * traj + bonus
    raw = pre - p_prune - p_turn
    total = raw if summary.error is not None else min(max(raw, config.epsilon), pre)
    return RewardTerms(
        total=total,
        f_beta=fb,
        trajectory_recall=traj,
        answer_bonus=bonus,
        prune_penalty=p_prune,
        turn_penalty=p_turn,
        pre_penalty=pre,
        floored=total > raw,
    )
