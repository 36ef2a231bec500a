"""Per-trajectory evaluation metrics (SPEC §7): pure functions of a ``RunSummary`` and a ``Task``.

Definitions (document level, the default):

* The final list is ``summary.final_doc_ids`` mapped through ``doc_id_of`` (a chunk id counts as its
  document) and deduplicated keeping the first occurrence.
* recall = |final ∩ gold| / |gold|; precision = |final ∩ gold| / |final|; both are 0 when their
  denominator is empty (no free credit). F_β = (1+β²)PR / (β²P + R), 0 when P = R = 0.
* Recall@k (k = 2, 5, 10) = |gold ∩ first k final documents| / |gold|, 0 when there is no
  gold: the passage recall of HippoRAG (arXiv 2405.14831 §3) on the final ranked list.
  all-gold@5 = every gold document is in the first 5 (HippoRAG's AR@5; False when no gold).
* trajectory recall = share of gold documents with at least one chunk in ``seen_chunks`` (pruned
  chunks stay seen: credit for exploring).
* final answer found = some seen chunk of a final-list document contains the answer or an alias,
  both normalised SQuAD-style (lowercase, accents and punctuation dropped, articles removed,
  whitespace collapsed) and matched on word boundaries. A yes/no answer is stated by no document,
  so for it "found" means every gold document is in the final list.
* prune accuracy = share of distinct pruned chunk ids that were seen (a prune of an unknown id
  removes nothing) and are not gold; a chunk is gold when its document is gold or it belongs to a
  gold chunk group. None when nothing was pruned.

Fact level (only when the task has ``gold_chunk_groups``; None otherwise): a fact is found in the
output when the document of any chunk of its group is in the final list, and found in the
trajectory when any chunk id of its group was seen. fact recall / fact trajectory recall = share of
facts found; fact precision = share of final documents that are gold or hold a gold-group chunk.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import BaseModel

from sleuth.corpus import doc_id_of
from sleuth.errors import ConfigError
from sleuth.harness.summary import RunSummary
from sleuth.tasks.schema import Task

BETA = 4.0  # report §5: β of F_β (annealed towards 2 across RL epochs by training)


def check_beta(beta: float) -> float:
    """``beta`` if it is a usable β of F_β (finite and positive), else a ConfigError."""
    if not (math.isfinite(beta) and beta > 0):
        raise ConfigError(f"beta ({beta}) must be a positive number, e.g. {BETA}")
    return beta


_ARTICLES = re.compile(r"\b(a|an|the)\b")
_YES_NO = {"yes", "no"}
RECALL_KS = (2, 5, 10)  # the cut-offs of the Recall@k columns


class Metrics(BaseModel):
    """Every metric of one trajectory; fact-level fields are None for tasks without fact groups."""

    final_answer_found: bool
    recall: float
    precision: float
    f1: float
    f_beta: float
    beta: float
    recall_at_2: float
    recall_at_5: float
    recall_at_10: float
    all_gold_at_5: bool
    trajectory_recall: float
    prune_accuracy: float | None
    fact_recall: float | None = None
    fact_precision: float | None = None
    fact_f1: float | None = None
    fact_f_beta: float | None = None
    fact_trajectory_recall: float | None = None
    final_docs: int  # distinct documents in the final list
    pruned_chunks: int  # distinct chunk ids the policy asked to prune
    turns: int
    tool_calls: int
    tool_calls_per_turn: float
    peak_tokens: int
    total_tokens: int
    wall_time_s: float
    malformed: bool
    failed: bool


def normalize_answer(text: str) -> str:
    """SQuAD-style normalisation; punctuation becomes a space so matches keep word boundaries."""
    decomposed = unicodedata.normalize("NFKD", text.lower())
    chars = [
        " " if unicodedata.category(ch).startswith("P") else ch
        for ch in decomposed
        if unicodedata.category(ch) != "Mn"
    ]
    return " ".join(_ARTICLES.sub(" ", "".join(chars)).split())


def final_doc_list(final_ids: Iterable[str]) -> list[str]:
    """Final answer as document ids: chunk suffixes stripped, first occurrence kept."""
    return list(dict.fromkeys(doc_id_of(i) for i in final_ids))


def f_beta(precision: float, recall: float, beta: float) -> float:
    """Weighted harmonic mean; recall counts β² times as much as precision."""
    b2 = beta * beta
    denom = b2 * precision + recall
    return (1 + b2) * precision * recall / denom if denom > 0 else 0.0


def _ratio(num: int, denom: int) -> float:
    return num / denom if denom else 0.0


def answer_found(summary: RunSummary, task: Task, final_docs: Sequence[str]) -> bool:
    """Whether a seen chunk of a final-list document states the answer (see module docstring)."""
    final = set(final_docs)
    if normalize_answer(task.answer) in _YES_NO:
        return bool(task.gold_doc_ids) and set(task.gold_doc_ids) <= final
    answers = {normalize_answer(a) for a in [task.answer, *task.answer_aliases]} - {""}
    texts = (
        f" {normalize_answer(text)} "
        for cid, text in summary.seen_chunks.items()
        if doc_id_of(cid) in final
    )
    return any(f" {a} " in t for t in texts for a in answers)


def recall_at(final_docs: Sequence[str], gold: Iterable[str], k: int) -> float:
    """Share of gold documents among the first ``k`` of a deduplicated final list."""
    gold_set = set(gold)
    return _ratio(len(gold_set.intersection(final_docs[:k])), len(gold_set))


def _ranked_metrics(final: Sequence[str], gold: Iterable[str]) -> dict[str, Any]:
    gold_list = list(gold)
    at = {k: recall_at(final, gold_list, k) for k in RECALL_KS}
    return {f"recall_at_{k}": v for k, v in at.items()} | {
        "all_gold_at_5": bool(gold_list) and at[5] == 1.0
    }


def _is_gold_chunk(chunk_id: str, task: Task) -> bool:
    in_group = any(chunk_id in group for group in task.gold_chunk_groups)
    return in_group or doc_id_of(chunk_id) in task.gold_doc_ids


def prune_accuracy(summary: RunSummary, task: Task) -> float | None:
    """Share of distinct, seen, pruned chunks that are not gold; None when nothing was pruned."""
    pruned = [c for c in dict.fromkeys(summary.pruned_chunk_ids) if c in summary.seen_chunks]
    if not pruned:
        return None
    return sum(not _is_gold_chunk(c, task) for c in pruned) / len(pruned)


def _fact_metrics(summary: RunSummary, task: Task, final: list[str], beta: float) -> dict[str, Any]:
    """Fact-level fields of :class:`Metrics` (none when the task has no gold chunk groups)."""
    groups = task.gold_chunk_groups
    if not groups:
        return {}
    final_set = set(final)
    in_output = sum(any(doc_id_of(c) in final_set for c in g) for g in groups)
    in_trajectory = sum(any(c in summary.seen_chunks for c in g) for g in groups)
    relevant = set(task.gold_doc_ids) | {doc_id_of(c) for g in groups for c in g}
    recall = in_output / len(groups)
    precision = _ratio(len(final_set & relevant), len(final))
    return {
        "fact_recall": recall,
        "fact_precision": precision,
        "fact_f1": f_beta(precision, recall, 1.0),
        "fact_f_beta": f_beta(precision, recall, beta),
        "fact_trajectory_recall": in_trajectory / len(groups),
    }


def compute_metrics(summary: RunSummary, task: Task, beta: float = BETA) -> Metrics:
    """All SPEC §7 metrics of one trajectory against its task."""
    final = final_doc_list(summary.final_doc_ids)
    gold = set(task.gold_doc_ids)
    seen_docs = {doc_id_of(c) for c in summary.seen_chunks}
    hits = len(gold.intersection(final))
    recall, precision = _ratio(hits, len(gold)), _ratio(hits, len(final))
    return Metrics(
        final_answer_found=answer_found(summary, task, final),
        recall=recall,
        precision=precision,
        f1=f_beta(precision, recall, 1.0),
        f_beta=f_beta(precision, recall, beta),
        beta=beta,
        **_ranked_metrics(final, task.gold_doc_ids),
        trajectory_recall=_ratio(len(gold & seen_docs), len(gold)),
        prune_accuracy=prune_accuracy(summary, task),
        **_fact_metrics(summary, task, final, beta),
        final_docs=len(final),
        pruned_chunks=len(set(summary.pruned_chunk_ids)),
        turns=summary.turns,
        tool_calls=summary.tool_calls,
        tool_calls_per_turn=_ratio(summary.tool_calls, summary.turns),
        peak_tokens=summary.peak_tokens,
        total_tokens=summary.total_tokens,
        wall_time_s=summary.wall_time_s,
        malformed=summary.malformed_answer,
        failed=summary.error is not None,
    )


def aggregate(metrics: Sequence[Metrics]) -> dict[str, float | int | None]:
    """Mean of every field over the runs where it is defined (booleans become rates), plus count."""
    out: dict[str, float | int | None] = {"count": len(metrics)}
    for name in Metrics.model_fields:
        values = [v for m in metrics if (v := getattr(m, name)) is not None]
        out[name] = sum(values) / len(values) if values else None
    return out
