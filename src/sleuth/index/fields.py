"""The corpus's metadata fields: their types, value counts and ranges (``describe_corpus``).

Computed from every document's metadata when an ingest finishes and cached in the index folder
(``fields.json``, :data:`FIELDS`), so the tool answers without a scan. Per-chunk bookkeeping keys
(:data:`INTERNAL`) are not fields: they cannot be filtered on.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from sleuth.index.where import DATE, from_epoch
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
