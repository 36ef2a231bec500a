"""The :class:`Index`: Chroma for chunks, metadata and dense vectors; bm25s beside it.

Layout of an index folder::

    sleuth-index.json   manifest: embedder, chunking, Chroma location, ingest state
    chroma/             Chroma PersistentClient data (absent when using a Chroma server)
    lexical/            chunk texts + BM25 (derived; rebuilt from Chroma when stale)
    pending.json        doc ids of an ingest in progress (for resume and repair)

Consistency: the manifest says ``state: ingesting`` from before the first Chroma write
until the lexical side is rebuilt, so an interrupted ingest is always detected on open.
Re-running the same ingest resumes it (chunks already in Chroma are not embedded again);
``repair()`` rolls it back instead.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import numpy as np

from sleuth.corpus.chunking import chunk_document
from sleuth.corpus.models import Chunk, Document
from sleuth.embed import Embedder, make_embedder
from sleuth.errors import IndexIncompleteError, InputError
from sleuth.index.lexical import LEXICAL_FORMAT, ChunkRow, LexicalIndex
from sleuth.io import atomic_write_text

MANIFEST = "sleuth-index.json"
SCHEMA_VERSION = 1
COLLECTION = "sleuth_chunks"
Progress = Callable[[str, int, int], None]  # (phase, done, total)


def _fingerprint(docs: Sequence[Document], settings: dict) -> str:
    h = hashlib.sha256(json.dumps(settings, sort_keys=True).encode())
    for d in docs:
        h.update(d.id.encode() + b"\0" + hashlib.sha1(d.text.encode()).digest())
    return h.hexdigest()


def _chroma_client(path: Path, chroma_url: str | None):
    import chromadb
    from chromadb.config import Settings

    settings = Settings(anonymized_telemetry=False, allow_reset=False)
    if chroma_url:
        u = urlparse(chroma_url)
        return chromadb.HttpClient(
            host=u.hostname or "127.0.0.1",
            port=u.port or 8000,
            ssl=u.scheme == "https",
            settings=settings,
        )
    return chromadb.PersistentClient(path=str(path / "chroma"), settings=settings)


class Index:
    """A searchable corpus. Open an existing one with :meth:`open`, build with :meth:`create`."""

    def __init__(self, path: Path, manifest: dict, embedder: Embedder | None = None):
        self.path = path
        self.manifest = manifest
        self._embedder = embedder
        self.client = _chroma_client(path, manifest.get("chroma_url"))
        self.collection, self.native_hybrid = self._open_collection(manifest)
        self._lexical: LexicalIndex | None = None

    def _open_collection(self, manifest: dict):
        """Open the chunk collection; on a Chroma server, first try one with a server-side BM25
        sparse index (distributed Chroma / Chroma Cloud). Single-node and embedded Chroma refuse
        sparse indexes, which we detect instead of assume, falling back to the local bm25s side."""
        name = manifest.get("collection", COLLECTION)
        config = {"hnsw": {"space": "cosine"}}
        if manifest.get("chroma_url") and manifest.get("native_hybrid", True):
            try:
                return self.client.get_or_create_collection(
                    name, schema=_sparse_schema(), embedding_function=None, configuration=config
                ), True
            except Exception:  # noqa: BLE001 - any refusal means "not supported here"
                manifest["native_hybrid"] = False
        return self.client.get_or_create_collection(
            name, embedding_function=None, configuration=config
        ), False

    # -- opening -----------------------------------------------------------------------
    @classmethod
    def create(
        cls,
        path: str | Path,
        embedder: str = "minilm",
        chunk_tokens: int = 512,
        overlap_tokens: int = 48,
        chroma_url: str | None = None,
        collection: str = COLLECTION,
    ) -> Index:
        """Open ``path`` for ingest, creating the manifest if it does not exist yet."""
        path = Path(path)
        manifest_path = path / MANIFEST
        if manifest_path.exists():
            index = cls(path, _read_manifest(path))
            index._check_settings(embedder, chunk_tokens, overlap_tokens)
            return index
        if path.exists() and any(path.iterdir()):
            raise InputError("folder exists and is not a sleuth index", source=str(path))
        manifest = {
            "schema_version": SCHEMA_VERSION,
            "embedder": embedder,
            "chunk_tokens": chunk_tokens,
            "overlap_tokens": overlap_tokens,
            "chroma_url": chroma_url,
            "collection": collection,
            "state": "ready",
            "generation": 0,
            "documents": 0,
            "chunks": 0,
        }
        path.mkdir(parents=True, exist_ok=True)
        atomic_write_text(manifest_path, json.dumps(manifest, indent=2))
        return cls(path, manifest)

    @classmethod
    def open(cls, path: str | Path, embedder: Embedder | None = None) -> Index:
        """Open a finished index for search; an interrupted ingest raises IndexIncompleteError."""
        path = Path(path)
        manifest = _read_manifest(path)
        if manifest["state"] != "ready":
            raise IndexIncompleteError(
                f"{path}: the last ingest was interrupted; run the same `sleuth ingest` again to "
                "resume it, or `sleuth ingest --repair` to roll it back"
            )
        index = cls(path, manifest, embedder)
        index.lexical  # noqa: B018 - load or repair the lexical side now, not on first query
        return index

    def _check_settings(self, embedder: str, chunk_tokens: int, overlap_tokens: int) -> None:
        m = self.manifest
        wanted = {
            "embedder": embedder,
            "chunk_tokens": chunk_tokens,
            "overlap_tokens": overlap_tokens,
        }
        for key, value in wanted.items():
            if m[key] != value:
                raise InputError(
                    f"index was built with {key}={m[key]!r}, not {value!r}", source=str(self.path)
                )

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = make_embedder(self.manifest["embedder"])
        return self._embedder

    @property
    def lexical(self) -> LexicalIndex:
        """The lexical side, rebuilt from Chroma when its stamp does not match the manifest."""
        if self._lexical is None:
            stamp = self._stamp()
            loaded = LexicalIndex.load(self.path / "lexical")
            if loaded is None or loaded.stamp != stamp:
                loaded = self._rebuild_lexical(stamp)
            self._lexical = loaded
        return self._lexical

    def _stamp(self) -> dict:
        return {
            "generation": self.manifest["generation"],
            "chunks": self.collection.count(),
            "format": LEXICAL_FORMAT,
        }

    def _rebuild_lexical(self, stamp: dict) -> LexicalIndex:
        rows: list[ChunkRow] = []
        total, offset, page = self.collection.count(), 0, 5000
        while offset < total:
            got = self.collection.get(include=["documents", "metadatas"], limit=page, offset=offset)
            for cid, text, meta in zip(got["ids"], got["documents"], got["metadatas"], strict=True):
                rows.append(
                    ChunkRow(
                        cid,
                        meta["doc_id"],
                        int(meta["idx"]),
                        text,
                        int(meta["tokens"]),
                        str(meta.get("title") or ""),
                    )
                )
            offset += page
        lexical = LexicalIndex.build(rows, stamp)
        lexical.save(self.path / "lexical")
        return lexical

    # -- ingest ------------------------------------------------------------------------
    def ingest(
        self, docs: Sequence[Document], batch_size: int = 128, progress: Progress | None = None
    ) -> dict:
        """Chunk, embed and add ``docs``; resumable if interrupted. Returns counts."""
        m = self.manifest
        settings = {k: m[k] for k in ("embedder", "chunk_tokens", "overlap_tokens")}
        fp = _fingerprint(docs, settings)
        resuming = m["state"] == "ingesting" and m.get("pending") == fp
        if m["state"] == "ingesting" and not resuming:
            raise IndexIncompleteError(
                f"{self.path}: an interrupted ingest of other inputs is pending; rerun it with the "
                "same inputs to resume, or use --repair to roll it back"
            )
        chunks = [
            c for d in docs for c in chunk_document(d, m["chunk_tokens"], m["overlap_tokens"])
        ]
        atomic_write_text(self.path / "pending.json", json.dumps([d.id for d in docs]))
        self._write_manifest(state="ingesting", pending=fp)
        if not resuming:
            self._delete_docs([d.id for d in docs])
        todo = self._missing(chunks) if resuming else chunks
        self._add(todo, batch_size, progress, total=len(chunks), done=len(chunks) - len(todo))
        return self._finish(len(docs), len(chunks), skipped=len(chunks) - len(todo))

    def _missing(self, chunks: list[Chunk]) -> list[Chunk]:
        present: set[str] = set()
        for i in range(0, len(chunks), 5000):
            present.update(
                self.collection.get(ids=[c.id for c in chunks[i : i + 5000]], include=[])["ids"]
            )
        return [c for c in chunks if c.id not in present]

    def _add(
        self, chunks: list[Chunk], batch_size: int, progress: Progress | None, total: int, done: int
    ) -> None:
        if progress:
            progress("embedding", done, total)
        for i in range(0, len(chunks), batch_size):
            batch = chunks[i : i + batch_size]
            texts = [_search_text(c) for c in batch]
            vectors = self.embedder.embed_documents(texts, batch_size=batch_size)
            self.collection.add(
                ids=[c.id for c in batch],
                embeddings=vectors,
                documents=[c.text for c in batch],
                metadatas=[
                    {**c.metadata, "doc_id": c.doc_id, "idx": c.idx, "tokens": c.tokens}
                    for c in batch
                ],
            )
            done += len(batch)
            if progress:
                progress("embedding", done, total)

    def _delete_docs(self, doc_ids: list[str]) -> None:
        for i in range(0, len(doc_ids), 500):
            self.collection.delete(where={"doc_id": {"$in": doc_ids[i : i + 500]}})

    def _finish(self, n_docs: int, n_chunks: int, skipped: int) -> dict:
        generation = self.manifest["generation"] + 1
        self.manifest["generation"] = generation
        self._lexical = self._rebuild_lexical(self._stamp())
        docs_total = len(self._lexical.rows_of_doc)
        self._write_manifest(
            state="ready",
            pending=None,
            documents=docs_total,
            chunks=len(self._lexical.rows),
            generation=generation,
        )
        (self.path / "pending.json").unlink(missing_ok=True)
        return {
            "documents": n_docs,
            "chunks": n_chunks,
            "resumed_chunks": skipped,
            "index_documents": docs_total,
            "index_chunks": len(self._lexical.rows),
        }

    def repair(self) -> dict:
        """Roll back an interrupted ingest: drop the chunks of its documents, mark ready."""
        pending = self.path / "pending.json"
        doc_ids = json.loads(pending.read_text()) if pending.exists() else []
        self._delete_docs(doc_ids)
        return self._finish(0, 0, 0) | {"rolled_back_documents": len(doc_ids)}

    def _write_manifest(self, **changes: Any) -> None:
        self.manifest.update(changes)
        atomic_write_text(self.path / MANIFEST, json.dumps(self.manifest, indent=2))

    # -- retrieval primitives ----------------------------------------------------------
    def dense_search(
        self, query_vec: np.ndarray, k: int, exclude: set[str] | frozenset[str] = frozenset()
    ) -> list[tuple[str, float]]:
        """Top-``k`` by cosine similarity, skipping ``exclude``: over-fetch by its size so
        unseen matches are still found when the exclusion set is large."""
        total = self.collection.count()
        if total == 0:
            return []
        n = min(total, k + len(exclude))
        res = self.collection.query(
            query_embeddings=[query_vec.tolist()], n_results=n, include=["distances"]
        )
        hits = [
            (cid, 1.0 - float(d))
            for cid, d in zip(res["ids"][0], res["distances"][0], strict=True)
            if cid not in exclude
        ]
        return hits[:k]

    def lexical_search(
        self, query: str, k: int, exclude: set[str] | frozenset[str] = frozenset()
    ) -> list[tuple[str, float]]:
        lex = self.lexical
        return lex.search(query, k, lex.rows_for(exclude) if exclude else None)

    def chunk(self, chunk_id: str) -> ChunkRow | None:
        i = self.lexical.row_of.get(chunk_id)
        return None if i is None else self.lexical.rows[i]

    def document_chunks(self, doc_id: str) -> list[ChunkRow]:
        return [self.lexical.rows[i] for i in self.lexical.rows_of_doc.get(doc_id, [])]

    def embeddings(self, chunk_ids: list[str]) -> np.ndarray:
        """Stored dense vectors of ``chunk_ids``, in the given order."""
        got = self.collection.get(ids=chunk_ids, include=["embeddings"])
        by_id = dict(zip(got["ids"], got["embeddings"], strict=True))
        return np.asarray([by_id[c] for c in chunk_ids], dtype=np.float32)

    @property
    def documents(self) -> list[str]:
        return list(self.lexical.rows_of_doc)

    def __len__(self) -> int:
        return len(self.lexical.rows)


def _search_text(chunk: Chunk) -> str:
    """The text a chunk is embedded from: its document title, then its text (as BM25 sees it)."""
    title = chunk.metadata.get("title") or ""
    return f"{title}\n{chunk.text}" if title else chunk.text


SPARSE_KEY = "bm25_sparse"


def _sparse_schema():
    from chromadb import Schema
    from chromadb.api.types import SparseVectorIndexConfig
    from chromadb.execution.expression.operator import Key
    from chromadb.utils.embedding_functions import ChromaBm25EmbeddingFunction

    config = SparseVectorIndexConfig(
        source_key=Key.DOCUMENT, embedding_function=ChromaBm25EmbeddingFunction()
    )
    return Schema().create_index(config=config, key=SPARSE_KEY)


def native_hybrid_search(
    collection,
    query: str,
    query_vec: np.ndarray,
    k_each: int,
    rrf_k: int,
    limit: int,
    exclude: frozenset[str],
) -> list[tuple[str, float]]:
    """Server-side ``Search(Rrf(Knn dense, Knn BM25))`` minus ``exclude``; for servers that have it."""
    from chromadb import Knn, Rrf, Search
    from chromadb.execution.expression.operator import Key

    ranks = [
        Knn(query=query_vec.tolist(), return_rank=True, limit=k_each),
        Knn(query=query, key=SPARSE_KEY, return_rank=True, limit=k_each),
    ]
    search = Search().rank(Rrf(ranks=ranks, k=rrf_k)).limit(limit).select(Key.SCORE)
    if exclude:
        search = search.where(Key.ID.not_in(sorted(exclude)))
    res = collection.search(search)
    return [
        (cid, -float(score)) for cid, score in zip(res["ids"][0], res["scores"][0], strict=True)
    ]


def _read_manifest(path: Path) -> dict:
    try:
        manifest = json.loads((path / MANIFEST).read_text())
    except FileNotFoundError:
        raise InputError(
            "not a sleuth index (no sleuth-index.json); build one with `sleuth ingest`",
            source=str(path),
        ) from None
    except (OSError, ValueError) as e:
        raise InputError(f"unreadable index manifest: {e}", source=str(path)) from None
    if manifest.get("schema_version") != SCHEMA_VERSION:
        raise InputError(
            f"index schema {manifest.get('schema_version')} is not {SCHEMA_VERSION}",
            source=str(path),
        )
    return manifest
