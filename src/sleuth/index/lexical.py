"""The lexical side of the index: chunk texts in memory plus a bm25s BM25 index.

Chroma's embedded mode has no BM25, so this lives beside it. It is derived data: it is
rebuilt from Chroma whenever its stamp (ingest generation + chunk count) does not match,
which is how a crash between the two writes is repaired on the next open.

Why bm25s over tantivy (measured in ``benchmarks/bm25_choice.py``): both answer in about a
millisecond, but bm25s returns the full score vector, so excluding thousands of seen ids is
an exact mask applied before top-k (the search digs deeper instead of coming back empty);
it is a small numpy/scipy package whose index is plain ``.npy`` files.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, overload

import bm25s
import numpy as np
import Stemmer
from bm25s.stopwords import STOPWORDS_EN

from sleuth.index.columns import (
    HEADER,
    ChunkColumns,
    RowMaps,
    RowsOfDoc,
    add_maps,
    damaged,
    read_columns,
    write_columns,
)
from sleuth.index.columns import ChunkRow as ChunkRow  # re-exported (its home before)
from sleuth.index.grepindex import GrepIndex
from sleuth.index.idmap import IdMap
from sleuth.io import atomic_write_text
from sleuth.recent import Recent

_STEMMER = Stemmer.Stemmer("english")
_STOPWORDS = frozenset(STOPWORDS_EN)  # what ``bm25s.tokenize(stopwords="en")`` drops
_WORDS = re.compile(r"(?u)\b\w\w+\b").findall  # bm25s's (and scikit-learn's) token pattern
RECENT_SCORES = 8  # BM25 score vectors kept (float32: 4 MB each at 1M chunks)
MASKS_KEPT = 8
"""Filter masks kept per lexical side: one agent run repeats its filter on every search."""
LEXICAL_FORMAT = 5  # 2: BM25 over title + text; 3: documents' metadata; 4: content hashes;
# 5: rows as memory-mapped columns (:mod:`sleuth.index.columns`); the id look-ups they gained
# later (:mod:`sleuth.index.idmap`) are added to a side saved without them on first open
JSONL_FORMAT = 4  # the last format of JSON lines, read once and rewritten as columns
Stamp = dict[str, int]
"""What a saved lexical side (and the graph) was built from: ``generation``, ``chunks``,
``format``; one that differs from the manifest's is rebuilt."""


def tokenize(texts: list[str]) -> list[list[str]]:
    """Lower-case word tokens, English stop words removed, Snowball-stemmed: exactly what
    ``bm25s.tokenize(texts, stopwords="en", stemmer=..., return_ids=False)`` returns (the
    index was built with it), without its per-call cost (a vocabulary, a stop-word set per
    text, progress bars: ~90 µs for one query against ~10 µs here; the agent tokenizes each
    query, title and name it scores)."""
    stem, stop = _STEMMER.stemWords, _STOPWORDS
    return [stem([w for w in _WORDS(text.lower()) if w not in stop]) for text in texts]


SCORE_DECIMALS = 4
"""Scores are compared at this precision: float32 BM25 sums differ in their last bits between
machines (summation order, SIMD), and such noise must not reorder tied hits."""


def rank_scores(scores: np.ndarray, k: int, tiebreak: np.ndarray | None = None) -> np.ndarray:
    """Indices of the top ``k`` positive ``scores``, best first, ties (at ``SCORE_DECIMALS``)
    broken by ascending ``tiebreak`` (default: the index itself; pass the rank of each id to
    break them by id), so every machine stores the same order."""
    positive = np.flatnonzero(scores > 0)
    if 0 < k < len(positive):  # sort only the rows that can round into the top k: at 1M rows a
        values = scores[positive]  # common word matches most of them
        kth = np.partition(values, len(values) - k)[len(values) - k]
        positive = positive[values >= kth - 2 * 10.0**-SCORE_DECIMALS]  # rounding: half a unit
    rounded = np.round(scores[positive].astype(np.float64), SCORE_DECIMALS)
    second = positive if tiebreak is None else tiebreak[positive]
    return positive[np.lexsort((second, -rounded))[:k]]


