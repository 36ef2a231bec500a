"""Features of a candidate document for a question, given what the search has shown so far.

Two feature sets, one per decision:

* :func:`search_features` — one ``search_corpus`` call's candidates (chunks) for its query:
  the two retrievers' ranks and scores, RRF, and how well the title and text cover the query.
* :func:`selection_features` — every document a trajectory has seen, for the original question:
  corpus-wide BM25 and dense evidence for the question, where and how often the searches
  showed it, and the multi-hop signals that plain retrieval lacks: its title is named by a
  document that answers part of the question (a bridge), or it names one (a title common in
  the corpus, :data:`COMMON_TITLE`, names nothing); and its personalised PageRank in the corpus
  graph seeded by the question's names and the searches' best documents; and what it adds to
  the documents that answer the question best (:data:`COVER_COLUMNS`).

Both are plain ``float`` rows in a fixed column order (``*_COLUMNS``); a head stores the names
of the columns it reads and picks them by name (:func:`pick_columns`). ``FEATURE_GROUPS`` sorts
the selection columns by kind; the chain group lives in :mod:`.chain`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from sleuth.ranking.chain import CHAIN_COLUMNS, chain_features
from sleuth.ranking.text import bare_title, fold, mentioned_by, mentions, overlap, stems

SEARCH_COLUMNS = (
    "rrf",
    "bm25_rr",
    "dense_rr",
    "bm25_rel",
    "dense_cos",
    "query_cover",
    "title_named",
    "title_cover",
)
# What a document adds to the best ones. A 3–4-hop question's gold documents answer different
# parts of it: the last hop's document shares few words with the first hop's, while the documents
# that lose to it at selection repeat what the best document already covers (its sibling
# seasons, lists and films). See docs/RESULTS.md ("What a document adds").
COVER_COLUMNS = (
    "residual_cover",  # question words it covers that the 3 most relevant others do not
    "novel_share",  # share of its question words no more relevant document (top 5) covers
    "bridge_tail",  # best 1/rank × share of a bridge search's question words it covers
    "link_gain",  # question words it adds to the most relevant document linked with it
    "title_sibling",  # its title's word overlap (Jaccard) with a more relevant one's (top 5)
)
# The corpus graph's personalised PageRank (sleuth.index.graph), as a share of the best seen.
GRAPH_COLUMNS = ("ppr",)
COMMON_TITLE = 0.05
"""A title whose rarest word is in more than this share of the corpus's chunks ("Thanks",
"Neural network" among neural-network patents, "United States") is a phrase, not a name: a
document naming it is no link (the links columns). As the corpus graph's hubs link nothing."""
SELECTION_COLUMNS = (
    "bm25_rel",
    "bm25_rr",
    "dense_cos",
    "dense_gap",
    "question_cover",
    "title_named",
    "title_cover",
    "question_search_rr",
    "best_rr",
    "searches",
    "link_in",
    "link_chain",
    "link_out",
    "entity_search_rr",
    "first_hop",
    *GRAPH_COLUMNS,
    *CHAIN_COLUMNS,
    *COVER_COLUMNS,
)
# Selection columns by kind of evidence: what ``benchmarks/ranker_ablation.py`` removes in turn.
FEATURE_GROUPS: dict[str, tuple[str, ...]] = {
    "retrieval": ("bm25_rel", "bm25_rr", "dense_cos", "dense_gap"),
    "text": ("question_cover", "title_named", "title_cover"),
    "searches": ("question_search_rr", "best_rr", "searches", "entity_search_rr", "first_hop"),
    "links": ("link_in", "link_chain", "link_out"),
    "graph": GRAPH_COLUMNS,
    "chain": CHAIN_COLUMNS,
    "cover": COVER_COLUMNS,
}


def pick_columns(
    features: np.ndarray, wanted: Sequence[str], have: Sequence[str] | None
) -> np.ndarray:
    """The ``wanted`` columns of a table whose columns are ``have`` (None: already ``wanted``).

    A head names the columns it was trained on, so one trained before a column existed reads
    today's table unchanged.
    """
    if have is None:
        if features.shape[1] != len(wanted):
            raise ValueError(f"expected {len(wanted)} feature columns, got {features.shape[1]}")
        return features
    if list(have) == list(wanted):
        return features
    return features[:, [list(have).index(c) for c in wanted]]


