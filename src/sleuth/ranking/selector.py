"""The selector: orders the documents a trajectory has seen by how likely each is gold.

It is what the scripted agent consults to prune, to choose the next hop's entities and to
write its final list. Features come from what the trajectory showed plus corpus-wide evidence
for the question (:mod:`sleuth.ranking.evidence`); the weights are the ranker's ``selection``
head.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache

import numpy as np

from sleuth.index import Index
from sleuth.ranking.evidence import question_evidence
from sleuth.ranking.features import Search, SeenDoc, selection_features
from sleuth.ranking.model import RankerModel
from sleuth.ranking.text import fold, mentions

SEARCH_MARGIN = 1.0
"""Logits (odds within a factor e): how far the selector must prefer a document over one of the
question search's first hits to keep that hit out of its place (:func:`keep_search_head`)."""

SIBLING_MARGIN = 1.0
"""Logits: how much less a *sibling* defends its place against a search hit than other documents
do (:func:`keep_search_head`): a document whose title holds, or is held by, the title of one
ranked above it ("Tara Strong filmography" under "Tara Strong", "2014–15 Charlotte Hornets season"
under "Charlotte Hornets"). Chosen on the pooled held-out questions and the Enron/patents dev
split (docs/RESULTS.md, "Siblings give way to the search's hits")."""

SEARCH_FLOOR = ((1, 2),)
"""``(n, k)``: the question search's first ``n`` documents keep a place in the final top ``k``
(its top hit in the top two, where R@2 counts). On a title-linked corpus (:func:`search_floor`)
its top five are not kept in the top five: with
the bridge-name trees those hits (broad matches of the whole question) displaced the later links
of 3–4-hop chains (docs/RESULTS.md, "A reserved place for a chain's far end")."""


UNLINKED_FLOOR = ((1, 2), (5, 5))
"""The floor on a corpus whose titles other documents rarely name (e-mail, patents, most
folders of files): there the question search's top five also keep the top five. The selector
learned from Wikipedia, where broad whole-question hits are often a hop short; elsewhere they
are usually right, and the reason to drop them (the far links of 3-4-hop chains) is Wikipedia's."""

TITLE_LINKED = 0.10
"""A corpus is title-linked (:data:`SEARCH_FLOOR`, else :data:`UNLINKED_FLOOR`) when at least this
share of its titled documents is named by another (``CorpusGraph.title_link_share``): 0.14-0.22
on the Wikipedia samples, 0.05 on the Enron sample, 0.005 on the patent abstracts."""


def search_floor(index: Index) -> tuple[tuple[int, int], ...]:
    """The floor :func:`keep_search_head` uses on ``index``'s corpus."""
    linked = index.graph.title_link_share >= TITLE_LINKED
    return SEARCH_FLOOR if linked else UNLINKED_FLOOR


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

    def floor(self) -> tuple[tuple[int, int], ...]:
        return search_floor(self.index)

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
    title: Callable[[str], str] | None = None,
    sibling_margin: float = SIBLING_MARGIN,
) -> list[tuple[str, float]]:
    """``ranked`` (probabilities, best first) with the whole-question search's first ``hits``
    kept in the places ``floor`` (:data:`SEARCH_FLOOR`) gives them: a hit below its place takes
    that of the last document there that neither this pair nor an earlier one guards, which
    drops to just below, unless the selector prefers that document by more than ``margin``
    logits. With ``title`` (doc id → title), a sibling there (:data:`SIBLING_MARGIN`) is taken
    first and needs ``margin + sibling_margin``. A permutation of ``ranked``; the documents
    below the places keep their relative order (without siblings, all but the hits do).

    Why: the selector learned from Wikipedia, where the question's own first hits are often a
    hop short; on e-mail or patents they are usually right, and near-ties between look-alike
    documents (daily reports, sibling patents) are where the selector's order is least
    trustworthy. A clear preference still wins, so multi-hop chains keep their head. A sibling
    of a better document mostly repeats it: on the pooled questions a tenth of the siblings at
    ranks 2–5 are gold, against more than a quarter of the other documents there.
    """
    order, start = list(ranked), 0
    sibling = _sibling_test(title)
    for n, k in floor:
        guarded = set(hits[:n])
        for hit in hits[:n]:
            docs = [doc for doc, _ in order]
            at = docs.index(hit) if hit in docs else -1
            free = [i for i in range(start, k) if docs[i] not in guarded] if at >= k else []
            if not free:
                continue
            siblings = [i for i in free if sibling(docs[i], docs[:i])]
            spot = (siblings or free)[-1]
            allowed = margin + (sibling_margin if siblings else 0.0)
            if _logit(order[spot][1]) - _logit(order[at][1]) <= allowed:
                moved, displaced = order.pop(at), order[spot]
                order[spot] = moved
                order.insert(k, displaced)
        start = k
    return order


def _sibling_test(title: Callable[[str], str] | None) -> Callable[[str, Sequence[str]], bool]:
    """``(doc, above) -> bool``: whether ``doc``'s title holds the (bare) title of a document in
    ``above``, or one of theirs holds its; never without ``title``. Titles are looked up once."""
    if title is None:
        return lambda doc, above: False
    of = cache(title)

    def sibling(doc: str, above: Sequence[str]) -> bool:
        mine = of(doc)
        folded = fold(mine)
        return any(
            mentions(folded, of(other)) or mentions(fold(of(other)), mine) for other in above
        )

    return sibling


def _logit(p: float) -> float:
    q = min(max(p, 1e-6), 1 - 1e-6)
    return float(np.log(q / (1 - q)))
