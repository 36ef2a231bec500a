"""The read side of :class:`~sleuth.index.Index`: the retrieval primitives the tools call
(dense and BM25 top-k with exclusions and filters, chunk and vector look-ups)."""

from __future__ import annotations

import contextlib
import hashlib
import io
import threading
import zipfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from sleuth.embed import Embedder, vector_space
from sleuth.errors import InputError
from sleuth.index.graph import GRAPH_FOLDER, CorpusGraph, open_graph
from sleuth.index.lexical import ChunkRow, LexicalIndex
from sleuth.index.manifest import IndexManifest
from sleuth.index.where import Where
from sleuth.io import atomic_write_bytes

KEPT_VECTORS = 16_384  # stored vectors kept for the selector's later hops (6 MB at 384 dims)
EXACT_DENSE_ROWS = 20_000
"""Embedded corpora up to this many chunks are searched exactly over their stored vectors
(30 MB at 384 dims, read once per lexical side). Chroma's HNSW is approximate, and an embedded
collection replays the rows written since its last HNSW save (up to ``sync_threshold``, 1,000)
into a graph built anew in every process, in an order that varies: a fresh process could miss,
or find, a true top-k chunk another process found (docs/scale.md). Larger corpora, attached
collections and a Chroma server's keep Chroma's HNSW."""
_exact_lock = threading.Lock()
VECTORS_FILE = "vectors.npz"
"""The exact search's matrix, kept in the lexical side's folder (replaced with it at every
ingest, sync or rebuild): a fresh process loads it in milliseconds instead of reading every row
from Chroma (0.54 s at 13k chunks)."""


def load_vectors(path: Path, keys: list[str]) -> np.ndarray | None:
    """The matrix saved for exactly these row keys, in this order; None when absent, for other
    rows (a rebuilt side may order them differently) or unreadable (rebuilt from Chroma)."""
    try:
        with np.load(path, allow_pickle=False) as saved:
            digest, matrix = str(saved["keys"]), saved["vectors"]
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        return None
    if digest != _keys_digest(keys) or matrix.ndim != 2 or len(matrix) != len(keys):
        return None
    return np.asarray(matrix, np.float32)


def save_vectors(path: Path, keys: list[str], matrix: np.ndarray) -> None:
    buffer = io.BytesIO()
    np.savez(buffer, keys=np.array(_keys_digest(keys)), vectors=matrix)
    atomic_write_bytes(path, buffer.getvalue(), make_parent=False)  # the side may be gone


def _keys_digest(keys: list[str]) -> str:
    return hashlib.sha256("\n".join(keys).encode("utf-8", "surrogatepass")).hexdigest()


