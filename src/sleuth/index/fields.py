"""The corpus's metadata fields: their types, value counts and ranges (``describe_corpus``).

Computed from every document's metadata when an ingest finishes and cached in the index folder
(``fields.json``, :data:`FIELDS`), so the tool answers without a scan. Per-chunk bookkeeping keys
(:data:`INTERNAL`) are not fields: they cannot be filtered on.
"""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np

from sleuth.corpus.models import Document
from sleuth.index.lexical import LexicalIndex
from sleuth.index.manifest import IndexManifest
from sleuth.index.where import DATE, Where, check_where, from_epoch, matches
from sleuth.io import atomic_write_text

FIELDS = "fields.json"
FIELDS_FORMAT = 1
INTERNAL = frozenset({"doc_id", "idx", "tokens", "sha"})
"""Chunk keys sleuth stores for itself: not metadata a filter may name."""
SMALL_VOCABULARY = 25
"""A string field with at most this many distinct values lists them all with their counts."""
TOP_VALUES = 10
"""A larger vocabulary lists its most common values only."""


def document_metadata(chunk_meta: Mapping[str, Any]) -> dict[str, Any]:
    """A chunk's stored metadata without sleuth's own keys: its document's fields."""
    return {k: v for k, v in chunk_meta.items() if k not in INTERNAL}


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    return "string"


def field_type(values: list[Any], is_date: bool) -> str:
    """``string``, ``int``, ``float``, ``bool``, ``date`` or ``mixed`` (values of several)."""
    kinds = {_kind(v) for v in values}
    if kinds <= {"int", "float"} and len(kinds) == 2:
        return "float"
    if len(kinds) != 1:
        return "mixed"
    (kind,) = kinds
    return DATE if is_date and kind == "int" else kind


def describe(docs: Iterable[Mapping[str, Any]], date_fields: Iterable[str]) -> dict[str, Any]:
    """What ``describe_corpus`` returns: per field its type, how many documents have it, and
    its value counts (small vocabularies; the most common ones otherwise) or its range."""
    dates = set(date_fields)
    values: dict[str, list[Any]] = {}
    n_docs = 0
    for meta in docs:
        n_docs += 1
        for key, value in meta.items():
            values.setdefault(key, []).append(value)
    fields: dict[str, Any] = {}
    for key in sorted(values):
        seen = values[key]
        kind = field_type(seen, key in dates)
        entry: dict[str, Any] = {"type": kind, "documents": len(seen)}
        if kind in ("int", "float", DATE):
            low, high = min(seen), max(seen)
            entry |= {"min": low, "max": high}
            if kind == DATE:
                entry |= {"min": from_epoch(low), "max": from_epoch(high)}
        else:
            counts = Counter(v if isinstance(v, str) else json.dumps(v) for v in seen)
            entry["distinct"] = len(counts)
            shown = counts.most_common(None if len(counts) <= SMALL_VOCABULARY else TOP_VALUES)
            entry["values" if len(counts) <= SMALL_VOCABULARY else "top_values"] = dict(shown)
        fields[key] = entry
    return {"format": FIELDS_FORMAT, "documents": n_docs, "fields": fields}


def field_types(described: Mapping[str, Any]) -> dict[str, str]:
    """Field name -> type, from :func:`describe`'s output: what a ``where`` may name."""
    return {name: entry["type"] for name, entry in described["fields"].items()}


def date_fields(docs: Iterable[Document]) -> set[str]:
    """Metadata keys that hold a date in some document (stored as epoch seconds)."""
    return {k for d in docs for k, v in d.metadata.items() if isinstance(v, date)}


class IndexFields:
    """The metadata side of :class:`~sleuth.index.Index`: its fields, described and cached, and
    ``where`` filters checked against them and evaluated over the lexical side's documents."""

    path: Path
    manifest: IndexManifest
    lexical: LexicalIndex
    _fields: dict[str, Any] | None = None

    def describe(self) -> dict[str, Any]:
        """The metadata fields (:func:`describe`), cached at ingest and stamped with the ingest
        generation; an index whose cache is missing or stale (made before the cache existed, or
        a crash between the lexical side and the cache) computes it once, keeping it if it can."""
        if self._fields is None:
            cached = load_fields(self.path)
            if cached is None or cached.get("generation") != self.manifest.generation:
                cached = self.describe_now()
                with contextlib.suppress(OSError):
                    save_fields(self.path, cached)
            self._fields = cached
        return self._fields

    def describe_now(self) -> dict[str, Any]:
        """The description computed from the lexical side's documents (what ingest caches)."""
        self._fields = None
        described = describe(self.lexical.doc_meta.values(), self.manifest.date_fields)
        return described | {"generation": self.manifest.generation}

    def check_where(self, where: Any) -> Where:
        """``where`` checked against the grammar and this corpus's fields (InputError if not)."""
        return check_where(where, field_types(self.describe()))

    def rows_matching(self, where: Where) -> np.ndarray:
        """Mask of the lexical side's rows whose document passes a checked ``where`` (a copy:
        callers mask it). Kept on the lexical side (``LexicalIndex.kept_masks``): each is a pass
        over every document's metadata in Python (0.2 s at 100k documents) and an agent's
        searches repeat their filter."""
        lexical = self.lexical
        mask = lexical.kept_masks.get(
            json.dumps(where, sort_keys=True),
            lambda: lexical.rows_where(lambda meta: matches(where, meta)),
        )
        return mask.copy()


def save_fields(folder: Path, described: Mapping[str, Any]) -> None:
    atomic_write_text(folder / FIELDS, json.dumps(described, ensure_ascii=False, indent=1))


def load_fields(folder: Path) -> dict[str, Any] | None:
    """The cached description; None when missing, unreadable or of another format."""
    try:
        data = json.loads((folder / FIELDS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    ok = isinstance(data, dict) and data.get("format") == FIELDS_FORMAT
    return data if ok else None
