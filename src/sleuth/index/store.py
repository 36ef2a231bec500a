"""The :class:`Index`: Chroma for chunks, metadata and dense vectors; bm25s beside it.

The folder's layout and manifest are in :mod:`sleuth.index.manifest`, the Chroma clients and
collection in :mod:`sleuth.index.chroma`, the checks run before any write in
:mod:`sleuth.index.ingest_checks`.

Consistency: the manifest says ``state: ingesting`` from before the first Chroma write
until the lexical side is rebuilt, so an interrupted ingest is always detected on open.
Re-running the same ingest resumes it (chunks already in Chroma are not embedded again);
``repair()`` rolls it back instead. Every input is checked before the first write, and a
document's old chunks are deleted only once its new ones are in, so a failed ingest never
loses what was indexed. Each index has its own collection, stamped with the index's id, so two
indexes on one Chroma server stay apart; a missing or foreign collection is refused, never
silently recreated empty.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import uuid
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Self

import numpy as np

from sleuth.corpus.chunking import chunk_document
from sleuth.corpus.models import Chunk, Document
from sleuth.embed import DEFAULT_EMBEDDER, INGEST_BATCH, Embedder, make_embedder, vector_space
from sleuth.errors import IndexIncompleteError, InputError
from sleuth.index.attached import open_attached, read_only_error
from sleuth.index.chroma import chroma_client, create_collection, first_line, read_only_copy
from sleuth.index.fields import IndexFields, date_fields, document_metadata, save_fields
from sleuth.index.graph import GRAPH_FOLDER, CorpusGraph, open_graph
from sleuth.index.ingest_checks import check_ingest_inputs, check_new_settings, clean_documents
from sleuth.index.lexical import LEXICAL_FORMAT, ChunkRow, LexicalIndex
from sleuth.index.manifest import (
    ID_KEY,
    MANIFEST,
    IndexManifest,
    IngestResult,
    check_index_folder,
    read_manifest,
)
from sleuth.index.reads import IndexReads
from sleuth.io import atomic_write_text, folder_lock, lock_holder

Progress = Callable[[str, int, int], None]  # (phase, done, total)
_PAGE = 5000


def _chunk_sha(chunk: Chunk) -> str:
    """What a stored chunk must match to be kept as is (text and metadata)."""
    payload = json.dumps([chunk.text, chunk.metadata], sort_keys=True, ensure_ascii=False)
    return hashlib.sha1(payload.encode()).hexdigest()


def _fingerprint(docs: Sequence[Document], settings: dict) -> str:
    h = hashlib.sha256(json.dumps(settings, sort_keys=True).encode())
    for d in docs:
        h.update(d.id.encode() + b"\0" + hashlib.sha1(d.text.encode()).digest())
    return h.hexdigest()


class Index(IndexReads, IndexFields):
    """A searchable corpus. Open an existing one with :meth:`open`, build with :meth:`create`;
    its metadata fields and filters come from :class:`~sleuth.index.fields.IndexFields`."""

    def __init__(self, path: Path, manifest: IndexManifest, embedder: Embedder | None = None):
        self.path = path
        self.manifest = manifest
        self._embedder = embedder
        self._dim_checked: Embedder | None = None
        self.collection: Any
        if manifest.source is not None:  # a user's own collection (sleuth.index.attach)
            self.client, self.collection = open_attached(path, manifest)
        else:
            self.client = chroma_client(self._chroma_path(), manifest.chroma_url)
            self.collection = self._get_collection()
        self.native_hybrid = bool(manifest.native_hybrid)
        self._lexical: LexicalIndex | None = None
        self._graph: CorpusGraph | None = None
        self._fields: dict[str, Any] | None = None

    def _chroma_path(self) -> Path:
        chroma = self.path / "chroma"
        if self.manifest.chroma_url:
            return chroma
        if not chroma.is_dir():
            raise InputError(
                "damaged index: its chroma/ folder is missing; rebuild it with `sleuth ingest`",
                source=str(self.path),
            )
        if os.access(chroma, os.W_OK) and os.access(chroma / "chroma.sqlite3", os.W_OK):
            return chroma
        copy = read_only_copy(chroma)
        weakref.finalize(self, shutil.rmtree, copy, True)
        return copy

    def _get_collection(self):
        """The collection this index wrote: it must exist and carry this index's id."""
        name = self.manifest.collection
        try:
            collection = self.client.get_collection(name, embedding_function=None)
        except Exception as e:  # noqa: BLE001 - NotFoundError, or an unreadable store
            raise InputError(
                f"damaged index: cannot open its Chroma collection {name!r} "
                f"({first_line(e)}); rebuild it with `sleuth ingest`",
                source=str(self.path),
            ) from None
        owner = (collection.metadata or {}).get(ID_KEY)
        if self.manifest.index_id is not None and owner != self.manifest.index_id:
            raise InputError(
                f"Chroma collection {name!r} belongs to another index (id {owner}), not this "
                f"one ({self.manifest.index_id})",
                source=str(self.path),
            )
        return collection

    # -- opening -----------------------------------------------------------------------
    @classmethod
    def create(
        cls,
        path: str | Path,
        embedder: str = DEFAULT_EMBEDDER,
        chunk_tokens: int = 512,
        overlap_tokens: int = 48,
        chroma_url: str | None = None,
        collection: str | None = None,
    ) -> Self:
        """Open ``path`` for ingest, creating the index if it does not exist yet.

        Every setting is checked (and the embedder built) before anything is written. An index
        that never received a chunk takes the new settings, so a failed first ingest does not
        block the corrected one. ``collection`` defaults to a name unique to this index.
        """
        path = Path(path)
        check_new_settings(embedder, chunk_tokens, overlap_tokens, collection)
        check_index_folder(path)
        if (path / MANIFEST).exists():
            return cls._reopen_for_ingest(path, embedder, chunk_tokens, overlap_tokens)
        if path.exists() and any(p.name != ".sleuth.lock" for p in path.iterdir()):
            raise InputError("folder exists and is not a sleuth index", source=str(path))
        built = make_embedder(embedder)
        index_id = uuid.uuid4().hex
        manifest = IndexManifest(
            embedder=embedder,
            chunk_tokens=chunk_tokens,
            overlap_tokens=overlap_tokens,
            chroma_url=chroma_url,
            collection=collection or f"sleuth-{index_id}",
            index_id=index_id,
            dim=built.dim,
            state="ready",
            generation=0,
            documents=0,
            chunks=0,
        )
        existed = path.exists()
        try:
            with folder_lock(path, "this index"):
                if (path / MANIFEST).exists():  # another process created it meanwhile
                    return cls._reopen_for_ingest(path, embedder, chunk_tokens, overlap_tokens)
                manifest.native_hybrid = create_collection(path, manifest)
                atomic_write_text(path / MANIFEST, manifest.model_dump_json(indent=2))
        except BaseException:
            if not existed and not (path / MANIFEST).exists():
                shutil.rmtree(path, ignore_errors=True)  # a failed create leaves no folder
            raise
        return cls(path, manifest, built)

    @classmethod
    def _reopen_for_ingest(
        cls, path: Path, embedder: str, chunk_tokens: int, overlap_tokens: int
    ) -> Self:
        if not os.access(path, os.W_OK):
            raise InputError("cannot write this index: the folder is read-only", source=str(path))
        if (manifest := read_manifest(path)).source is not None:
            raise read_only_error(path, manifest)
        index = cls(path, manifest)
        wanted = {"embedder": embedder, "chunk_tokens": chunk_tokens}
        wanted["overlap_tokens"] = overlap_tokens
        if index.manifest.generation == 0 and index.collection.count() == 0:
            index.manifest = index.manifest.model_copy(
                update=wanted | {"dim": None, "state": "ready", "pending": None}
            )
            return index  # never filled: the settings are still free (written by ingest)
        built = index.manifest.embedder
        if vector_space(built) != vector_space(embedder):
            raise InputError(
                f"index was built with embedder {built!r}, whose vectors {embedder!r} cannot "
                "extend or search; ingest into a new index, or use the same embedder",
                source=str(path),
            )
        if built != embedder:  # same vectors, another path (e.g. ONNX for torch): embed with it
            index._embedder = make_embedder(embedder)
        wanted.pop("embedder")
        for key, value in wanted.items():
            if getattr(index.manifest, key) != value:
                raise InputError(
                    f"index was built with {key}={getattr(index.manifest, key)!r}, not {value!r}",
                    source=str(path),
                )
        return index

    @classmethod
    def open(cls, path: str | Path, embedder: Embedder | None = None) -> Self:
        """Open a finished index for search; an interrupted ingest raises IndexIncompleteError,
        a damaged one (Chroma data missing or not matching the manifest) InputError."""
        path = Path(path)
        manifest = read_manifest(path)
        if manifest.state != "ready" and (pid := lock_holder(path)):
            raise IndexIncompleteError(
                f"{path}: an ingest is running now (pid {pid}); search it once that finishes"
            )
        if manifest.state != "ready":
            raise IndexIncompleteError(
                f"{path}: the last ingest was interrupted; run the same `sleuth ingest` again to "
                "resume it, or `sleuth ingest --repair` to roll it back"
            )
        index = cls(path, manifest, embedder)
        if index.collection.count() != manifest.chunks:
            raise InputError(
                f"damaged index: Chroma holds {index.collection.count()} chunks, the manifest "
                f"{manifest.chunks}; rebuild it with `sleuth ingest`",
                source=str(path),
            )
        index.lexical  # noqa: B018 - load or repair the lexical side now, not on first query
        return index

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            m = self.manifest  # an attached index embeds as its collection does
            self._embedder = self.collection.embedder() if m.source else make_embedder(m.embedder)
        if self._dim_checked is not self._embedder:  # once per embedder, not per query
            self._check_dim(self._embedder)
            self._dim_checked = self._embedder
        return self._embedder

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
    def lexical(self) -> LexicalIndex:
        """The lexical side, rebuilt from Chroma when its stamp does not match the manifest."""
        if self._lexical is None:
            stamp = self._stamp()
            loaded = LexicalIndex.load(self.path / "lexical")
            if loaded is None or loaded.stamp != stamp:
                loaded = self._rebuild_lexical(stamp)
            self._lexical = loaded
        return self._lexical

    @property
    def graph(self) -> CorpusGraph:
        """The corpus graph (:mod:`sleuth.index.graph`); an index built before it existed
        builds and saves it here, on first use."""
        if self._graph is None or self._graph.stamp != self.lexical.stamp:
            self._graph = open_graph(self.path / GRAPH_FOLDER, self.lexical)
        return self._graph

    def _stamp(self) -> dict:
        return {
            "generation": self.manifest.generation,
            "chunks": self.collection.count(),
            "format": LEXICAL_FORMAT,
        }

    def _rebuild_lexical(self, stamp: dict) -> LexicalIndex:
        rows: list[ChunkRow] = []
        doc_meta: dict[str, dict[str, Any]] = {}
        total, offset = self.collection.count(), 0
        while offset < total:
            got = self.collection.get(
                include=["documents", "metadatas"], limit=_PAGE, offset=offset
            )
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
                if int(meta["idx"]) == 0:
                    doc_meta[meta["doc_id"]] = document_metadata(meta)
            offset += _PAGE
        lexical = LexicalIndex.build(rows, stamp, doc_meta)
        with contextlib.suppress(OSError):  # a read-only index keeps it in memory only
            lexical.save(self.path / "lexical")
        return lexical

    # -- ingest ------------------------------------------------------------------------
    def ingest(
        self,
        docs: Sequence[Document],
        batch_size: int = INGEST_BATCH,
        progress: Progress | None = None,
    ) -> IngestResult:
        """Chunk, embed and add ``docs``, replacing earlier versions; resumable if interrupted.

        Raises:
            InputError: a bad batch size, document or embedder; checked before any write.
            BusyError: another process is writing this index.
            IndexIncompleteError: an interrupted ingest of other inputs is pending.
        """
        docs = clean_documents(docs)[0]  # lone surrogates as U+FFFD (the CLI warns of them)
        self._writable()
        with folder_lock(self.path, "this index"):
            m = self.manifest
            settings = {"embedder": vector_space(m.embedder), "chunk_tokens": m.chunk_tokens}
            settings["overlap_tokens"] = m.overlap_tokens
            fp = _fingerprint(docs, settings)
            if m.state == "ingesting" and m.pending != fp:
                raise IndexIncompleteError(
                    f"{self.path}: an interrupted ingest of other inputs is pending; rerun it "
                    "with the same inputs to resume, or use --repair to roll it back"
                )
            chunks = self._checked_chunks(docs, batch_size)
            dim = self.embedder.dim
            dates = sorted(set(m.date_fields) | date_fields(docs))
            atomic_write_text(self.path / "pending.json", json.dumps([d.id for d in docs]))
            self._write_manifest(state="ingesting", pending=fp, dim=dim, date_fields=dates)
            todo = self._changed(chunks)
            self._add(todo, batch_size, progress, total=len(chunks), done=len(chunks) - len(todo))
            self._delete_stale([d.id for d in docs], {c.id for c in chunks})
            return self._finish(len(docs), len(chunks), skipped=len(chunks) - len(todo))

    def _checked_chunks(self, docs: Sequence[Document], batch_size: int) -> list[Chunk]:
        """The chunks to store, after every check Chroma would otherwise fail mid-ingest."""
        check_ingest_inputs(docs, batch_size, self.client.get_max_batch_size())
        m = self.manifest
        chunks = [c for d in docs for c in chunk_document(d, m.chunk_tokens, m.overlap_tokens)]
        for c in chunks:
            c.metadata = {**c.metadata, "doc_id": c.doc_id, "idx": c.idx, "tokens": c.tokens}
        return chunks

    def _changed(self, chunks: list[Chunk]) -> list[Chunk]:
        """Chunks not already stored with the same content (a resumed or repeated ingest)."""
        stored: dict[str, str | None] = {}
        for i in range(0, len(chunks), _PAGE):
            got = self.collection.get(
                ids=[c.id for c in chunks[i : i + _PAGE]], include=["metadatas"]
            )
            stored.update(
                {
                    cid: (meta or {}).get("sha")
                    for cid, meta in zip(got["ids"], got["metadatas"], strict=True)
                }
            )
        return [c for c in chunks if stored.get(c.id, "") != _chunk_sha(c)]

    def _add(
        self, chunks: list[Chunk], batch_size: int, progress: Progress | None, total: int, done: int
    ) -> None:
        """Embed in batches of similar length (sorted: a batch pads to its longest text) while a
        writer thread stores the previous batch, so Chroma's writes hide behind the model."""
        if progress:
            progress("embedding", done, total)
        texts = [_search_text(c) for c in chunks]
        order = sorted(range(len(chunks)), key=lambda i: len(texts[i]))
        embedder = self.embedder
        with ThreadPoolExecutor(1, thread_name_prefix="sleuth-write") as writer:
            written: Future[None] | None = None
            for i in range(0, len(order), batch_size):
                rows = order[i : i + batch_size]
                start = done

                def step(n: int) -> None:
                    nonlocal done
                    done += n
                    if progress:
                        progress("embedding", done, total)

                vectors = embedder.embed_documents(
                    [texts[j] for j in rows], batch_size=batch_size, progress=step
                )
                done = start + len(rows)  # whether or not the embedder reported its steps
                if written is not None:
                    written.result()  # one batch in flight: memory stays bounded
                written = writer.submit(self._write, [chunks[j] for j in rows], vectors)
                if progress:
                    progress("embedding", done, total)
            if written is not None:
                written.result()

    def _write(self, batch: list[Chunk], vectors: np.ndarray) -> None:
        self.collection.upsert(
            ids=[c.id for c in batch],
            embeddings=vectors,
            documents=[c.text for c in batch],
            metadatas=[{**c.metadata, "sha": _chunk_sha(c)} for c in batch],
        )

    def _delete_stale(self, doc_ids: list[str], keep: set[str]) -> None:
        """Drop the chunks of ``doc_ids`` that the new versions did not overwrite."""
        for i in range(0, len(doc_ids), 500):
            got = self.collection.get(where={"doc_id": {"$in": doc_ids[i : i + 500]}}, include=[])
            stale = [cid for cid in got["ids"] if cid not in keep]
            for j in range(0, len(stale), _PAGE):
                self.collection.delete(ids=stale[j : j + _PAGE])

    def remove_documents(self, doc_ids: Sequence[str]) -> IngestResult:
        """Delete these documents' chunks and rebuild the lexical side; ids not in the index
        are ignored.

        Raises:
            BusyError: another process is writing this index.
            IndexIncompleteError: an interrupted ingest is pending (resume or repair it first).
        """
        self._writable()
        with folder_lock(self.path, "this index"):
            if self.manifest.state != "ready":
                raise IndexIncompleteError(
                    f"{self.path}: an interrupted ingest is pending; resume it or use --repair"
                )
            self._delete_stale(list(doc_ids), set())
            return self._finish(0, 0, skipped=0)

    def _finish(self, n_docs: int, n_chunks: int, skipped: int) -> IngestResult:
        generation = self.manifest.generation + 1
        self.manifest.generation = generation
        self._lexical = self._rebuild_lexical(self._stamp())
        self._graph = open_graph(self.path / GRAPH_FOLDER, self._lexical)
        save_fields(self.path, self.describe_now())
        docs_total = len(self._lexical.rows_of_doc)
        self._write_manifest(
            state="ready",
            pending=None,
            documents=docs_total,
            chunks=len(self._lexical.rows),
            generation=generation,
        )
        (self.path / "pending.json").unlink(missing_ok=True)
        return IngestResult(
            documents=n_docs,
            chunks=n_chunks,
            resumed_chunks=skipped,
            index_documents=docs_total,
            index_chunks=len(self._lexical.rows),
        )

    def repair(self) -> IngestResult:
        """Roll back an interrupted ingest: drop the chunks of its documents, mark ready.
        Refused (BusyError) while another process is still ingesting."""
        self._writable()
        with folder_lock(self.path, "this index"):
            pending = self.path / "pending.json"
            doc_ids = json.loads(pending.read_text()) if pending.exists() else []
            self._delete_stale(doc_ids, set())
            result = self._finish(0, 0, 0)
            result.rolled_back_documents = len(doc_ids)
            return result

    def _writable(self) -> None:
        if self.manifest.source is not None:  # an attached index is synced, never ingested
            raise read_only_error(self.path, self.manifest)

    def _write_manifest(self, **changes: Any) -> None:
        self.manifest = self.manifest.model_copy(update=changes)
        atomic_write_text(self.path / MANIFEST, self.manifest.model_dump_json(indent=2))


def _search_text(chunk: Chunk) -> str:
    """The text a chunk is embedded from: its document title, then its text (as BM25 sees it)."""
    title = chunk.metadata.get("title") or ""
    return f"{title}\n{chunk.text}" if title else chunk.text
