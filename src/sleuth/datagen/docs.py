"""Whole documents as the pipeline sees them, rebuilt from an index's chunks.

Verification checks quotes against full document text and the distractor filter checks the
answer against it, so both need documents, not chunks. Chunks overlap, so the text is rebuilt by
dropping the part of each chunk that repeats the end of the previous one; a quote that straddles
a chunk boundary is then still found.
"""

from __future__ import annotations

import random
from functools import cached_property
from typing import Any

from sleuth.index import Index

_PAGE = 5000
OVERLAP_WINDOW = 4000
"""Characters at the end of a chunk searched for the start of the next one (the overlap is a
few dozen tokens, far less in characters even for tables)."""


class DocStore:
    """Read access to the documents of an index: text, title and metadata, cached."""

    def __init__(self, index: Index):
        self.index = index
        self._texts: dict[str, str] = {}

    @cached_property
    def metadata(self) -> dict[str, dict[str, Any]]:
        """Document id → the metadata stored with its first chunk (title included)."""
        collection = self.index.collection
        out: dict[str, dict[str, Any]] = {}
        offset = 0
        while True:
            got = collection.get(
                where={"idx": 0}, include=["metadatas"], limit=_PAGE, offset=offset
            )
            for meta in got["metadatas"]:
                out[meta["doc_id"]] = dict(meta)
            if len(got["ids"]) < _PAGE:
                return out
            offset += _PAGE

    @property
    def doc_ids(self) -> list[str]:
        return self.index.documents

    def __contains__(self, doc_id: str) -> bool:
        return bool(self.index.lexical.rows_of_doc.get(doc_id))

    def meta(self, doc_id: str) -> dict[str, Any]:
        return self.metadata.get(doc_id, {})

    def title(self, doc_id: str) -> str:
        return str(self.meta(doc_id).get("title") or "")

    def text(self, doc_id: str) -> str:
        """The document's text; an unknown id gives an empty string."""
        if doc_id not in self._texts:
            chunks = [row.text for row in self.index.document_chunks(doc_id)]
            self._texts[doc_id] = merge_chunks(chunks)
        return self._texts[doc_id]

    def sample(self, rng: random.Random, k: int, among: list[str] | None = None) -> list[str]:
        """``k`` distinct document ids drawn with ``rng`` (fewer if there are fewer)."""
        pool = sorted(among if among is not None else self.doc_ids)
        return rng.sample(pool, min(k, len(pool)))


def merge_chunks(chunks: list[str]) -> str:
    """Join consecutive overlapping chunks, dropping each one's repeat of the previous tail."""
    text = ""
    for chunk in chunks:
        text = chunk if not text else text + _new_part(text, chunk)
    return text


def _new_part(previous: str, chunk: str) -> str:
    """The part of ``chunk`` after its longest prefix that is a suffix of ``previous``
    (searched from the left, so the longest overlap wins)."""
    head = chunk[:8]
    start = previous.find(head, max(0, len(previous) - OVERLAP_WINDOW))
    while start != -1:
        if chunk.startswith(previous[start:]):
            return chunk[len(previous) - start :]
        start = previous.find(head, start + 1)
    return "\n" + chunk
