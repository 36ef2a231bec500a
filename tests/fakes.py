"""The test doubles shared by the tests, each defined once here (real parts everywhere else).

``FakeTools``: a small deterministic in-memory ``Tools`` for harness tests (no index, no model).
Documents ``d0 .. d{n-1}`` hold ``chunks_per_doc`` chunks each; chunk ``d3_1`` has a text that
names it (``"chunk d3_1 ..."``) so tests can look for it in requests. A search ranks chunks by
a stable hash of (query, chunk id), so different queries surface different chunks.

``CrashingEmbedder``: the hash embedder that dies mid-ingest, like a killed process.
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections.abc import Collection

from sleuth.embed import HashEmbedder
from sleuth.tokens import count_tokens
from sleuth.tools.types import ChunkHit, ToolResult

SEARCH_CHUNKS = 4  # chunks one search returns at most
GREP_CHUNKS = 5


class FakeTools:
    """Implements ``sleuth.tools.base.Tools``; records every call and its arguments."""

    def __init__(
        self, n_docs: int = 12, chunks_per_doc: int = 3, words: int = 30, delay_s: float = 0.0
    ):
        self.delay_s = delay_s
        self.calls: list[tuple[str, str, dict]] = []
        self._lock = threading.Lock()
        self.chunks: dict[str, ChunkHit] = {}
        for d in range(n_docs):
            for c in range(chunks_per_doc):
                cid = f"d{d}_{c}"
                filler = " ".join(f"w{(d * 7 + c * 3 + k) % 50}" for k in range(words))
                text = f"chunk {cid} of document d{d}. {filler}"
                self.chunks[cid] = ChunkHit(
                    id=cid, doc_id=f"d{d}", text=text, tokens=count_tokens(text)
                )

    def _log(self, tool: str, arg: str, **extra: object) -> None:
        with self._lock:
            self.calls.append((tool, arg, extra))
        if self.delay_s:
            time.sleep(self.delay_s)

    def search_corpus(
        self, query: str, exclude: Collection[str] = (), max_tokens: int | None = None
    ) -> ToolResult:
        self._log("search_corpus", query, exclude=set(exclude), max_tokens=max_tokens)
        ranked = sorted(self.chunks.values(), key=lambda c: _rank(query, c.id))
        hits = [c for c in ranked if c.id not in exclude]
        return ToolResult(tool="search_corpus", chunks=_pack(hits, max_tokens, SEARCH_CHUNKS))

    def grep_corpus(
        self, pattern: str, exclude: Collection[str] = (), max_tokens: int | None = None
    ) -> ToolResult:
        self._log("grep_corpus", pattern, exclude=set(exclude), max_tokens=max_tokens)
        try:
            rx = re.compile(pattern)
        except re.error as exc:
            return ToolResult(tool="grep_corpus", error=f"bad pattern: {exc}")
        hits = [c for c in self.chunks.values() if c.id not in exclude and rx.search(c.text)]
        return ToolResult(tool="grep_corpus", chunks=_pack(hits, max_tokens, GREP_CHUNKS))

    def read_document(
        self, doc_id: str, query: str | None = None, max_tokens: int | None = None
    ) -> ToolResult:
        self._log("read_document", doc_id, query=query, max_tokens=max_tokens)
        doc = doc_id.rsplit("_", 1)[0] if doc_id not in self.doc_ids() else doc_id
        hits = [c for c in self.chunks.values() if c.doc_id == doc]
        if not hits:
            return ToolResult(tool="read_document", error=f"unknown document {doc_id}")
        return ToolResult(tool="read_document", chunks=_pack(hits, max_tokens, len(hits)))

    def describe_corpus(self, max_tokens: int | None = None) -> ToolResult:
        self._log("describe_corpus", "", max_tokens=max_tokens)
        text = "Corpus: fake. Fields:"
        hit = ChunkHit(id="describe_corpus_0", doc_id="describe_corpus", text=text, tokens=5)
        return ToolResult(tool="describe_corpus", chunks=[hit])

    def doc_ids(self) -> set[str]:
        return {c.doc_id for c in self.chunks.values()}


def _rank(query: str, chunk_id: str) -> str:
    return hashlib.sha256(f"{query}|{chunk_id}".encode()).hexdigest()


def _pack(hits: list[ChunkHit], max_tokens: int | None, max_chunks: int) -> list[ChunkHit]:
    out, used = [], 0
    for hit in hits[:max_chunks]:
        if max_tokens is not None and used + hit.tokens > max_tokens:
            break
        out.append(hit)
        used += hit.tokens
    return out


class CrashingEmbedder(HashEmbedder):
    """``hash:64`` that raises ``KeyboardInterrupt`` after ``ok_batches`` batches."""

    def __init__(self, ok_batches: int):
        super().__init__(64)
        self.left = ok_batches

    def embed_documents(self, texts, batch_size=64, progress=None):
        if self.left == 0:
            raise KeyboardInterrupt("simulated kill")
        self.left -= 1
        return super().embed_documents(texts, batch_size, progress)