@dataclass
class Candidate:
    """One fused ``search_corpus`` candidate with what each retriever said about it."""

    chunk_id: str
    title: str
    text: str
    rrf: float
    bm25_rank: int | None = None  # 1-based; None when BM25 did not return it
    bm25_score: float = 0.0
    dense_rank: int | None = None
    dense_score: float = 0.0


def _rr(rank: int | None) -> float:
    return 1.0 / rank if rank else 0.0


def search_features(query: str, candidates: Sequence[Candidate], rrf_k: int = 60) -> np.ndarray:
    """A ``[len(candidates), len(SEARCH_COLUMNS)]`` matrix for one search call."""
    wanted = stems(query)
    query_lower = fold(query)
    top_bm25 = max((c.bm25_score for c in candidates), default=0.0) or 1.0
    rows = []
    for c in candidates:
        title_stems = stems(bare_title(c.title))
        rows.append(
            [
                c.rrf * rrf_k,
                _rr(c.bm25_rank),
                _rr(c.dense_rank),
                c.bm25_score / top_bm25,
                c.dense_score,
                overlap(wanted, f"{c.title}\n{c.text}"),
                float(bool(c.title) and mentions(query_lower, c.title)),
                len(title_stems & wanted) / len(title_stems) if title_stems else 0.0,
            ]
        )
    return np.asarray(rows, dtype=np.float32).reshape(len(rows), len(SEARCH_COLUMNS))


@dataclass
class SeenDoc:
    """A document as a trajectory met it: its title, the text shown, and where it ranked."""

    doc_id: str
    title: str
    text: str = ""
    ranks: list[tuple[int, int]] = field(default_factory=list)  # (search number, 1-based rank)


@dataclass
class Search:
    """One search the trajectory ran: its query and the hop it belongs to (0 = first turn)."""

    query: str
    hop: int


@dataclass
class QuestionEvidence:
    """Corpus-wide evidence for the question, per seen document (from the index)."""

    bm25: dict[str, float]  # best chunk BM25 score for the question
    bm25_rank: dict[str, int]  # 1-based rank of that score among all documents
    dense: dict[str, float]  # best chunk cosine similarity to the question
    ppr: dict[str, float] = field(default_factory=dict)  # corpus-graph PageRank (see GRAPH_COLUMNS)
    common: set[str] = field(default_factory=set)  # documents whose title is common (COMMON_TITLE)