class IndexReads:
    """Searches and look-ups over an index's Chroma collection and lexical side."""

    collection: Any
    lexical: LexicalIndex
    rows_matching: Callable[[Where], np.ndarray]  # supplied by IndexFields
    _vectors: tuple[LexicalIndex, dict[str, np.ndarray]] | None = None  # see embeddings()
    _graph: CorpusGraph | None = None
    _count: tuple[LexicalIndex, int] | None = None  # see _row_count()
    _exact: tuple[LexicalIndex, np.ndarray | None] | None = None  # see _exact_matrix()
    _stored: tuple[LexicalIndex, np.ndarray] | None = None  # the same rows as stored: embeddings()
    exact_rows: int = EXACT_DENSE_ROWS  # 0: Chroma's search (an attached or a server's collection)
    path: Path
    manifest: IndexManifest

    def _check_dim(self, embedder: Embedder) -> None:
        """Vectors of another space or dimension than the stored ones would rank nonsense or
        fail deep inside Chroma (an attached index embeds as its collection does: dimension only)."""
        space = vector_space(self.manifest.embedder)
        if not self.manifest.source and vector_space(embedder.spec) != space:
            raise InputError(
                f"index was built with embedder {self.manifest.embedder!r}, whose vectors "
                f"{embedder.spec!r} cannot search; search with the embedder it was built with",
                source=str(self.path),
            )
        expected = self.manifest.dim
        if expected is None and self.collection.count():
            got = self.collection.get(limit=1, include=["embeddings"])["embeddings"]
            expected = len(got[0])
        if expected is not None and embedder.dim != expected:
            raise InputError(
                f"index vectors have {expected} dimensions but embedder {embedder.spec!r} makes "
                f"{embedder.dim}; search with the embedder the index was built with",
                source=str(self.path),
            )

    @property
    def graph(self) -> CorpusGraph:
        """The corpus graph (:mod:`sleuth.index.graph`); an index built before it existed
        builds and saves it here, on first use."""
        if self._graph is None or self._graph.stamp != self.lexical.stamp:
            self._graph = open_graph(self.path / GRAPH_FOLDER, self.lexical)
        return self._graph

    def dense_search(
        self,
        query_vec: np.ndarray,
        k: int,
        exclude: set[str] | frozenset[str] = frozenset(),
        where: Where | None = None,
    ) -> list[tuple[str, float]]:
        """Top-``k`` by cosine similarity, skipping ``exclude`` and chunks a checked ``where``
        rejects (Chroma filters before ranking): over-fetch by the exclusion set's size, and by
        the rows of other generations (an update's, :mod:`sleuth.index.update`), so unseen
        matches of this one are still found. A corpus of at most :attr:`exact_rows` chunks is
        searched exactly (:data:`EXACT_DENSE_ROWS`)."""
        matrix = self._exact_matrix()
        if matrix is not None:
            return self._exact_search(matrix, query_vec, k, exclude, where)
        total = self._row_count(fresh=False)
        while total:
            n = min(total, k + len(exclude) + max(0, total - len(self.lexical.rows)))
            res = self.collection.query(
                query_embeddings=[query_vec.tolist()],
                n_results=n,
                include=["distances"],
                where=where,
            )
            hits = zip(res["ids"][0], (1.0 - float(d) for d in res["distances"][0]), strict=True)
            found = [(cid, s) for cid, s in self.live_hits(hits) if cid not in exclude][:k]
            if len(found) == k:
                return found
            grown, total = total, self._row_count(fresh=True)
            if n >= total or total <= grown:
                return found  # else an update added rows meanwhile: they may have crowded out ours
        return []

    def _exact_matrix(self) -> np.ndarray | None:
        """Every live row's stored vector at unit length, in row order, kept with the lexical
        side it was read under; None above :attr:`exact_rows` chunks."""
        lexical = self.lexical
        kept = self._exact
        if kept is None or kept[0] is not lexical:
            with _exact_lock:  # parallel first searches read it once
                kept = self._exact
                if kept is None or kept[0] is not lexical:
                    kept = self._exact = (lexical, self._read_matrix(lexical))
        return kept[1]

    def _read_matrix(self, lexical: LexicalIndex) -> np.ndarray | None:
        if not 0 < len(lexical.rows) <= self.exact_rows:
            return None
        keys = [r.key or r.id for r in lexical.rows]
        kept = self.path / self.manifest.lexical_dir / VECTORS_FILE
        matrix = load_vectors(kept, keys)
        if matrix is None:
            matrix = self._fetch_matrix(keys)
            if matrix is None:
                return None  # rows missing from Chroma: let its own search answer
            with contextlib.suppress(OSError):  # a read-only index reads Chroma every time
                save_vectors(kept, keys, matrix)
        self._stored = (lexical, matrix)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        unit: np.ndarray = matrix / np.maximum(norms, 1e-12)
        return unit

    def _fetch_matrix(self, keys: list[str]) -> np.ndarray | None:
        """The stored vectors of ``keys`` from Chroma, in order; None if any is missing."""
        by_key: dict[str, np.ndarray] = {}
        for start in range(0, len(keys), 4096):  # well under SQLite's bound on parameters
            got = self.collection.get(ids=keys[start : start + 4096], include=["embeddings"])
            by_key.update(zip(got["ids"], np.asarray(got["embeddings"], np.float32), strict=True))
        if len(by_key) != len(keys):
            return None
        return np.stack([by_key[key] for key in keys])

    def _exact_search(
        self,
        matrix: np.ndarray,
        query_vec: np.ndarray,
        k: int,
        exclude: set[str] | frozenset[str],
        where: Where | None,
    ) -> list[tuple[str, float]]:
        """Top-``k`` rows by cosine similarity, ties by row (document, chunk) order."""
        query = np.asarray(query_vec, np.float32)
        # einsum, not BLAS: OpenBLAS's threads ran this product at 8.5 ms (3.5k rows, 2 loaded
        # cores) against 0.7 ms in one loop
        scores = np.einsum("ij,j->i", matrix, query / max(float(np.linalg.norm(query)), 1e-12))
        keep = np.ones(len(scores), bool) if where is None else self.rows_matching(where)
        if exclude:
            keep[self.lexical.rows_for(exclude)] = False
        live = np.flatnonzero(keep)
        if 0 < k < len(live):  # sort only the rows that can be in the top k (ties kept)
            kth = np.partition(scores[live], len(live) - k)[len(live) - k]
            live = live[scores[live] >= kth]
        top = live[np.lexsort((live, -scores[live]))][: max(k, 0)]
        rows = self.lexical.rows
        return [(rows[i].id, float(scores[i])) for i in top]

    def _row_count(self, *, fresh: bool) -> int:
        """Chroma's row count, kept with the lexical side it was read under: ``count()`` is a
        table scan (~2 ms at 3k chunks, 20 ms at 100k) and a search needs a fresh one only when
        its over-fetch came back short (another process's update may have added rows)."""
        kept = self._count
        if fresh or kept is None or kept[0] is not self.lexical:
            kept = self._count = (self.lexical, self.collection.count())
        return kept[1]

    def live_hits(self, hits: Iterable[tuple[str, float]]) -> list[tuple[str, float]]:
        """Chroma hits as this generation's chunk ids; rows of other generations are dropped."""
        lex, out = self.lexical, []
        for key, score in hits:
            i = lex.row_of_key(key)
            if i is not None:
                out.append((lex.rows[i].id, score))
        return out

    def lexical_search(
        self,
        query: str,
        k: int,
        exclude: set[str] | frozenset[str] = frozenset(),
        where: Where | None = None,
    ) -> list[tuple[str, float]]:
        """Top-``k`` by BM25, skipping ``exclude`` and the rows a checked ``where`` rejects."""
        lex = self.lexical
        drop = lex.rows_for(exclude) if exclude else None
        if where is not None:
            rejected = np.flatnonzero(~self.rows_matching(where))
            drop = rejected if drop is None else np.concatenate([drop, rejected])
        return lex.search(query, k, drop)

    def chunk(self, chunk_id: str) -> ChunkRow | None:
        i = self.lexical.row_of.get(chunk_id)
        return None if i is None else self.lexical.rows[i]

    def document_chunks(self, doc_id: str) -> list[ChunkRow]:
        return [self.lexical.rows[i] for i in self.lexical.rows_of_doc.get(doc_id, [])]

    def embeddings(self, chunk_ids: list[str]) -> np.ndarray:
        """Stored dense vectors of ``chunk_ids``, in the given order.

        Kept with the lexical side they were read under (every ingest or sync makes a new
        one): an agent's selector asks for every seen chunk at every hop, and a Chroma ``get``
        costs ~25 ms at 100k chunks (5-8 ms at 3k), so later hops fetch only the chunks new to
        them. A corpus searched exactly answers from the rows it read for that (no ``get``)."""
        lexical = self.lexical
        stored = self._stored
        if stored is not None and stored[0] is lexical and chunk_ids:
            rows = [lexical.row_of.get(c, -1) for c in chunk_ids]
            if min(rows) >= 0:
                vectors: np.ndarray = stored[1][rows]
                return vectors
        if self._vectors is None or self._vectors[0] is not lexical:
            self._vectors = (lexical, {})
        kept = self._vectors[1]
        found = {c: kept[c] for c in chunk_ids if c in kept}
        missing = [c for c in dict.fromkeys(chunk_ids) if c not in found]
        if missing:
            keys = {lexical.key_of(c): c for c in missing}  # Chroma key → chunk id
            got = self.collection.get(ids=list(keys), include=["embeddings"])
            fetched = {
                keys[k]: np.asarray(v, dtype=np.float32)
                for k, v in zip(got["ids"], got["embeddings"], strict=True)
            }
            found |= fetched
            if len(kept) + len(fetched) > KEPT_VECTORS:
                kept.clear()
            kept |= fetched
        return np.asarray([found[c] for c in chunk_ids], dtype=np.float32)

    @property
    def documents(self) -> list[str]:
        return list(self.lexical.rows_of_doc)

    def __len__(self) -> int:
        return len(self.lexical.rows)
