"""The corpus as the pipeline's agents see it: the index, its tools and a few sampling helpers.

:class:`Workspace` holds what every stage shares (index, toolbox, whole documents).
:class:`Session` is one agent's view: the chunk ids it has been shown, so a repeated search
digs deeper instead of showing the same chunks again (the harness's dedup rule), and the
documents it has read in full.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

import numpy as np

from sleuth.corpus.models import doc_id_of
from sleuth.datagen.docs import DocStore
from sleuth.datagen.pipeline.agent import AgentTool, string_params
from sleuth.index import Index
from sleuth.tools.rrf import rrf
from sleuth.tools.spec import GREP, READ, SEARCH
from sleuth.tools.toolbox import Toolbox
from sleuth.tools.types import ChunkHit, ToolResult, render_result

PREVIEW_CHARS = 300


@dataclass
class Workspace:
    """Index, tools and documents shared by the stages of one run."""

    index: Index
    toolbox: Toolbox
    docs: DocStore

    @classmethod
    def open(cls, index: Index) -> Workspace:
        return cls(index=index, toolbox=Toolbox(index), docs=DocStore(index))

    def chunk_ids_of(self, doc_ids: Iterable[str]) -> list[str]:
        return [row.id for d in doc_ids for row in self.index.document_chunks(d)]

    def scoped_search(
        self, query: str, doc_ids: Collection[str], exclude: Collection[str] = (), k: int = 25
    ) -> list[ChunkHit]:
        """Hybrid search (BM25 + dense, RRF) restricted to the chunks of ``doc_ids``."""
        excluded = set(exclude)
        allowed = [c for c in self.chunk_ids_of(sorted(doc_ids)) if c not in excluded]
        if not allowed or not query.strip():
            return []
        lex = self.index.lexical
        keep = np.zeros(len(lex.rows), dtype=bool)
        keep[lex.rows_for(allowed)] = True
        lexical = [cid for cid, _ in lex.search(query, k, np.flatnonzero(~keep))]
        vectors = self.index.embeddings(allowed)
        sims = vectors @ self.index.embedder.embed_query(query)
        dense = [allowed[i] for i in np.argsort(-sims, kind="stable")[:k]]
        fused = rrf([lexical, dense])[:k]
        return [self.hit(cid, score) for cid, score in fused]

    def hit(self, chunk_id: str, score: float | None = None) -> ChunkHit:
        row = self.index.chunk(chunk_id)
        assert row is not None, chunk_id
        return ChunkHit(id=row.id, doc_id=row.doc_id, text=row.text, tokens=row.tokens, score=score)

    def pack(self, hits: list[ChunkHit]) -> ToolResult:
        """Whole chunks in rank order within ``search_corpus``'s token and chunk budgets."""
        config = self.toolbox.config
        packed: list[ChunkHit] = []
        used = 0
        for hit in hits:
            cost = self.toolbox.block_tokens(hit)
            if len(packed) < config.search_max_chunks and used + cost <= config.search_max_tokens:
                packed.append(hit)
                used += cost
        return ToolResult(tool="search", chunks=packed)

    def previews(self, doc_ids: Iterable[str]) -> str:
        """One line per document: id, title and the start of its text."""
        lines = []
        for doc_id in doc_ids:
            text = " ".join(self.docs.text(doc_id).split())[:PREVIEW_CHARS]
            title = self.docs.title(doc_id)
            lines.append(f"- {doc_id}" + (f" | {title}" if title else "") + f" | {text}")
        return "\n".join(lines) or "No documents."


@dataclass
class Session:
    """One agent's view of the workspace."""

    ws: Workspace
    rng: random.Random
    scope: list[str] | None = None
    """Document ids the agent may see; None = the whole corpus."""
    seen: set[str] = field(default_factory=set)
    """Chunk ids already shown by a search."""
    read_docs: set[str] = field(default_factory=set)
    """Documents the agent has read (a search hit shows only a chunk)."""
    _outside: set[str] | None = field(default=None, repr=False)

    def allowed(self, doc_id: str) -> bool:
        return doc_id in self.ws.docs and (self.scope is None or doc_id in self.scope)

    def show(self, result: ToolResult) -> str:
        """Render a search result and remember the chunks it showed."""
        self.seen.update(c.id for c in result.chunks)
        return render_result(result)

    def search(self, query: str) -> str:
        if self.scope is None:
            return self.show(self.ws.toolbox.search_corpus(query, exclude=self.seen))
        hits = self.ws.scoped_search(query, self.scope, exclude=self.seen)
        return self.show(self.ws.pack(hits))

    def grep(self, pattern: str) -> str:
        exclude = self.seen if self.scope is None else self._outside_scope() | self.seen
        return self.show(self.ws.toolbox.grep_corpus(pattern, exclude=exclude))

    def read(self, doc_id: str) -> str:
        if not self.allowed(doc_id) and not self.allowed(doc_id_of(doc_id)):
            return f"Error: unknown document {doc_id!r}"
        result = self.ws.toolbox.read_document(doc_id)
        self.read_docs.update(c.doc_id for c in result.chunks)
        return render_result(result)

    def random_documents(self, count: str | int = 5) -> str:
        pool = self.scope if self.scope is not None else self.ws.docs.doc_ids
        picked = self.ws.docs.sample(self.rng, _bounded(count, 10), among=list(pool))
        return self.ws.previews(picked)

    def _outside_scope(self) -> set[str]:
        """Chunk ids outside the scope, for grep's exclusion filter (computed once)."""
        if self._outside is None:
            inside = set(self.scope or ())
            outside = [d for d in self.ws.docs.doc_ids if d not in inside]
            self._outside = set(self.ws.chunk_ids_of(outside))
        return self._outside

    def base_tools(self) -> list[AgentTool]:
        """Search, grep, read and random sampling over this session's part of the corpus."""
        return [
            AgentTool(
                SEARCH.name,
                "Hybrid keyword and semantic search; returns chunks not shown before.",
                string_params(query="What to look for."),
                self.search,
            ),
            AgentTool(
                GREP.name,
                "Regular expression over chunk texts (Python syntax); at most 5 chunks.",
                string_params(pattern="A regular expression."),
                self.grep,
            ),
            AgentTool(
                READ.name,
                "Read a document by id (long ones are cut, and the reply says what was left out).",
                string_params(doc_id="Document id, or a chunk id <doc_id>_<n>."),
                self.read,
            ),
            AgentTool(
                "random_documents",
                "A random sample of documents: id, title and the start of the text.",
                {
                    "type": "object",
                    "properties": {"count": {"type": "integer", "description": "1 to 10."}},
                    "required": [],
                },
                self.random_documents,
            ),
        ]


def _bounded(value: str | int, upper: int) -> int:
    return max(1, min(upper, int(value)))
