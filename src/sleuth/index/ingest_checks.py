"""Checks of an ingest's settings and inputs, run before anything is written."""

from __future__ import annotations

import re
from collections.abc import Sequence

from sleuth.corpus.models import Document
from sleuth.embed import parse_embedder_spec
from sleuth.errors import InputError
from sleuth.index.chroma import no_write_client

_COLLECTION_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{1,510}[A-Za-z0-9]")


def check_ingest_inputs(
    docs: Sequence[Document],
    batch_size: int,
    max_batch: int | None = None,
    chroma_url: str | None = None,
) -> None:
    """Refuse what Chroma would reject mid-ingest: a batch size outside 1..``max_batch``, a
    repeated document id, an empty metadata key. Without ``max_batch``, asks a Chroma client
    that writes nothing (in-memory, or the server at ``chroma_url``), so it can run before an
    index is created."""
    if max_batch is None:
        max_batch = no_write_client(chroma_url).get_max_batch_size()
    if not 1 <= batch_size <= max_batch:
        raise InputError(f"batch size {batch_size} must be between 1 and {max_batch} (Chroma's)")
    seen: set[str] = set()
    for d in docs:
        if d.id in seen:
            raise InputError("document id given twice", record=d.id)
        seen.add(d.id)
        bad = [k for k in d.metadata if not isinstance(k, str) or not k.strip()]
        if bad:
            raise InputError(f"metadata key {bad[0]!r} is empty", record=d.id)


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
