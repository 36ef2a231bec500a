"""The retrieval tools over an :class:`~sleuth.index.Index` (SPEC §2).

``search_corpus``: BM25 top 25 + dense top 25 → RRF (k = 60) → 50 candidates → optional learned
ranker (:mod:`sleuth.ranking`) and/or text reranker → packed in rank order into ``max_tokens`` and at most 10 chunks. Excluded ids are
removed inside both retrievers, before top-k, so a large exclusion set makes the search dig
deeper rather than come back empty.

``grep_corpus``: a regular expression over chunk texts in corpus order, at most 5 chunks,
narrowed by the literals it must match; a bad, oversized or runaway pattern is a tool error
(:mod:`sleuth.tools.grep`).

``read_document``: a document's chunks in order; over budget, the chunks most similar to the
query that surfaced the document are kept (in document order) and the omission is stated.
"""

from __future__ import annotations

from collections.abc import Collection
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from sleuth.corpus.models import doc_id_of
from sleuth.errors import ConfigError, InputError, ToolError
from sleuth.index import Index
from sleuth.index.chroma import native_hybrid_search
from sleuth.index.lexical import ChunkRow
from sleuth.index.where import Where
from sleuth.ranking.features import Candidate, search_features
from sleuth.ranking.model import RankerModel
from sleuth.tokens import TokenCounter, default_counter
from sleuth.tools.describe import describe_block
from sleuth.tools.grep import GrepError, grep
from sleuth.tools.rerank import Reranker
from sleuth.tools.rrf import rrf
from sleuth.tools.spec import DESCRIBE, GREP, READ, SEARCH
from sleuth.tools.types import ChunkHit, ToolResult, render_chunk


@dataclass(frozen=True)
class ToolConfig:
    """Retrieval settings; defaults follow the Context-1 report. Checked when built: a
    :class:`ConfigError` names the setting to fix."""

    bm25_k: int = 25
    """Lexical (BM25) candidates per search."""
    dense_k: int = 25
    """Dense candidates per search."""
    rrf_k: int = 60
    """RRF smoothing constant."""
    candidates: int = 50
    """Fused candidates passed to the ranker / reranker."""
    search_max_tokens: int = 4096
    """Output budget of one search_corpus call, in tokens."""
    search_max_chunks: int = 10
    """Chunks one search_corpus call returns at most."""
    grep_max_chunks: int = 5
    """Chunks one grep_corpus call returns at most."""
    grep_timeout_s: float = 0.5
    """Wall-clock limit for one grep over the corpus."""
    grep_chunk_timeout_s: float = 0.05
    """One chunk taking longer than this is a runaway pattern."""
    read_max_tokens: int = 4096
    """Output budget of one read_document call, in tokens."""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not value > 0:
                raise ConfigError(
                    f"ToolConfig.{f.name} must be positive, got {value!r}; leave it out for the "
                    f"default ({f.default})"
                )


def _hit(row: ChunkRow | None, score: float | None) -> ChunkHit:
    assert row is not None, "a ranked chunk id is always in the index"
    return ChunkHit(id=row.id, doc_id=row.doc_id, text=row.text, tokens=row.tokens, score=score)


def _ranges(idxs: list[int]) -> str:
    """``[1, 2, 3, 7]`` → ``"1-3, 7"``."""
    out, start = [], None
    for i, x in enumerate(idxs):
        if start is None:
            start = x
        if i + 1 == len(idxs) or idxs[i + 1] != x + 1:
            out.append(str(start) if start == x else f"{start}-{x}")
            start = None
    return ", ".join(out)


