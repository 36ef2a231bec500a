"""Id -> row look-ups without a dict: the ids' sorted hashes and the row of each,
searched with ``np.searchsorted``; a hit is checked against the id itself.

Why: at 1M chunks the lexical side's two dicts (chunk id -> row, document id -> number) held
~300 MiB of private memory and took most of its open time, decoding and hashing every id.
These are two arrays of 8 bytes an id, saved with the columns (:mod:`sleuth.index.columns`) and
memory-mapped; an id's string is read from its column only to confirm a hit.
"""

from __future__ import annotations

import mmap
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Protocol

import numpy as np

ENCODING, ERRORS = "utf-8", "surrogatepass"  # as the string columns: every str round-trips
MEMO = 16_384
"""Answers an :class:`IdMap` keeps (cleared when full). The default agent looks the same few
hundred chunk and document ids up again and again within a question (~4 µs each: encode, hash,
search, compare); a kept answer is one dict read. Bounded: a few MB at most."""


class Column(Protocol):
    """What :class:`~sleuth.index.columns.StrColumn` offers here: its bytes and offsets."""

    blob: bytes | mmap.mmap
    offsets: np.ndarray

    def __getitem__(self, i: int) -> str: ...
    def __len__(self) -> int: ...


Keys = Sequence[str] | Column


def id_hash(data: bytes) -> int:
    """The CRC-32 of an id's UTF-8 bytes: the same on every machine, and ~10x cheaper than a
    64-bit digest in Python (what a look-up costs). Equal hashes (~120 pairs among 1M ids)
    cost a second comparison, never a wrong row: every hit is checked against the id."""
    return zlib.crc32(data)


def hashes_of(keys: Keys) -> np.ndarray:
    """Every key's :func:`id_hash`, in row order (from the bytes of a column: none decoded)."""
    data: Iterable[bytes]
    if (column := _column(keys)) is not None:
        ends, blob = column.offsets.tolist(), column.blob
        data = (blob[a:b] for a, b in zip(ends, ends[1:], strict=False))
    else:
        data = (keys[i].encode(ENCODING, ERRORS) for i in range(len(keys)))
    return np.fromiter(map(id_hash, data), np.int64, count=len(keys))


class IdMap(Mapping[str, int]):
    """``keys[i] -> i`` (the last row of a repeated key, as a dict built in row order)."""

    def __init__(self, keys: Keys, hashes: np.ndarray, order: np.ndarray):
        """``hashes``: sorted; ``order``: the row of each (rows of equal hashes ascending)."""
        self.keys_, self.hashes, self.order = keys, hashes, order
        self._column = _column(keys)
        self._memo: dict[str, int] = {}  # key -> row, -1 for absent (see MEMO)

    @classmethod
    def build(cls, keys: Keys) -> IdMap:
        hashes = hashes_of(keys)
        order = np.argsort(hashes, kind="stable")
        return cls(keys, hashes[order], order)

    def _find(self, key: str, data: bytes, h: int, p: int) -> int | None:
        """The highest row whose key is ``key`` among the positions from ``p`` (the first of
        hash ``h``) on with that hash: the last row of a repeated key, as a dict has it."""
        column, hashes, found, end = self._column, self.hashes, None, len(self.hashes)
        while p < end and hashes[p] == h:
            row = int(self.order[p])
            if column is None:
                same = self.keys_[row] == key
            else:
                offsets = column.offsets
                same = column.blob[offsets[row] : offsets[row + 1]] == data
            if same and (found is None or row > found):
                found = row
            p += 1
        return found

    def get(self, key: str, default: int | None = None) -> int | None:  # type: ignore[override]
        if not isinstance(key, str):
            return default
        memo = self._memo
        row = memo.get(key)
        if row is None:
            data = key.encode(ENCODING, ERRORS)
            h = id_hash(data)
            found = self._find(key, data, h, int(self.hashes.searchsorted(h)))
            row = -1 if found is None else found
            if len(memo) >= MEMO:  # dict ops are atomic: parallel tool calls share it
                memo.clear()
            memo[key] = row
        return default if row < 0 else row

    def __getitem__(self, key: str) -> int:
        row = self.get(key)
        if row is None:
            raise KeyError(key)
        return row

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key) is not None

    def rows(self, keys: Iterable[str]) -> np.ndarray:
        """The rows of ``keys`` in their order, unknown ones left out (one search for all)."""
        keys = list(keys)
        data = [k.encode(ENCODING, ERRORS) for k in keys]
        h = np.fromiter(map(id_hash, data), np.int64, len(keys))
        hashes, n = self.hashes, len(self.hashes)
        start = np.empty(len(keys), np.int64)
        by_hash = np.argsort(h)  # sorted keys search ~3x faster (each search starts nearby)
        start[by_hash] = hashes.searchsorted(h[by_hash])
        hit, twin = np.zeros(len(keys), bool), np.zeros(len(keys), bool)
        inside = start < n
        hit[inside] = hashes[start[inside]] == h[inside]
        inside = hit & (start + 1 < n)
        twin[inside] = hashes[start[inside] + 1] == h[inside]
        if self._column is None or twin.any():  # rows in memory, or a collision: one by one
            found = map(self._find, keys, data, h.tolist(), start.tolist())
            return np.fromiter((r for r in found if r is not None), np.int64)
        at = np.flatnonzero(hit)  # one candidate row each: compare its bytes with the id's
        rows = np.asarray(self.order[start[at]], np.int64)
        offsets, blob = self._column.offsets, self._column.blob
        spans = zip(offsets[rows].tolist(), offsets[rows + 1].tolist(), strict=True)
        same = [blob[a:b] == data[j] for (a, b), j in zip(spans, at.tolist(), strict=True)]
        return rows[np.asarray(same, bool)] if len(rows) else rows

    def __iter__(self) -> Iterator[str]:
        keys = self.keys_
        whole = getattr(keys, "all", None)  # a column decodes all its strings in one pass
        return iter(whole()) if whole is not None else (keys[i] for i in range(len(keys)))

    def __len__(self) -> int:
        return len(self.keys_)


def _column(keys: Keys) -> Column | None:
    return keys if hasattr(keys, "blob") and hasattr(keys, "offsets") else None
