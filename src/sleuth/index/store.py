"""The :class:`Index`: Chroma for chunks, metadata and dense vectors; bm25s beside it.

The folder's layout and manifest are in :mod:`sleuth.index.manifest`, the Chroma clients and
collection in :mod:`sleuth.index.chroma`, the checks run before any write in
:mod:`sleuth.index.ingest_checks`.

Consistency: the manifest names the published generation; an ingest writes the next one
beside it and publishes it with one manifest write, so searches see the old state or the new,
never a mix, and an interrupted update leaves the old one searchable (the design:
:mod:`sleuth.index.update`). Re-running the same ingest resumes it (rows already in Chroma are not
embedded again); ``repair()`` rolls it back instead. A first ingest marks the index
``state: ingesting`` until it is published, so an unfinished one is detected on open. Every input
is checked before the first write. Each index has its own collection, stamped with the index's
id, so two indexes on one Chroma server stay apart; a missing or foreign collection is refused,
never silently recreated empty.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Self, cast

import numpy as np

from sleuth.corpus.chunking import chunk_document
from sleuth.corpus.models import Chunk, Document
from sleuth.embed import (
    DEFAULT_EMBEDDER,
    INGEST_BATCH,
    Embedder,
    keep_queries,
    make_embedder,
    vector_space,
)
from sleuth.errors import IndexIncompleteError, InputError
from sleuth.index.attached import open_attached, read_only_error
from sleuth.index.chroma import chroma_client, create_collection, first_line, read_only_copy
from sleuth.index.fields import IndexFields, date_fields, save_fields
from sleuth.index.graph import GRAPH_FOLDER, CorpusGraph
from sleuth.index.graphupdate import next_graph
from sleuth.index.ingest_checks import check_ingest_inputs, check_new_settings, clean_documents
from sleuth.index.lexical import LEXICAL_FORMAT, LexicalIndex, Stamp
from sleuth.index.manifest import (
    ID_KEY,
    MANIFEST,
    IndexManifest,
    IngestResult,
    check_index_folder,
    read_manifest,
)
from sleuth.index.reads import IndexReads
from sleuth.index.update import (
    PENDING,
    Plan,
    chunk_sha,
    delete_keys,
    fingerprint,
    lexical_dir,
    next_lexical,
    plan_update,
    prune_lexical,
    read_back,
    read_pending,
    read_stale,
    unstored,
    write_pending,
    write_stale,
)
from sleuth.io import atomic_write_text, folder_lock, lock_holder

Progress = Callable[[str, int, int], None]  # (phase, done, total)
_PAGE = 5000


class Index(IndexReads, IndexFields):
    """A searchable corpus. Open an existing one with :meth:`open`, build with :meth:`create`;
    its metadata fields and filters come from :class:`~sleuth.index.fields.IndexFields`."""

    def __init__(self, path: Path, manifest: IndexManifest, embedder: Embedder | None = None):
        self.path = path
        self.manifest = manifest
        self._embedder: Embedder | None = embedder
        self._dim_checked: Embedder | None = None
        self.collection: Any
        if manifest.source is not None:  # a user's own collection (sleuth.index.attach)
            self.client, self.collection = open_attached(path, manifest)
        else:
            self.client = chroma_client(self._chroma_path(), manifest.chroma_url)
            self.collection = self._get_collection()
        self.native_hybrid = bool(manifest.native_hybrid)
        if manifest.source is not None or manifest.chroma_url:  # an attached collection (its own
            self.exact_rows = 0  # distance space) or a server's (one graph for every client)
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

    def _get_collection(self) -> Any:
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
        if index.collection.count() < manifest.chunks:  # more: rows of another generation
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
            made = self.collection.embedder() if m.source else make_embedder(m.embedder)
            self._embedder = cast(Embedder, made)
        if self._dim_checked is not self._embedder:  # once per embedder, not per query
            self._check_dim(self._embedder)  # and its query vectors kept from now on
            self._embedder = self._dim_checked = keep_queries(self._embedder)
        return self._embedder

    @property
    def lexical(self) -> LexicalIndex:  # type: ignore[override]  # IndexReads only declares it
        """The published lexical side; rebuilt from Chroma when missing, damaged or stale."""
        if self._lexical is None:
            stamp, loaded = self._stamp(), cast(LexicalIndex | None, None)
            with contextlib.suppress(InputError):  # damaged: derived data, rebuilt whole
                loaded = LexicalIndex.load(self.path / self.manifest.lexical_dir)
            if loaded is None or loaded.stamp != stamp:
                loaded = self._rebuild_lexical(stamp)
            self._lexical = loaded
        return self._lexical

    def _stamp(self) -> Stamp:
        m = self.manifest
        return {"generation": m.generation, "chunks": m.chunks, "format": LEXICAL_FORMAT}

    def _rebuild_lexical(self, stamp: Stamp) -> LexicalIndex:
        """Rows read back from Chroma, less those of other generations: the keys the published
        one dropped and those an unfinished update writes."""
        skip = set(read_stale(self.path, self.manifest.generation))
        if self.manifest.pending is not None:
            skip |= set(read_pending(self.path)[1])
        lexical = read_back(self.collection, skip, stamp)
        with contextlib.suppress(OSError):  # a read-only index keeps it in memory only
            lexical.save(self.path / self.manifest.lexical_dir)
        return lexical

    # -- ingest ------------------------------------------------------------------------
    def ingest(
        self,
        docs: Sequence[Document],
        batch_size: int = INGEST_BATCH,
        progress: Progress | None = None,
        *,
        delete_missing: bool = False,
    ) -> IngestResult:
        """Add new documents, replace changed ones (by id and content hash) and, with
        ``delete_missing``, remove those not given; unchanged ones are not chunked or embedded
        again. Searches see the published generation until the new one is
        (:mod:`sleuth.index.update`); resumable if interrupted.

        Raises:
            InputError: a bad batch size, document or embedder, or ``delete_missing`` on an index
                with no documents; checked before any write.
            BusyError: another process is writing this index.
            IndexIncompleteError: an interrupted ingest of other inputs is pending.
        """
        docs = clean_documents(docs)[0]  # lone surrogates as U+FFFD (the CLI warns of them)
        self._writable()
        with folder_lock(self.path, "this index"):
            m = self.manifest
            if delete_missing and not m.documents:
                raise InputError(
                    "--delete-missing: the index has no documents yet, so nothing can be "
                    "missing; ingest without it",
                    source=str(self.path),
                )
            settings = {"embedder": vector_space(m.embedder), "chunk_tokens": m.chunk_tokens}
            settings["overlap_tokens"] = m.overlap_tokens
            fp = fingerprint(docs, settings)
            if m.pending not in (None, fp):
                raise IndexIncompleteError(
                    f"{self.path}: an interrupted ingest of other inputs is pending; rerun it "
                    "with the same inputs to resume, or use --repair to roll it back"
                )
            check_ingest_inputs(docs, batch_size, self.client.get_max_batch_size())
            old = self._published()
            plan = plan_update(old, docs, self._chunks_of, delete_missing)
            dim = self.embedder.dim
            dates = sorted(set(m.date_fields) | date_fields(docs))
            write_pending(self.path, [d.id for d in docs], [k for k, _ in plan.writes])
            state = m.state if m.generation else "ingesting"  # nothing published: not searchable
            self._write_manifest(state=state, pending=fp, dim=dim, date_fields=dates)
            planned = {k for k, _ in plan.writes}
            delete_keys(self.collection, set(read_stale(self.path)) - planned, old)
            todo = unstored(self.collection, plan.writes)
            total = len(plan.writes)
            self._add(todo, batch_size, progress, total=total, done=total - len(todo))
            return self._finish(old, plan, len(docs), skipped=total - len(todo))

    def _chunks_of(self, doc: Document) -> list[Chunk]:
        """A document's chunks as stored (with sleuth's own metadata keys)."""
        m = self.manifest
        chunks = chunk_document(doc, m.chunk_tokens, m.overlap_tokens)
        for c in chunks:
            c.metadata = {**c.metadata, "doc_id": c.doc_id, "idx": c.idx, "tokens": c.tokens}
        return chunks

    def _published(self) -> LexicalIndex:
        """The published generation's lexical side (empty before the first ingest)."""
        if self.manifest.generation == 0:
            return LexicalIndex.build([], {})
        return self.lexical

    def _add(
        self,
        chunks: list[tuple[str, Chunk]],
        batch_size: int,
        progress: Progress | None,
        total: int,
        done: int,
    ) -> None:
        """Embed in batches of similar length (sorted: a batch pads to its longest text) while a
        writer thread stores the previous batch, so Chroma's writes hide behind the model."""
        if progress:
            progress("embedding", done, total)
        texts = [_search_text(c) for _, c in chunks]
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

    def _write(self, batch: list[tuple[str, Chunk]], vectors: np.ndarray) -> None:
        self.collection.upsert(
            ids=[k for k, _ in batch],
            embeddings=vectors,
            documents=[c.text for _, c in batch],
            metadatas=[{**c.metadata, "sha": chunk_sha(c)} for _, c in batch],
        )

    def remove_documents(self, doc_ids: Sequence[str]) -> IngestResult:
        """Delete these documents (a new generation without them); ids not in the index are
        ignored.

        Raises:
            BusyError: another process is writing this index.
            IndexIncompleteError: an interrupted ingest is pending (resume or repair it first).
        """
        self._writable()
        with folder_lock(self.path, "this index"):
            if self.manifest.pending is not None or self.manifest.state != "ready":
                raise IndexIncompleteError(
                    f"{self.path}: an interrupted ingest is pending; resume it or use --repair"
                )
            old = self._published()
            delete_keys(self.collection, read_stale(self.path), old)
            plan = plan_update(old, [], self._chunks_of, remove=doc_ids)
            return self._finish(old, plan, 0, skipped=0)

    def _finish(self, old: LexicalIndex, plan: Plan, n_docs: int, skipped: int) -> IngestResult:
        """Write the next generation's lexical side and fields, then name it in the manifest:
        the one switch readers see. The rows it dropped stay in Chroma until the next update."""
        generation = self.manifest.generation + 1
        lexical = next_lexical(old, plan, {"generation": generation, "format": LEXICAL_FORMAT})
        lexical.stamp["chunks"] = len(lexical.rows)
        folder = lexical_dir(generation)
        lexical.save(self.path / folder)
        write_stale(self.path, generation, plan.dropped)
        previous = self.manifest.lexical_dir
        self.manifest.generation = generation
        self._lexical = lexical
        self._graph = next_graph(self.path / GRAPH_FOLDER, lexical, fresh=plan.doc_sha)
        save_fields(self.path, self.describe_now())
        self._write_manifest(
            state="ready",
            pending=None,
            documents=len(lexical.rows_of_doc),
            chunks=len(lexical.rows),
            generation=generation,
            lexical_dir=folder,
        )
        (self.path / PENDING).unlink(missing_ok=True)
        prune_lexical(self.path, {folder, previous})
        return IngestResult(
            documents=n_docs,
            chunks=plan.chunks_given(old),
            resumed_chunks=skipped,
            embedded_chunks=len(plan.writes) - skipped,
            index_documents=len(lexical.rows_of_doc),
            index_chunks=len(lexical.rows),
            added=len(plan.added),
            replaced=len(plan.replaced),
            unchanged=len(plan.unchanged),
            deleted=len(plan.deleted),
        )

    def repair(self) -> IngestResult:
        """Roll back an interrupted ingest: drop the rows it wrote (the published generation's
        are kept), mark ready. Refused (BusyError) while another process is still ingesting."""
        self._writable()
        with folder_lock(self.path, "this index"):
            old = self._published()
            doc_ids, keys = read_pending(self.path)
            delete_keys(self.collection, keys + read_stale(self.path), old)
            for i in range(0, len(doc_ids), 500):  # rows of an older ingest that kept no keys
                got = self.collection.get(
                    where={"doc_id": {"$in": doc_ids[i : i + 500]}}, include=[]
                )
                delete_keys(self.collection, got["ids"], old)
            result = self._finish(old, Plan(), 0, 0)
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