class Toolbox:
    """Implements :class:`sleuth.tools.base.Tools` over an index."""

    def __init__(
        self,
        index: Index,
        config: ToolConfig | None = None,
        reranker: Reranker | None = None,
        counter: TokenCounter | None = None,
        ranker: RankerModel | None = None,
    ):
        self.index = index
        self.config = config or ToolConfig()
        self.reranker = reranker
        self.ranker = ranker  # learned rerank stage of search_corpus (its search head)
        self.counter = counter or default_counter()
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="sleuth-retrieve")

    def with_ranker(self, ranker: RankerModel | None) -> Toolbox:
        """The same tools over the same index with the learned ranker as the rerank stage."""
        return Toolbox(self.index, self.config, self.reranker, self.counter, ranker=ranker)

    def block_tokens(self, hit: ChunkHit) -> int:
        """Tokens of the block the policy sees for this chunk, separator included."""
        return self.counter.count(render_chunk(hit)) + 1

    def _pack(
        self, hits: list[ChunkHit], max_tokens: int, max_chunks: int
    ) -> tuple[list[ChunkHit], int]:
        """Whole chunks in rank order while both limits hold; oversized ones are skipped."""
        packed: list[ChunkHit] = []
        used = 0
        for h in hits:
            if len(packed) >= max_chunks:
                break
            cost = self.block_tokens(h)
            if used + cost <= max_tokens:
                packed.append(h)
                used += cost
        return packed, used

    # -- search_corpus -----------------------------------------------------------------
    def fused_candidates(
        self, query: str, exclude: Collection[str] = (), where: Where | None = None
    ) -> list[tuple[str, float]]:
        """BM25 and dense candidates (run concurrently) fused by RRF, minus ``exclude`` and the
        chunks a checked ``where`` rejects."""
        cfg, excluded = self.config, frozenset(exclude)
        if self.index.native_hybrid and where is None:
            qvec = self.index.embedder.embed_query(query)
            keys = frozenset(self.index.lexical.key_of(c) for c in excluded)
            hits = native_hybrid_search(
                self.index.collection, query, qvec, cfg.bm25_k, cfg.rrf_k, cfg.candidates, keys
            )
            return self.index.live_hits(hits)
        lexical, dense = self._retrieve(query, excluded, where)
        ranked = [[i for i, _ in lexical], [i for i, _ in dense]]
        return rrf(ranked, k=cfg.rrf_k)[: cfg.candidates]

    def _retrieve(
        self, query: str, excluded: frozenset[str], where: Where | None = None
    ) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
        """BM25 and dense top lists, run concurrently."""
        cfg = self.config
        lexical = self._pool.submit(self.index.lexical_search, query, cfg.bm25_k, excluded, where)
        qvec = self.index.embedder.embed_query(query)
        dense = self.index.dense_search(qvec, cfg.dense_k, excluded, where)
        return lexical.result(), dense

    def candidates(
        self, query: str, exclude: Collection[str] = (), where: Where | None = None
    ) -> list[Candidate]:
        """The fused candidates with each retriever's rank and score: the learned ranker's input."""
        lexical, dense = self._retrieve(query, frozenset(exclude), where)
        fused = rrf([[i for i, _ in lexical], [i for i, _ in dense]], k=self.config.rrf_k)
        bm25 = {cid: (rank, score) for rank, (cid, score) in enumerate(lexical, start=1)}
        cos = {cid: (rank, score) for rank, (cid, score) in enumerate(dense, start=1)}
        out = []
        for cid, score in fused[: self.config.candidates]:
            row = self.index.chunk(cid)
            if row is None:
                continue
            b_rank, b_score = bm25.get(cid, (None, 0.0))
            d_rank, d_score = cos.get(cid, (None, 0.0))
            out.append(Candidate(cid, row.title, row.text, score, b_rank, b_score, d_rank, d_score))
        return out

    def _learned_order(
        self, query: str, exclude: Collection[str], where: Where | None
    ) -> list[ChunkHit]:
        """Candidates ordered by the ranker's search head (ties keep the RRF order)."""
        assert self.ranker is not None
        cands = self.candidates(query, exclude, where)
        if not cands:
            return []
        scores = self.ranker.score_search(search_features(query, cands, self.config.rrf_k))
        order = sorted(range(len(cands)), key=lambda i: (-scores[i], i))
        return [_hit(self.index.chunk(cands[i].chunk_id), float(scores[i])) for i in order]

    def _checked(self, where: Any) -> Where | None:
        """A tool call's ``where`` checked against the grammar and the corpus's fields; a bad
        one raises ToolError (the caller sees its one-line reason)."""
        if where is None:
            return None
        try:
            return self.index.check_where(where)
        except InputError as e:
            raise ToolError(f"bad where: {e}") from None

    def search_corpus(
        self,
        query: str,
        exclude: Collection[str] = (),
        max_tokens: int | None = None,
        where: Any = None,
    ) -> ToolResult:
        if not isinstance(query, str) or not query.strip():
            return ToolResult(tool=SEARCH.name, error="query must be a non-empty string")
        try:
            checked = self._checked(where)
        except ToolError as e:
            return ToolResult(tool=SEARCH.name, error=str(e))
        if self.ranker is not None and (not self.index.native_hybrid or checked is not None):
            hits = self._learned_order(query, exclude, checked)
        else:
            fused = self.fused_candidates(query, exclude, checked)
            hits = [_hit(self.index.chunk(cid), score) for cid, score in fused]
        if self.reranker is not None and hits:
            scores = self.reranker.score(query, [h.text for h in hits])
            for h, s in zip(hits, scores, strict=True):
                h.score = s
            hits.sort(key=lambda h: -(h.score or 0.0))  # every hit has its score now
        budget = (
            self.config.search_max_tokens
            if max_tokens is None
            else min(max_tokens, self.config.search_max_tokens)
        )
        packed, _ = self._pack(hits, budget, self.config.search_max_chunks)
        note = None
        if hits and not packed:
            note = f"(No result fits in the {budget} tokens left; prune chunks or give your final answer.)"
        return ToolResult(tool=SEARCH.name, chunks=packed, note=note)

    # -- grep_corpus -------------------------------------------------------------------
    def grep_corpus(
        self,
        pattern: str,
        exclude: Collection[str] = (),
        max_tokens: int | None = None,
        where: Any = None,
    ) -> ToolResult:
        cfg = self.config
        try:
            checked = self._checked(where)
            allowed = None if checked is None else self.index.rows_matching(checked)
            rows = grep(
                self.index.lexical,
                pattern,
                exclude,
                cfg.grep_max_chunks,
                cfg.grep_timeout_s,
                cfg.grep_chunk_timeout_s,
                allowed,
            )
        except (GrepError, ToolError) as e:
            return ToolResult(tool=GREP.name, error=str(e))
        matches = [_hit(row, None) for row in rows]
        budget = self.config.search_max_tokens if max_tokens is None else max_tokens
        packed, _ = self._pack(matches, budget, self.config.grep_max_chunks)
        note = (
            None
            if len(packed) == len(matches)
            else f"({len(matches) - len(packed)} matching chunks did not fit the token budget.)"
        )
        return ToolResult(tool=GREP.name, chunks=packed, note=note)

    # -- describe_corpus -----------------------------------------------------------------
    def describe_corpus(self, max_tokens: int | None = None) -> ToolResult:
        """The metadata fields as one JSON block, cut to fit ``max_tokens``."""
        budget = self.config.search_max_tokens if max_tokens is None else max_tokens
        hit = describe_block(self.index.describe(), budget, self.block_tokens)
        if hit is None:
            note = f"(The corpus description does not fit in the {budget} tokens left.)"
            return ToolResult(tool=DESCRIBE.name, note=note)
        return ToolResult(tool=DESCRIBE.name, chunks=[hit])

    # -- read_document -----------------------------------------------------------------
    def read_document(
        self, doc_id: str, query: str | None = None, max_tokens: int | None = None
    ) -> ToolResult:
        if not isinstance(doc_id, str) or not doc_id.strip():
            return ToolResult(tool=READ.name, error="doc_id must be a non-empty string")
        rows = self.index.document_chunks(doc_id) or self.index.document_chunks(doc_id_of(doc_id))
        if not rows:
            return ToolResult(tool=READ.name, error=f"unknown document {doc_id!r}")
        budget = (
            self.config.read_max_tokens
            if max_tokens is None
            else min(max_tokens, self.config.read_max_tokens)
        )
        hits = [_hit(r, None) for r in rows]
        costs = [self.block_tokens(h) for h in hits]
        if sum(costs) <= budget:
            return ToolResult(tool=READ.name, chunks=hits)
        order = self._relevance_order(rows, query)
        keep, used = set(), 0
        for i in order:
            if used + costs[i] <= budget:
                keep.add(i)
                used += costs[i]
        kept = [h for i, h in enumerate(hits) if i in keep]
        omitted = [r.idx for i, r in enumerate(rows) if i not in keep]
        how = "most relevant to your search" if query else "from the start"
        note = (
            f"(Document {rows[0].doc_id} has {len(rows)} chunks; showing {len(kept)} {how} within "
            f"{budget} tokens; omitted chunks {_ranges(omitted)}.)"
        )
        return ToolResult(tool=READ.name, chunks=kept, note=note)

    def _relevance_order(self, rows: list[ChunkRow], query: str | None) -> list[int]:
        """Chunk positions by cosine similarity to ``query`` (document order without a query)."""
        if not query:
            return list(range(len(rows)))
        vecs = self.index.embeddings([r.id for r in rows])
        sims = vecs @ self.index.embedder.embed_query(query)
        return [int(i) for i in np.argsort(-sims, kind="stable")]