def selection_features(
    question: str,
    docs: Sequence[SeenDoc],
    searches: Sequence[Search],
    evidence: QuestionEvidence,
) -> np.ndarray:
    """A ``[len(docs), len(SELECTION_COLUMNS)]`` matrix, one row per seen document."""
    wanted = stems(question)
    question_lower = fold(question)
    top_bm25 = max((evidence.bm25.get(d.doc_id, 0.0) for d in docs), default=0.0) or 1.0
    top_dense = max((evidence.dense.get(d.doc_id, 0.0) for d in docs), default=0.0)
    top_ppr = max((evidence.ppr.get(d.doc_id, 0.0) for d in docs), default=0.0) or 1.0
    queries = [fold(s.query) for s in searches]  # folded once: every document's ranks read them
    question_searches = {i for i, q in enumerate(queries) if q.strip() == question_lower.strip()}
    cover = [overlap(wanted, f"{d.title}\n{d.text}") for d in docs]
    # How much of the question a document answers by itself: the weight of its links.
    relevance = [
        0.5 * c + 0.5 * evidence.bm25.get(d.doc_id, 0.0) / top_bm25
        for c, d in zip(cover, docs, strict=True)
    ]
    lowered = [fold(f"{d.title}\n{d.text}") for d in docs]
    # names[i]: the documents whose text names document i's title (its in-links); named[j]: the
    # documents whose titles document j's text names (its out-links).
    names = mentioned_by(["" if d.doc_id in evidence.common else d.title for d in docs], lowered)
    named: list[list[int]] = [[] for _ in docs]
    for i, namers in enumerate(names):
        for j in namers:
            named[j].append(i)
    link_in = [max((relevance[j] for j in names[i]), default=0.0) for i in range(len(docs))]
    rows = []
    for i, d in enumerate(docs):
        title_stems = stems(bare_title(d.title))
        # A later hop: named by a document that is itself named by one answering the question.
        chain: float | np.ndarray = max((link_in[j] for j in names[i]), default=0.0)
        link_out = max((relevance[j] for j in named[i]), default=0.0)
        name = fold(bare_title(d.title))
        entity_rr = max(
            (
                1.0 / rank
                for s, rank in d.ranks
                if s not in question_searches and name and name in queries[s]
            ),
            default=0.0,
        )
        rows.append(
            [
                evidence.bm25.get(d.doc_id, 0.0) / top_bm25,
                _rr(evidence.bm25_rank.get(d.doc_id)),
                evidence.dense.get(d.doc_id, 0.0),
                evidence.dense.get(d.doc_id, 0.0) - top_dense,
                cover[i],
                float(bool(d.title) and mentions(question_lower, d.title)),
                len(title_stems & wanted) / len(title_stems) if title_stems else 0.0,
                max((1.0 / r for s, r in d.ranks if s in question_searches), default=0.0),
                max((1.0 / r for _, r in d.ranks), default=0.0),
                math.log1p(len({s for s, _ in d.ranks})),
                link_in[i],
                chain,
                link_out,
                entity_rr,
                min((searches[s].hop for s, _ in d.ranks), default=0) / 3.0,
                evidence.ppr.get(d.doc_id, 0.0) / top_ppr,
            ]
        )
    base = np.asarray(rows, dtype=np.float32).reshape(
        len(rows), len(SELECTION_COLUMNS) - len(CHAIN_COLUMNS) - len(COVER_COLUMNS)
    )
    chain = chain_features(question, docs, searches, relevance)
    adds = cover_features(question, docs, searches, relevance, names, named)
    return np.hstack([base, chain, adds]).reshape(len(rows), len(SELECTION_COLUMNS))


def cover_features(
    question: str,
    docs: Sequence[SeenDoc],
    searches: Sequence[Search],
    relevance: Sequence[float],
    names: Sequence[Sequence[int]],
    named: Sequence[Sequence[int]],
) -> np.ndarray:
    """A ``[len(docs), len(COVER_COLUMNS)]`` matrix: what each document adds to the documents
    that answer the question best by themselves (``relevance``, best first; ties by position).
    ``names[i]``/``named[i]``: the documents linking to / linked from document i."""
    wanted = stems(question)
    if not wanted or not docs:
        return np.zeros((len(docs), len(COVER_COLUMNS)), dtype=np.float32)
    covered = [wanted & stems(f"{d.title}\n{d.text}") for d in docs]
    order = sorted(range(len(docs)), key=lambda i: (-relevance[i], i))
    place = {i: r for r, i in enumerate(order)}
    question_lower = question.strip().lower()
    # A bridge search's question words: the part of the question it still looks for.
    tails = [
        frozenset() if s.query.strip().lower() == question_lower else wanted & stems(s.query)
        for s in searches
    ]
    title_words = [stems(d.title) for d in docs]
    rows = []
    for i, d in enumerate(docs):
        best = [j for j in order[:4] if j != i][:3]
        rest = wanted - set().union(*(covered[j] for j in best))
        above = order[: place[i]][:5]
        before = set().union(*(covered[j] for j in above))
        linked = [j for j in {*names[i], *named[i]} if j != i]
        link = max(linked, key=lambda j: (relevance[j], -j), default=None)
        mine = title_words[i]
        rows.append(
            [
                len(covered[i] & rest) / len(wanted),
                len(covered[i] - before) / len(covered[i]) if covered[i] else 0.0,
                max(
                    (
                        len(covered[i] & tails[s]) / len(tails[s]) / r
                        for s, r in d.ranks
                        if tails[s]
                    ),
                    default=0.0,
                ),
                len(covered[i] - covered[link]) / len(wanted) if link is not None else 0.0,
                max(
                    (len(mine & title_words[j]) / len(mine | title_words[j]) for j in above),
                    default=0.0,
                )
                if mine
                else 0.0,
            ]
        )
    return np.asarray(rows, dtype=np.float32).reshape(len(docs), len(COVER_COLUMNS))
