"""Word-piece postings that narrow ``grep_corpus`` to the chunks that can match.

Chunk texts are case-folded with the regex engine's own case classes (so a literal under
``(?i)`` folds to what it can match), split into maximal runs of ``\\w`` (tokens), and each
token maps to the rows holding it. A literal from a pattern is folded the same way; each of
its ``\\w`` runs must lie inside one text token, so the rows holding any vocabulary token that
*contains* the run are a superset of the rows where the literal occurs, substrings inside
words included. The vocabulary is one ``\\n``-joined string searched with ``str.find``, so
the cost follows the number of matching tokens, not the corpus.

Stored beside the BM25 files; the fold table is saved with it and the saved copy is ignored
when the regex module or the Unicode database has changed since it was built.
"""

from __future__ import annotations

import json
import re
import sys
import unicodedata
from array import array
from functools import cache
from pathlib import Path

import numpy as np
import regex
from regex import _regex

_WORD = re.compile(r"\w+")
# Blocks with no cased letters (CJK, Hangul, surrogates, private use) are skipped when the
# fold table is built; tests/test_grep.py checks that the whole code space agrees.
_CASELESS = ((0x3400, 0xA000), (0xAC00, 0xF900), (0x20000, sys.maxunicode + 1))
MAX_TOKEN_HITS = 4096  # more vocabulary tokens than this containing a piece: not selective
MAX_ROW_SHARE = 0.5  # a piece whose postings cover more of the corpus narrows nothing


def _version() -> dict:
    return {"regex": regex.__version__, "unicode": unicodedata.unidata_version}


@cache
def fold_table() -> dict[int, int]:
    """Code point → representative of its case class, for every char with other cases.

    Classes are the regex engine's own (``get_all_cases``), closed transitively; the
    representative is the lowest lower-case member, so ASCII folds exactly as ``str.lower``."""
    flags = regex.IGNORECASE | regex.UNICODE
    parent: dict[int, int] = {}

    def root(x: int) -> int:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    lo = 0
    for skip_lo, skip_hi in (*_CASELESS, (sys.maxunicode + 1, 0)):
        for c in range(lo, skip_lo):
            for other in _regex.get_all_cases(flags, c)[1:]:
                parent[root(other)] = root(c)
        lo = skip_hi
    classes: dict[int, list[int]] = {}
    for c in parent:
        classes.setdefault(root(c), []).append(c)
    table = {}
    for members in classes.values():
        rep = min(members, key=lambda m: (not chr(m).islower(), m))
        table.update((m, rep) for m in members if m != rep)
    return table


def fold(text: str, table: dict[int, int]) -> str:
    """Map each char to its case representative; the length never changes."""
    return text.lower() if text.isascii() else text.translate(table)


def pieces(literal: str, table: dict[int, int]) -> list[str]:
    """The folded ``\\w`` runs of a literal: each must lie inside one token of the text."""
    return _WORD.findall(fold(literal, table))


class GrepIndex:
    """Token vocabulary + CSR postings (token → ascending row numbers)."""

    def __init__(self, vocab: str, starts, offsets, postings, n_rows: int, table: dict):
        self.vocab = vocab  # tokens joined by "\n", in id order
        self.starts = starts  # offset of each token in ``vocab``
        self.offsets = offsets  # token id → slice of ``postings``
        self.postings = postings
        self.n_rows = n_rows
        self.table = table

    @classmethod
    def build(cls, texts: list[str]) -> GrepIndex:
        table = fold_table()
        vocab: dict[str, int] = {}
        flat, counts = array("i"), array("q")
        for text in texts:
            ids = [vocab.setdefault(t, len(vocab)) for t in set(_WORD.findall(fold(text, table)))]
            ids.sort()
            flat.extend(ids)
            counts.append(len(ids))
        tokens = np.frombuffer(flat, dtype=np.int32) if flat else np.zeros(0, np.int32)
        rows = np.repeat(np.arange(len(texts), dtype=np.int32), np.frombuffer(counts, np.int64))
        order = np.argsort(tokens, kind="stable")
        offsets = np.zeros(len(vocab) + 1, dtype=np.int64)
        np.cumsum(np.bincount(tokens, minlength=len(vocab)), out=offsets[1:])
        starts = np.zeros(len(vocab), dtype=np.int64)
        np.cumsum([len(t) + 1 for t in vocab][:-1], out=starts[1:])
        return cls("\n".join(vocab), starts, offsets, rows[order], len(texts), table)

    def token_rows(self, piece: str) -> np.ndarray | None:
        """Rows whose text has a token containing ``piece``; ``None`` when not selective."""
        vocab = self.vocab
        hits, pos = [], vocab.find(piece)
        while pos >= 0:
            if len(hits) >= MAX_TOKEN_HITS:
                return None
            hits.append(pos)
            end = vocab.find("\n", pos + len(piece))
            pos = -1 if end < 0 else vocab.find(piece, end + 1)
        if not hits:
            return np.zeros(0, dtype=np.int32)
        ids = np.searchsorted(self.starts, np.asarray(hits), side="right") - 1
        lo, hi = self.offsets[ids], self.offsets[ids + 1]
        if (hi - lo).sum() > MAX_ROW_SHARE * self.n_rows:
            return None
        return np.unique(np.concatenate([self.postings[a:b] for a, b in zip(lo, hi, strict=True)]))

    def literal_rows(self, literal: str) -> np.ndarray | None:
        """Rows that may contain ``literal`` (any case class); ``None`` when not narrowed."""
        best: np.ndarray | None = None
        for piece in sorted(set(pieces(literal, self.table)), key=len, reverse=True):
            rows = self.token_rows(piece)
            if rows is not None:
                best = rows if best is None else np.intersect1d(best, rows, assume_unique=True)
                if not len(best):
                    break
        return best

    # -- persistence -----------------------------------------------------------------
    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "vocab.txt").write_text(self.vocab, encoding="utf-8")
        np.save(folder / "starts.npy", self.starts)
        np.save(folder / "offsets.npy", self.offsets)
        np.save(folder / "postings.npy", self.postings)
        np.save(folder / "fold.npy", np.array(sorted(self.table.items()), dtype=np.int32))
        meta = {"n_rows": self.n_rows, **_version()}
        (folder / "meta.json").write_text(json.dumps(meta), encoding="utf-8")

    @classmethod
    def load(cls, folder: Path) -> GrepIndex | None:
        """``None`` when missing, unreadable or built by another regex/Unicode version."""
        try:
            meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
            if {k: meta.get(k) for k in _version()} != _version():
                return None
            pairs = np.load(folder / "fold.npy").reshape(-1, 2)
            return cls(
                (folder / "vocab.txt").read_text(encoding="utf-8"),
                np.load(folder / "starts.npy"),
                np.load(folder / "offsets.npy"),
                np.load(folder / "postings.npy", mmap_mode="r"),
                int(meta["n_rows"]),
                {int(a): int(b) for a, b in pairs},
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None
