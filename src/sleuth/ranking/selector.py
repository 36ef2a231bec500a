"""The selector: orders the documents a trajectory has seen by how likely each is gold.

It is what the scripted agent consults to prune, to choose the next hop's entities and to
write its final list. Features come from what the trajectory showed plus corpus-wide evidence
for the question (:mod:`sleuth.ranking.evidence`); the weights are the ranker's ``selection``
head.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sleuth.index import Index
from sleuth.ranking.evidence import question_evidence
from sleuth.ranking.features import Search, SeenDoc, selection_features
from sleuth.ranking.model import RankerModel

SEARCH_MARGIN = 1.0
"""Logits (odds within a factor e): how far the selector must prefer a document over one of the
question search's first hits to keep that hit out of its place (:func:`keep_search_head`)."""

SEARCH_FLOOR = ((1, 2), (5, 5))
"""``(n, k)``: the question search's first ``n`` documents keep a place in the final top ``k``
(its top hit in the top two, its top five in the top five: where R@2 and R@5 count)."""


def document_title(index: Index, doc_id: str) -> str:
    return index.lexical.title_of(doc_id)


def seen_features(
    index: Index, question: str, docs: Sequence[SeenDoc], searches: Sequence[Search]
) -> np.ndarray:
    """The selection-head features of ``docs``, with the question's evidence from ``index``."""
    evidence = question_evidence(index, question, [d.doc_id for d in docs], hop_seeds(docs))
    return selection_features(question, docs, searches, evidence)


SEED_RANKS = 2
"""A search's documents down to this rank seed the corpus graph's PageRank (1/rank each)."""


def hop_seeds(docs: Sequence[SeenDoc]) -> dict[str, float]:
    """The searches' best documents as PageRank seeds: Σ 1/rank over their top ranks."""
    seeds = {d.doc_id: sum(1.0 / r for _, r in d.ranks if r <= SEED_RANKS) for d in docs}
    return {doc: weight for doc, weight in seeds.items() if weight > 0}


class Selector:
    """Scores seen documents for a question with a trained :class:`RankerModel`."""

    def __init__(self, index: Index, model: RankerModel):
        self.index = index
        self.model = model

    def title(self, doc_id: str) -> str:
        return document_title(self.index, doc_id)

    def rank(
        self, question: str, docs: Sequence[SeenDoc], searches: Sequence[Search]
    ) -> list[tuple[str, float]]:
        """``(doc_id, probability)`` best first; equal scores are ordered by document id."""
        if not docs:
            return []
        logits = self.model.score_selection(seen_features(self.index, question, docs, searches))
        probs = 1.0 / (1.0 + np.exp(-logits))
        order = sorted(range(len(docs)), key=lambda i: (-probs[i], docs[i].doc_id))
        return [(docs[i].doc_id, float(probs[i])) for i in order]


def keep_search_head(
    ranked: Sequence[tuple[str, float]],
    hits: Sequence[str],
    margin: float = SEARCH_MARGIN,
    floor: Sequence[tuple[int, int]] = SEARCH_FLOOR,
) -> list[tuple[str, float]]:
    """``ranked`` (probabilities, best first) with the whole-question search's first ``hits``
    kept in the places ``floor`` (:data:`SEARCH_FLOOR`) gives them: a hit below its place takes
    that of the last document there that neither this pair nor an earlier one guards, which
    drops to just below, unless the selector prefers that document by more than ``margin``
    logits. A permutation of ``ranked``; the other documents keep their relative order.

    Why: the selector learned from Wikipedia, where the question's own first hits are often a
    hop short; on e-mail or patents they are usually right, and near-ties between look-alike
    documents (daily reports, sibling patents) are where the selector's order is least
    trustworthy. A clear preference still wins, so multi-hop chains keep their head.
    """
    order, start = list(ranked), 0
    for n, k in floor:
        guarded = set(hits[:n])
        for hit in hits[:n]:
            docs = [doc for doc, _ in order]
            at = docs.index(hit) if hit in docs else -1
            free = [i for i in range(start, k) if docs[i] not in guarded] if at >= k else []
            if free and _logit(order[free[-1]][1]) - _logit(order[at][1]) <= margin:
                moved, displaced = order.pop(at), order[free[-1]]
                order[free[-1]] = moved
                order.insert(k, displaced)
        start = k
    return order


def _logit(p: float) -> float:
    q = min(max(p, 1e-6), 1 - 1e-6)
    return float(np.log(q / (1 - q)))
