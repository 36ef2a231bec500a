"""Token-aware chunking that keeps chunk texts verbatim slices of the document.

Texts are cut at paragraph and sentence ends, packed greedily up to ``max_tokens``
(o200k_base by default) and consecutive chunks share about ``overlap_tokens`` of trailing
sentences. Because every chunk is ``doc.text[start:end]``, a quote found in a chunk is a
quote found in the document.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import date
from typing import Any

from sleuth.corpus.models import Chunk, Document, chunk_id, to_epoch
from sleuth.errors import ConfigError
from sleuth.tokens import TokenCounter, default_counter

_SEGMENT_END = re.compile(r"\n\s*\n|(?<=[.!?;:])\s+|(?<=[。！？；])\s*|\n")
_WORD_END = re.compile(r"\s+")


def _spans(
    text: str, pattern: re.Pattern[str], start: int = 0, end: int | None = None
) -> list[tuple[int, int]]:
    """Split ``text[start:end]`` after each separator match; separators stay with the left piece."""
    end = len(text) if end is None else end
    spans, cur = [], start
    for m in pattern.finditer(text, start, end):
        if m.end() > cur:
            spans.append((cur, m.end()))
            cur = m.end()
    if cur < end:
        spans.append((cur, end))
    return spans


def _hard_split(
    text: str, start: int, end: int, max_tokens: int, counter: TokenCounter
) -> list[tuple[int, int, int]]:
    """Split a span with no usable break (one giant word) by characters, with token counts.

    Each piece is sized from the previous one's length and the token density of a probe no
    longer than twice that, then shrunk until it fits; only a bounded window is ever counted,
    so a megabyte of base64 or an unbroken CJK paragraph costs linear time."""
    out, cur, guess = [], start, max_tokens * 4
    while cur < end:
        step = min(end - cur, 2 * guess)
        n = counter.count(text[cur : cur + step])
        if n > max_tokens:
            step = max(1, step * max_tokens // n)
            n = counter.count(text[cur : cur + step])
            while n > max_tokens:  # a single character is at most 4 tokens
                step = max(1, step - max(1, step // 16))
                n = counter.count(text[cur : cur + step])
        out.append((cur, cur + step, n))
        cur, guess = cur + step, step
    return out


def _segments(text: str, max_tokens: int, counter: TokenCounter) -> list[tuple[int, int, int]]:
    """Sentence-sized spans with token counts; spans over ``max_tokens`` are split further."""
    out: list[tuple[int, int, int]] = []
    for s, e in _spans(text, _SEGMENT_END):
        n = counter.count(text[s:e])
        if n <= max_tokens:
            out.append((s, e, n))
            continue
        for ws, we in _spans(text, _WORD_END, s, e):
            wn = counter.count(text[ws:we])
            if wn <= max_tokens:
                out.append((ws, we, wn))
            else:
                out.extend(_hard_split(text, ws, we, max_tokens, counter))
    return out


def _pack(
    segments: list[tuple[int, int, int]], max_tokens: int, overlap: int
) -> Iterator[tuple[int, int]]:
    """Greedy packing by estimated tokens; the next chunk restarts ``overlap`` tokens back."""
    i = 0
    while i < len(segments):
        total, j = 0, i
        while j < len(segments) and (j == i or total + segments[j][2] <= max_tokens):
            total += segments[j][2]
            j += 1
        yield segments[i][0], segments[j - 1][1]
        if j >= len(segments):
            return
        back, k = 0, j
        while k - 1 > i and back + segments[k - 1][2] <= overlap:
            k -= 1
            back += segments[k][2]
        i = k


def chunk_document(
    doc: Document,
    max_tokens: int = 512,
    overlap_tokens: int = 48,
    counter: TokenCounter | None = None,
) -> list[Chunk]:
    """Split one document into chunks of at most ``max_tokens`` tokens (exact count)."""
    if max_tokens < 8:
        raise ConfigError("max_tokens must be at least 8")
    counter = counter or default_counter()
    text = doc.text
    chunks: list[Chunk] = []
    for start, end in _pack(_segments(text, max_tokens, counter), max_tokens, overlap_tokens):
        piece = text[start:end].strip()
        if not piece:
            continue
        n = counter.count(piece)
        if n > max_tokens:  # token merges across segment borders made the estimate short
            sub = Document(id=doc.id, text=piece)
            parts = [
                c.text for c in chunk_document(sub, max_tokens - (n - max_tokens) - 1, 0, counter)
            ]
        else:
            parts = [piece]
        for part in parts:
            idx = len(chunks)
            meta = {"title": doc.title or "", **_flat(doc.metadata)}
            chunks.append(
                Chunk(
                    id=chunk_id(doc.id, idx),
                    doc_id=doc.id,
                    idx=idx,
                    text=part,
                    tokens=counter.count(part),
                    metadata=meta,
                )
            )
    return chunks


def _flat(metadata: dict[str, Any]) -> dict[str, Any]:
    """Chroma metadata values must be scalars: dates become epoch seconds, other values strings."""
    return {k: _scalar(v) for k, v in metadata.items() if v is not None}


def _scalar(value: Any) -> str | int | float | bool:
    if isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, date):  # datetime too
        return to_epoch(value)
    return str(value)
