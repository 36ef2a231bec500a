"""Multi-rollout fusion (the report's "4x"): R rollouts of one query scored as one result.

The final lists of the rollouts are fused by reciprocal rank fusion, k = 60 (report §6.3), into
one ranked list; what the rollouts saw and pruned is pooled, so trajectory recall is over the
union of everything any rollout encountered. A query is failed only when every rollout failed.

Behaviour metrics (turns, tool calls, tokens, wall time) and the reward stay per trajectory: the
fused record reports their mean over the rollouts, since the reward (SPEC §5) is defined on one
trajectory and the fused list has none. With R = 1 the record is the rollout's own score.

Letters: R = rollouts of one query.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel

from sleuth.eval.records import QueryMetrics, QueryReward
from sleuth.eval.score import score_summary
from sleuth.harness.summary import RunSummary
from sleuth.metrics import BETA, final_doc_list
from sleuth.tasks.schema import Task
from sleuth.tools.rrf import rrf

RRF_K = 60  # report §6.3: the fusion constant of Context-1 (4x)
FUSERS = ("rrf",)
# Per-trajectory metrics that a fused record reports as the mean over its rollouts.
BEHAVIOUR = (
    "turns",
    "tool_calls",
    "tool_calls_per_turn",
    "peak_tokens",
    "total_tokens",
    "wall_time_s",
)


def fuse_rankings(rankings_R: Sequence[Sequence[str]], k: int = RRF_K) -> list[str]:
    """Document ids by summed ``1 / (k + rank)`` over the rollouts' lists (ranks from 1).

    Example::

        >>> fuse_rankings([["a", "b"], ["b", "c"]])
        ['b', 'a', 'c']
    """
    return [doc for doc, _ in rrf([final_doc_list(r) for r in rankings_R], k=k)]


def fuse_summaries(summaries_R: Sequence[RunSummary], k: int = RRF_K) -> RunSummary:
    """One summary whose final list is the RRF fusion and whose trajectory is the pool of all.

    Turns are concatenated, so counts over the fused summary are totals over the rollouts.
    """
    seen: dict[str, str] = {}
    for summary in summaries_R:
        seen.update(summary.seen_chunks)
    errors = [s.error for s in summaries_R]
    return RunSummary(
        final_doc_ids=fuse_rankings([s.final_doc_ids for s in summaries_R], k),
        seen_chunks=seen,
        pruned_chunk_ids=[c for s in summaries_R for c in s.pruned_chunk_ids],
        turn_tools=[t for s in summaries_R for t in s.turn_tools],
        peak_tokens=max((s.peak_tokens for s in summaries_R), default=0),
        total_tokens=sum(s.total_tokens for s in summaries_R),
        wall_time_s=sum(s.wall_time_s for s in summaries_R),
        malformed_answer=all(s.malformed_answer for s in summaries_R),
        error=errors[0] if errors and all(errors) else None,
    )


class RolloutsScore(BaseModel):
    """One query scored over its rollouts: the fields of its :class:`QueryRecord` that scoring
    fills."""

    metrics: QueryMetrics
    reward: QueryReward
    final_docs: list[str]


def score_rollouts(
    task: Task, summaries_R: Sequence[RunSummary], beta: float = BETA, k: int = RRF_K
) -> RolloutsScore:
    """Metrics, reward and final list of one query over its rollouts (see module doc)."""
    scored_R = [score_summary(task, s, beta) for s in summaries_R]
    if len(scored_R) == 1:
        metrics, reward = scored_R[0].metrics.model_dump(), scored_R[0].reward.model_dump()
        final_docs = final_doc_list(summaries_R[0].final_doc_ids)
    else:
        fused = fuse_summaries(summaries_R, k)
        behaviour = _mean([s.metrics.model_dump(include=set(BEHAVIOUR)) for s in scored_R])
        metrics = score_summary(task, fused, beta).metrics.model_dump() | behaviour
        reward = _mean([s.reward.model_dump() for s in scored_R])
        final_docs = fused.final_doc_ids
    return RolloutsScore(
        metrics=QueryMetrics.model_validate(metrics),
        reward=QueryReward.model_validate(reward),
        final_docs=final_docs,
    )


def _mean(dicts: Sequence[Mapping[str, float]]) -> dict[str, float]:
    return {key: sum(float(d[key]) for d in dicts) / len(dicts) for key in dicts[0]}
