"""Checks of an ingest's settings and inputs, run before anything is written."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from sleuth.corpus.models import Document
from sleuth.embed import parse_embedder_spec
from sleuth.errors import InputError
from sleuth.index.chroma import no_write_client
from sleuth.io import safe_text

_COLLECTION_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{1,510}[A-Za-z0-9]")


RESERVED_KEYS = frozenset({"title", "doc_id", "idx", "tokens", "sha"})
"""Metadata keys sleuth stores on every chunk itself (the title comes from the document's)."""
_INT64 = range(-(2**63), 2**63)


def check_ingest_inputs(
    docs: Sequence[Document],
    batch_size: int,
    max_batch: int | None = None,
    chroma_url: str | None = None,
) -> None:
    """Refuse what Chroma would reject mid-ingest: a batch size outside 1..``max_batch``, a
    repeated document id, metadata Chroma cannot store. Without ``max_batch``, asks a Chroma
    client that writes nothing (in-memory, or the server at ``chroma_url``), so it can run before
    an index is created."""
    if max_batch is None:
        max_batch = no_write_client(chroma_url).get_max_batch_size()
    if not 1 <= batch_size <= max_batch:
        raise InputError(f"batch size {batch_size} must be between 1 and {max_batch} (Chroma's)")
    seen: set[str] = set()
    for d in docs:
        if not d.id.strip():
            raise InputError("empty document id", source=f"document {d.id!r}")
        if d.id in seen:
            raise InputError("document id given twice", source=f"document {d.id!r}")
        seen.add(d.id)
        for key, value in d.metadata.items():
            _check_metadata(key, value, d.id)


def _check_metadata(key: object, value: object, doc_id: str) -> None:
    """One metadata entry as Chroma can store it (lists and objects are stored as text)."""
    if not isinstance(key, str) or not key.strip():
        raise InputError(f"metadata key {key!r} is empty", source=f"document {doc_id!r}")
    if key in RESERVED_KEYS or key.startswith(("chroma:", "#", "$")):
        raise InputError(
            f"metadata key {key!r} is reserved (sleuth's {sorted(RESERVED_KEYS)}, or Chroma's "
            "'chroma:', '#', '$' names); rename it",
            source=f"document {doc_id!r}",
        )
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(
            f"metadata {key!r} is {value}, which Chroma cannot store", source=f"document {doc_id!r}"
        )
    if isinstance(value, int) and not isinstance(value, bool) and value not in _INT64:
        raise InputError(
            f"metadata {key!r} is an integer beyond 64 bits; give it as a string",
            source=f"document {doc_id!r}",
        )


def clean_documents(docs: Sequence[Document]) -> tuple[list[Document], list[str]]:
    """``docs`` with every lone surrogate (``"\\ud800"``, which UTF-8 cannot encode) in an id,
    title, text or metadata replaced by U+FFFD, as model replies are; and the ids changed."""
    out: list[Document] = []
    changed: list[str] = []
    for d in docs:
        fixed = _safe_document(d)
        if fixed is not d:
            changed.append(fixed.id)
        out.append(fixed)
    return out, changed


def _safe_document(d: Document) -> Document:
    texts = [d.id, d.text, d.title or "", *d.metadata, *d.metadata.values()]
    if all(_safe(t) is t for t in texts):  # safe_text returns clean text itself
        return d
    title = None if d.title is None else safe_text(d.title)
    meta = {_safe(k): _safe(v) for k, v in d.metadata.items()}
    update = {"id": safe_text(d.id), "text": safe_text(d.text), "title": title, "metadata": meta}
    return d.model_copy(update=update)


def _safe(value: Any) -> Any:
    return safe_text(value) if isinstance(value, str) else value


def check_new_settings(
    embedder: str, chunk_tokens: int, overlap_tokens: int, collection: str | None
) -> None:
    """Settings of an ingest, checked before anything is written."""
    parse_embedder_spec(embedder)
    if chunk_tokens < 8:
        raise InputError(f"chunk tokens ({chunk_tokens}) must be at least 8")
    if overlap_tokens < 0:
        raise InputError(f"overlap tokens ({overlap_tokens}) must be at least 0")
    if collection is not None and not _COLLECTION_NAME.fullmatch(collection):
        raise InputError(
            f"collection name {collection!r}: 3-512 letters, digits, '.', '_' or '-', "
            "starting and ending with a letter or digit"
        )
