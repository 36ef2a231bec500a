"""Corpus-wide evidence for a question about the documents a trajectory has seen.

A search shows at most ten chunks, and a bridge search ranks its hits for the bridge query,
not for the question; the selector needs to know how each seen document stands against the
question itself, across the whole corpus. One BM25 pass over the lexical side, one dot
product with the stored vectors and one personalised PageRank over the corpus graph give that
for a few milliseconds.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import numpy as np

from sleuth.index import Index
from sleuth.index.lexical import LexicalIndex
from sleuth.ranking.features import COMMON_TITLE, QuestionEvidence
from sleuth.ranking.text import bare_title


def question_evidence(
    index: Index,
    question: str,
    doc_ids: Collection[str],
    seeds: Mapping[str, float] | None = None,
) -> QuestionEvidence:
    """BM25 score and corpus rank, dense similarity, and corpus-graph PageRank (seeded by the
    question's names and ``seeds``, document → weight) of each of ``doc_ids`` for ``question``,
    and which of them have a common title (:data:`COMMON_TITLE`)."""
    lexical = index.lexical
    wanted = [d for d in dict.fromkeys(doc_ids) if d in lexical.rows_of_doc]
    bm25: dict[str, float] = {}
    bm25_rank: dict[str, int] = {}
    ranked = _document_scores(lexical, question)
    if ranked is not None:
        best, ascending = ranked
        for doc in wanted:
            value = float(best[lexical.doc_number[doc]])
            bm25[doc] = value
            if value > 0:  # 1 + the documents scoring more
                above = len(ascending) - int(np.searchsorted(ascending, value, side="right"))
                bm25_rank[doc] = 1 + above
    dense: dict[str, float] = {}
    if wanted:
        chunk_ids = [lexical.rows[i].id for d in wanted for i in lexical.rows_of_doc[d]]
        sims = index.embeddings(chunk_ids) @ index.embedder.embed_query(question)
        for cid, sim in zip(chunk_ids, sims, strict=True):
            doc = lexical.rows[lexical.row_of[cid]].doc_id
            dense[doc] = max(dense.get(doc, -1.0), float(sim))
    ppr: dict[str, float] = {}
    if wanted:
        graph = index.graph
        scores = graph.scores(question, seeds or {})
        ppr = {d: float(scores[graph.doc_number[d]]) for d in wanted if d in graph.doc_number}
    titles = {d: lexical.title_of(d) for d in wanted}
    common = {
        d for d, t in titles.items() if t and lexical.word_share(bare_title(t)) > COMMON_TITLE
    }
    return QuestionEvidence(bm25=bm25, bm25_rank=bm25_rank, dense=dense, ppr=ppr, common=common)


def _document_scores(lexical: LexicalIndex, question: str) -> tuple[np.ndarray, np.ndarray] | None:
    """Each document's best chunk BM25 score for ``question``, and those scores sorted.

    Kept for the last few questions (``LexicalIndex.kept_best``): the selector asks at every
    hop, and at 100k chunks the per-document maximum and sort cost ~10 ms a hop."""
    return lexical.kept_best.get(question, lambda: _scored(lexical, question))


def _scored(lexical: LexicalIndex, question: str) -> tuple[np.ndarray, np.ndarray] | None:
    scores = lexical.scores(question)
    if scores is None:
        return None
    best = _best_per_document(lexical.doc_of_row, scores, len(lexical.rows_of_doc))
    return best, np.sort(best)


def _best_per_document(doc_of_row: np.ndarray, scores: np.ndarray, n_docs: int) -> np.ndarray:
    best = np.zeros(n_docs, dtype=np.float64)
    np.maximum.at(best, doc_of_row, scores)
    return best
