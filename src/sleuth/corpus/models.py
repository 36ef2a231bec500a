"""Documents and chunks: the records every reader produces and the index stores."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from typing import Any

from pydantic import BaseModel, Field

_CHUNK_SUFFIX = re.compile(r"_(\d+)$")


class Document(BaseModel):
    """One source document. ``id`` must be unique within a corpus. ``metadata`` values are
    scalars, or ``date``/``datetime`` for dates (stored as epoch seconds: :func:`to_epoch`)."""

    id: str
    text: str
    title: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class Chunk(BaseModel):
    """A token-bounded piece of a document; ``id`` is ``<doc_id>_<idx>``."""

    id: str
    doc_id: str
    idx: int
    text: str
    tokens: int
    metadata: dict[str, Any] = Field(default_factory=dict)


def chunk_id(doc_id: str, idx: int) -> str:
    return f"{doc_id}_{idx}"


def doc_id_of(chunk_or_doc_id: str) -> str:
    """Strip a trailing ``_<idx>``; document-level metrics compare these."""
    return _CHUNK_SUFFIX.sub("", chunk_or_doc_id)


def to_epoch(value: date | datetime) -> int:
    """Seconds since 1970 (UTC) of a date (its midnight) or a datetime (naive ones are UTC): how
    the index stores a date, so that Chroma can compare it with ``$gt``/``$lt``."""
    if not isinstance(value, datetime):
        value = datetime(value.year, value.month, value.day)
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return int(value.timestamp())