@dataclass
class LexicalIndex:
    rows: Sequence[ChunkRow]
    """A list when built; :class:`~sleuth.index.columns.ChunkColumns` (mapped) when loaded."""
    stamp: Stamp
    retriever: bm25s.BM25 | None = None
    grep_index: GrepIndex | None = None
    doc_meta: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    """Document id -> its metadata fields (what ``where`` filters read on this side)."""
    doc_sha: Mapping[str, str] = field(default_factory=dict)
    """Document id -> hash of the document as ingested (an unchanged one is not chunked again)."""
    row_of: Mapping[str, int] = field(init=False)  # chunk id → row (mapped look-up when loaded)
    rows_of_doc: RowsOfDoc = field(init=False)  # document → its rows in chunk order
    doc_number: Mapping[str, int] = field(init=False)  # document → dense 0-based number
    doc_of_row: np.ndarray = field(init=False)  # row → its document's number
    keyed: dict[str, int] = field(init=False)  # Chroma key → row, where the key is not the id
    _recent: Recent[tuple[str, ...], np.ndarray] = field(init=False, repr=False)
    kept_masks: Recent[str, np.ndarray] = field(init=False, repr=False)
    """Row masks of ``where`` filters by key (``IndexFields.rows_matching``): an ingest makes a
    new side, so they never outlive the metadata they were computed on."""
    _shares: dict[str, float] = field(init=False, repr=False)
    kept_best: Recent[str, tuple[np.ndarray, np.ndarray] | None] = field(init=False, repr=False)
    """Per question, each document's best chunk score and those sorted (``ranking.evidence``),
    kept with the side they were computed on as the masks are."""

    def __post_init__(self) -> None:
        self._recent, self._shares = Recent(RECENT_SCORES), {}
        self.kept_masks = Recent(MASKS_KEPT)
        self.kept_best = Recent(RECENT_SCORES)
        maps = RowMaps.of(self.rows)
        self.row_of, self.keyed, self.doc_number = maps.row_of, maps.keyed, maps.doc_number
        self.doc_of_row = maps.doc_of_row
        self.rows_of_doc = RowsOfDoc(self.doc_number, maps.doc_of_row, maps.idx)

    @property
    def texts(self) -> Sequence[str]:
        """The chunk texts by row, without making a :class:`ChunkRow` each (grep's scan)."""
        rows = self.rows
        return rows.text if isinstance(rows, ChunkColumns) else _Texts(rows)

    def title_of(self, doc_id: str) -> str:
        """A document's title (its first chunk's; "" for an unknown id), decoding that one row
        rather than all of the document's."""
        rows = self.rows_of_doc.get(doc_id)
        return self.rows[rows[0]].title if rows else ""

    def row_of_key(self, key: str) -> int | None:
        """The row stored in Chroma under ``key``; None for a row of another generation."""
        i = self.row_of.get(key)
        return i if i is not None and not self.rows[i].key else self.keyed.get(key)

    def key_of(self, chunk_id: str) -> str:
        """The Chroma id of a live chunk (its own id unless written beside an older version)."""
        i = self.row_of.get(chunk_id)
        return chunk_id if i is None else (self.rows[i].key or chunk_id)

    @classmethod
    def build(
        cls,
        rows: list[ChunkRow],
        stamp: Stamp,
        doc_meta: dict[str, dict[str, Any]] | None = None,
        doc_sha: dict[str, str] | None = None,
        previous: tuple[LexicalIndex, Collection[str]] | None = None,
    ) -> LexicalIndex:
        """The lexical side of ``rows``; ``previous``: the generation they update and the
        documents it changed or dropped (its other rows' grep postings are moved, not read)."""
        rows = sorted(rows, key=lambda r: (r.doc_id, r.idx))
        retriever = None
        tokens = tokenize([r.search_text for r in rows]) if rows else []
        if any(tokens):  # text of stop words and one-letter words only: no lexical side
            retriever = bm25s.BM25()
            retriever.index(tokens, show_progress=False)
        texts = [r.text for r in rows]
        if previous is None:
            grep_index = GrepIndex.build(texts)
        else:
            old, changed = previous
            sources = [-1 if r.doc_id in changed else old.row_of.get(r.id, -1) for r in rows]
            grep_index = old.grep.updated(np.asarray(sources, dtype=np.int64), texts)
        return cls(
            rows=rows,
            stamp=stamp,
            retriever=retriever,
            grep_index=grep_index,
            doc_meta=doc_meta or {},
            doc_sha=doc_sha or {},
        )

    def rows_where(self, keep_doc: Callable[[dict[str, Any]], bool]) -> np.ndarray:
        """Boolean mask over rows: True where the row's document metadata passes ``keep_doc``."""
        docs = np.fromiter(
            (keep_doc(self.doc_meta.get(d, {})) for d in self.rows_of_doc),
            dtype=bool,
            count=len(self.rows_of_doc),
        )
        return docs[self.doc_of_row] if len(self.rows) else np.zeros(0, dtype=bool)

    @property
    def grep(self) -> GrepIndex:
        """Postings for grep over chunk texts; built here when not saved (older indexes)."""
        if self.grep_index is None or self.grep_index.n_rows != len(self.rows):
            self.grep_index = GrepIndex.build([r.text for r in self.rows])
        return self.grep_index

    def search(
        self, query: str, k: int, exclude_rows: np.ndarray | None = None
    ) -> list[tuple[str, float]]:
        """Top-``k`` chunks by BM25 with a positive score, never one of ``exclude_rows``."""
        scores = self.scores(query)
        if scores is None:
            return []
        if exclude_rows is not None and len(exclude_rows):
            scores[exclude_rows] = 0.0
        top = rank_scores(scores, k)  # rows are in (doc_id, idx) order: ties go by id
        return [(self.rows[i].id, float(scores[i])) for i in top]

    def scores(self, query: str) -> np.ndarray | None:
        """BM25 score of every row for ``query``; None when no query term is in the corpus.

        The last :data:`RECENT_SCORES` vectors are kept by query terms: one question's agent
        scores the question again at every hop (``ranking.evidence``) and a search repeats."""
        if self.retriever is None:
            return None
        terms = tuple(t for t in tokenize([query])[0] if t in self.retriever.vocab_dict)
        if not terms:
            return None
        retriever = self.retriever
        scores = self._recent.get(terms, lambda: retriever.get_scores(list(terms)))
        return scores.astype(np.float64)  # a copy: callers mask it

    def word_share(self, text: str) -> float:
        """Share of chunks that hold the rarest indexed word of ``text`` (0.0 when none is
        indexed): how common a phrase is in this corpus. Kept per text (titles recur)."""
        share = self._shares.get(text)
        if share is None:
            share = 0.0
            if self.retriever is not None and self.rows:
                vocab, indptr = self.retriever.vocab_dict, self.retriever.scores["indptr"]
                ids = [vocab[t] for t in tokenize([text])[0] if t in vocab]
                if ids:
                    share = min(int(indptr[i + 1] - indptr[i]) for i in ids) / len(self.rows)
            self._shares[text] = share
        return share

    def rows_for(self, ids: Iterable[str]) -> np.ndarray:
        """The rows of these chunk ids in their order; unknown ids left out."""
        if isinstance(self.row_of, IdMap):
            return self.row_of.rows(ids)
        return np.fromiter((self.row_of[i] for i in ids if i in self.row_of), dtype=np.int64)

    # -- persistence -----------------------------------------------------------------
    def save(self, folder: Path) -> None:
        """Write to a fresh sibling folder, then swap it in, so a crash leaves the old copy."""
        tmp = folder.with_name(f"{folder.name}.tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        write_columns(tmp, self.rows, self.doc_meta, self.doc_sha)
        if self.retriever is not None:
            self.retriever.save(str(tmp / "bm25"))
        if self.grep_index is not None:
            self.grep_index.save(tmp / "grep")
        atomic_write_text(tmp / "stamp.json", json.dumps(self.stamp))
        old = folder.with_name(f"{folder.name}.old-{os.getpid()}")
        if folder.exists():
            os.replace(folder, old)
        os.replace(tmp, folder)
        shutil.rmtree(old, ignore_errors=True)

    @classmethod
    def load(cls, folder: Path, *, upgrade: bool = True) -> LexicalIndex | None:
        """Load a saved index; ``None`` when missing, or unreadable in the JSONL format of
        :data:`LEXICAL_FORMAT` 4 (the caller rebuilds it). A side of format 4 is rewritten in
        columns on the way (``upgrade``; kept in memory when the folder is read-only).

        Raises:
            InputError: a columnar side truncated or damaged (one line naming the file)."""
        try:
            stamp = json.loads((folder / "stamp.json").read_text())
        except (OSError, ValueError):
            return None
        if not (folder / HEADER).exists():
            return cls._load_jsonl(folder, stamp, upgrade)
        rows, doc_meta, doc_sha = read_columns(folder)
        if upgrade and not rows.maps_saved:  # saved before the look-ups were: add them once
            with contextlib.suppress(OSError):  # a read-only index keeps them in memory only
                add_maps(folder, rows)
        bm25 = folder / "bm25"
        try:
            retriever = (
                bm25s.BM25.load(str(bm25), mmap=True) if len(rows) and bm25.exists() else None
            )
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise damaged(bm25, f"unreadable: {type(e).__name__}") from e
        return cls(rows, stamp, retriever, GrepIndex.load(folder / "grep"), doc_meta, doc_sha)

    @classmethod
    def _load_jsonl(cls, folder: Path, stamp: Stamp, upgrade: bool) -> LexicalIndex | None:
        """A side saved before columns: JSON per row (56 s to open at 1M chunks)."""
        try:
            with open(folder / "chunks.jsonl", encoding="utf-8") as f:
                rows = [ChunkRow(**json.loads(line)) for line in f]
            bm25 = folder / "bm25"
            retriever = bm25s.BM25.load(str(bm25)) if rows and bm25.exists() else None
            with open(folder / "docmeta.jsonl", encoding="utf-8") as f:
                doc_meta = dict(json.loads(line) for line in f)
            doc_sha = json.loads((folder / "docsha.json").read_text(encoding="utf-8"))
        except (OSError, ValueError, KeyError, TypeError):
            return None
        grep_index = GrepIndex.load(folder / "grep")
        lexical = cls(rows, stamp, retriever, grep_index, doc_meta, doc_sha)
        if upgrade and stamp.get("format") == JSONL_FORMAT:
            lexical.stamp = {**stamp, "format": LEXICAL_FORMAT}
            with contextlib.suppress(OSError):  # a read-only index keeps it in memory only
                lexical.save(folder)
        return lexical


class _Texts(Sequence[str]):
    """The texts of a list of rows, by row."""

    def __init__(self, rows: Sequence[ChunkRow]):
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...
    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            return [r.text for r in self.rows[i]]
        return self.rows[i].text
