"""The index folder's records: the manifest (``sleuth-index.json``) and its reader, and what an
ingest reports.

Layout of an index folder::

    sleuth-index.json   manifest (:class:`IndexManifest`): embedder, chunking, collection, state
    chroma/             Chroma PersistentClient data (absent when using a Chroma server)
    lexical-<N>/        generation N's chunk texts + BM25 + grep + documents' metadata and hashes
                        (``lexical/`` in older indexes; the manifest names the published one)
    graph/              the corpus graph: names shared between documents (derived; rebuilt when stale)
    fields.json         the metadata fields described (``describe_corpus``; written by ingest)
    synced.json         an attached index only: each synced record's id and content hash
    pending.json        doc ids and Chroma keys of an ingest in progress (for resume and repair)
    stale.json          Chroma keys the last update dropped, deleted by the next one
    .sleuth.lock        one writer at a time (see :func:`sleuth.io.folder_lock`)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final, Literal

from pydantic import BaseModel, Field, ValidationError

from sleuth.errors import InputError

MANIFEST = "sleuth-index.json"
SCHEMA_VERSION: Final = 1
LEGACY_COLLECTION = "sleuth_chunks"
"""The collection every index used before each got its own; old manifests still name it."""
ID_KEY = "sleuth_index_id"
"""Collection metadata key holding the id of the index that made it."""


class SyncResult(BaseModel):
    """What one ``sleuth index attach``/``sync`` read from the user's collection."""

    schema_version: Literal[1] = 1
    records: int
    """Records in the collection with a document (the index's documents and chunks)."""
    added: int
    changed: int
    """Records whose document or metadata hash differs from the last sync's."""
    deleted: int
    skipped: int = 0
    """Records without a document (vectors only): nothing to search lexically, so left out."""
    synced_at: str


class AttachedSource(BaseModel):
    """The user's Chroma collection an attached index mirrors (read, never written)."""

    chroma_path: str | None = None
    """Absolute path of a persistent Chroma folder, or None for a server."""
    chroma_url: str | None = None
    collection: str
    space: str = "l2"
    """The collection's HNSW distance (``l2``, ``cosine``, ``ip``): how its distances become
    similarities."""
    last_sync: SyncResult | None = None


class IndexManifest(BaseModel):
    """``sleuth-index.json``. Fields added after schema 1 have defaults, so older manifests load."""

    schema_version: Literal[1] = SCHEMA_VERSION
    embedder: str
    chunk_tokens: int
    overlap_tokens: int
    chroma_url: str | None = None
    collection: str = LEGACY_COLLECTION
    index_id: str | None = None
    """Also stamped on the collection; None for indexes made before collections were stamped."""
    dim: int | None = None
    """Vector dimension of the embedder; None for older indexes (read from a stored vector)."""
    native_hybrid: bool | None = None
    state: Literal["ready", "ingesting"]
    generation: int
    documents: int
    chunks: int
    pending: str | None = None
    """Fingerprint of an ingest in progress (or interrupted); the published generation stays
    readable meanwhile (:mod:`sleuth.index.update`)."""
    lexical_dir: str = "lexical"
    """The published generation's lexical folder (written before the manifest names it)."""
    date_fields: list[str] = Field(default_factory=list)
    """Metadata fields that hold dates (stored as epoch seconds; ``describe_corpus`` shows them
    as ISO dates and a ``where`` may name them so)."""
    source: AttachedSource | None = None
    """Set on an attached index (:mod:`sleuth.index.attach`): its dense side is this collection;
    ``embedder`` is ``collection`` (the collection's own embedding function) or a spec."""


class IngestResult(BaseModel):
    """What one ingest (or repair) did, and the index's size after it."""

    schema_version: Literal[1] = 1
    documents: int
    chunks: int
    resumed_chunks: int
    """Chunks already in the index with the same content, so not embedded again."""
    index_documents: int
    index_chunks: int
    rolled_back_documents: int = 0
    embedded_chunks: int = 0
    """Chunks embedded and written by this ingest (new or changed, not already stored)."""
    added: int = 0
    """Documents new to the index."""
    replaced: int = 0
    """Documents already indexed whose content (text, title or metadata) changed."""
    unchanged: int = 0
    """Documents given again as they are (not chunked or embedded again)."""
    deleted: int = 0
    """Documents removed (``delete_missing``, or :meth:`~sleuth.index.Index.remove_documents`)."""


def check_index_folder(path: Path) -> None:
    """An index path that is a file, or lies under one, cannot hold an index."""
    for p in (path, *path.absolute().parents):
        if p.exists():
            if not p.is_dir():
                raise InputError(f"{p} is a file, not a folder", source=str(path))
            return


def read_manifest(path: Path) -> IndexManifest:
    check_index_folder(path)
    try:
        data = json.loads((path / MANIFEST).read_text())
    except FileNotFoundError:
        raise InputError(
            "not a sleuth index (no sleuth-index.json); build one with `sleuth ingest`",
            source=str(path),
        ) from None
    except (OSError, ValueError, RecursionError) as e:
        raise InputError(f"unreadable index manifest: {e}", source=str(path)) from None
    if not isinstance(data, dict):
        raise InputError("index manifest is not a JSON object", source=str(path))
    if data.get("schema_version") != SCHEMA_VERSION:
        raise InputError(
            f"index schema {data.get('schema_version')} is not {SCHEMA_VERSION}",
            source=str(path),
        )
    try:
        return IndexManifest.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(str(x) for x in err["loc"])
        raise InputError(f"index manifest: {field}: {err['msg']}", source=str(path)) from None
