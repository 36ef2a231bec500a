"""Bring your own Chroma collection: an index whose dense side is a collection the user made.

``attach`` opens a collection in a persistent Chroma folder or on a Chroma server and builds
sleuth's lexical and grep sides (and metadata fields) from its documents, ids and metadatas;
``sync`` rebuilds them when the collection has changed (a full lexical rebuild: bm25s has no
incremental update) and reports what was added, changed (by content hash) or deleted.

The user's collection is never written to (:mod:`sleuth.index.attached` opens it: a server is
only read, a folder through a private copy made at each sync and each open).

Ids: each record is one document; its id is the document id and its one chunk is
``<id>_0``, so ``doc_id_of`` maps every chunk back to the user's id. Records without a document
(vectors only) are left out. Queries are embedded with the collection's own persisted embedding
function (chromadb's ``default`` is all-MiniLM-L6-v2, which sleuth ships: ``minilm``) or an
embedder the user names, whose dimension must match the stored vectors.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sleuth.embed import parse_embedder_spec
from sleuth.errors import InputError
from sleuth.index.attached import (
    COLLECTION_EF,
    SYNCED,
    check_chroma_folder,
    check_dim,
    chunk_of,
    collection_embedder,
    opened,
    read_synced,
    stored_dim,
    where,
)
from sleuth.index.chroma import no_write_client
from sleuth.index.fields import describe, document_metadata, save_fields
from sleuth.index.lexical import LEXICAL_FORMAT, ChunkRow, LexicalIndex
from sleuth.index.manifest import (
    MANIFEST,
    AttachedSource,
    IndexManifest,
    SyncResult,
    read_manifest,
)
from sleuth.io import LOCK_FILE, atomic_write_text, check_folder_target, folder_lock
from sleuth.tokens import count_tokens

_PAGE = 1000


# -- attach and sync -------------------------------------------------------------------
def attach(
    path: str | os.PathLike[str],
    collection: str,
    *,
    chroma_path: str | os.PathLike[str] | None = None,
    chroma_url: str | None = None,
    embedder: str | None = None,
) -> SyncResult:
    """Make ``path`` an index over an existing collection; every check runs before a write,
    and a failed attach leaves no folder.

    Raises:
        InputError: not exactly one of ``chroma_path``/``chroma_url``, a folder that is not
            Chroma's, a missing collection, an embedder of another dimension, an index there.
    """
    path = Path(path)
    if (chroma_path is None) == (chroma_url is None):
        raise InputError("give one of --chroma-path DIR or --chroma-url URL")
    if not collection:
        raise InputError("--collection: give the name of the collection to attach")
    check_folder_target(path, "--index")
    if path.exists() and any(p.name != LOCK_FILE for p in path.iterdir()):
        hint = "; to update it run `sleuth index sync`" if (path / MANIFEST).exists() else ""
        raise InputError(f"folder exists and is not empty{hint}", source=str(path))
    if embedder is not None:
        parse_embedder_spec(embedder)
    folder = None if chroma_path is None else Path(chroma_path).absolute()
    if folder is not None:
        check_chroma_folder(folder)
    if chroma_url is not None:
        # a bad URL or no server: before any write (ClientAPI's hints lack the client's close)
        no_write_client(chroma_url).close()  # type: ignore[attr-defined]
    source = AttachedSource(
        chroma_path=None if folder is None else str(folder),
        chroma_url=chroma_url,
        collection=collection,
    )
    manifest = IndexManifest(
        embedder=embedder or COLLECTION_EF,
        chunk_tokens=0,
        overlap_tokens=0,
        collection=collection,
        state="ready",
        generation=0,
        documents=0,
        chunks=0,
        source=source,
    )
    existed = path.exists()
    try:
        return _sync(path, manifest, on_open=_checked_source)
    except BaseException:
        if existed:
            for p in path.iterdir():
                shutil.rmtree(p) if p.is_dir() else p.unlink()
        else:
            shutil.rmtree(path, ignore_errors=True)
        raise


def _checked_source(collection: Any, manifest: IndexManifest) -> IndexManifest:
    """The manifest of a new attach, once the collection's embedder is built and its dimension
    checked (before anything is read)."""
    assert manifest.source is not None
    config = collection.configuration_json or {}
    space = str((config.get("hnsw") or {}).get("space") or "l2")
    source = manifest.source.model_copy(update={"space": space})
    built = collection_embedder(manifest.embedder, collection, source)
    dim = stored_dim(collection)
    check_dim(built, dim, source)
    return manifest.model_copy(update={"source": source, "dim": dim or built.dim})


def sync(path: str | os.PathLike[str]) -> SyncResult:
    """Bring an attached index up to date with its collection.

    Raises:
        InputError: not an attached index, its source gone, or the collection changed while it
            was read (nothing is written then; rerun the sync).
        BusyError: another process is writing this index.
    """
    path = Path(path)
    manifest = read_manifest(path)
    if manifest.source is None:
        raise InputError(
            "not an attached index (made by `sleuth ingest`; update it with `sleuth ingest`)",
            source=str(path),
        )
    return _sync(path, manifest)


def _sync(
    path: Path,
    manifest: IndexManifest,
    on_open: Callable[[Any, IndexManifest], IndexManifest] | None = None,
) -> SyncResult:
    source = manifest.source
    assert source is not None
    with folder_lock(path, "this index"):
        with opened(source) as (col, folder_changed):
            if on_open is not None:
                manifest = on_open(col, manifest)
            start = _ids_digest(col)
            records = read_records(col)
            if _ids_digest(col) != start or folder_changed() or len(records) != start[0]:
                raise InputError(
                    f"collection {source.collection!r} changed while it was read; nothing was "
                    "written: rerun the sync",
                    source=where(source),
                )
        old = read_synced(path)
        hashes = {rid: _record_sha(doc, meta) for rid, doc, meta in records if doc is not None}
        result = SyncResult(
            records=len(hashes),
            added=sum(rid not in old for rid in hashes),
            changed=sum(rid in old and old[rid] != h for rid, h in hashes.items()),
            deleted=sum(rid not in hashes for rid in old),
            skipped=len(records) - len(hashes),
            synced_at=datetime.now(UTC).isoformat(timespec="seconds"),
        )
        _write(path, manifest, records, hashes, result)
    return result


def _write(
    path: Path,
    manifest: IndexManifest,
    records: list[tuple[str, str | None, dict[str, Any]]],
    hashes: dict[str, str],
    result: SyncResult,
) -> None:
    """The lexical side, the hashes, the fields, then the manifest: a crash before the manifest
    leaves a lexical stamp the manifest does not match, which open reports (rerun the sync)."""
    generation = manifest.generation + 1
    rows, doc_meta = [], {}
    for rid, doc, meta in records:
        if doc is None:
            continue
        title = meta.get("title")
        rows.append(
            ChunkRow(
                chunk_of(rid),
                rid,
                0,
                doc,
                count_tokens(doc),
                title if isinstance(title, str) else "",
            )
        )
        doc_meta[rid] = document_metadata(meta)
    stamp = {"generation": generation, "chunks": len(rows), "format": LEXICAL_FORMAT}
    lexical = LexicalIndex.build(rows, stamp, doc_meta)
    lexical.save(path / "lexical")
    atomic_write_text(path / SYNCED, json.dumps(hashes, ensure_ascii=False))
    save_fields(path, describe(doc_meta.values(), []) | {"generation": generation})
    assert manifest.source is not None
    source = manifest.source.model_copy(update={"last_sync": result})
    update = {"generation": generation, "documents": len(rows), "chunks": len(rows)}
    done = manifest.model_copy(update=update | {"source": source})
    atomic_write_text(path / MANIFEST, done.model_dump_json(indent=2))


def read_records(collection: Any) -> list[tuple[str, str | None, dict[str, Any]]]:
    """Every record's (id, document, metadata), a page at a time."""
    out: list[tuple[str, str | None, dict[str, Any]]] = []
    offset = 0
    while True:
        got = collection.get(include=["documents", "metadatas"], limit=_PAGE, offset=offset)
        metas = got["metadatas"] or [None] * len(got["ids"])
        for rid, doc, meta in zip(got["ids"], got["documents"], metas, strict=True):
            out.append((rid, doc, dict(meta or {})))
        if len(got["ids"]) < _PAGE:
            return out
        offset += _PAGE


def _ids_digest(collection: Any) -> tuple[int, str]:
    """The collection's count and a hash of its sorted ids: what a sync compares before and
    after its read to see a collection that changed meanwhile."""
    n, ids, offset = collection.count(), [], 0
    while offset < n:
        ids += collection.get(include=[], limit=_PAGE, offset=offset)["ids"]
        offset += _PAGE
    return n, hashlib.sha256("\0".join(sorted(ids)).encode()).hexdigest()


def _record_sha(doc: str | None, meta: dict[str, Any]) -> str:
    payload = json.dumps([doc, meta], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha1(payload.encode()).hexdigest()
