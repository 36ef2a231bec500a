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
from collections.abc import Iterable
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


def _version() -> dict[str, str]:
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
    table: dict[int, int] = {}
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


def _codes(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), np.uint32).astype(np.uint64)


def _trigram_keys(codes: np.ndarray) -> np.ndarray:
    """Three 21-bit code points packed into one integer per position."""
    keys: np.ndarray = (codes[:-2] << 42) | (codes[1:-1] << 21) | codes[2:]
    return keys


def _vocab_trigrams(vocab: str, starts: np.ndarray) -> dict[str, np.ndarray]:
    """CSR map from each trigram inside a token to the ascending ids of the tokens holding it."""
    codes = _codes(vocab)
    if len(codes) < 3:
        return {"tri_keys": np.zeros(0, np.uint64), "tri_offsets": np.zeros(1, np.int64),
                "tri_tokens": np.zeros(0, np.int32)}  # fmt: skip
    newline = codes == ord("\n")
    pos = np.flatnonzero(~(newline[:-2] | newline[1:-1] | newline[2:]))
    keys = _trigram_keys(codes)[pos]
    tokens = (np.searchsorted(starts, pos, side="right") - 1).astype(np.int32)
    order = np.lexsort((tokens, keys))
    keys, tokens = keys[order], tokens[order]
    keep = np.ones(len(keys), dtype=bool)
    keep[1:] = (keys[1:] != keys[:-1]) | (tokens[1:] != tokens[:-1])
    keys, tokens = keys[keep], tokens[keep]
    uniq, first = np.unique(keys, return_index=True)
    return {"tri_keys": uniq, "tri_offsets": np.append(first, len(keys)), "tri_tokens": tokens}


def _read(
    texts: list[str], which: Iterable[int], vocab: dict[str, int], table: dict[int, int]
) -> tuple[np.ndarray, np.ndarray]:
    """(token id, row) for each distinct token of each of the rows ``which``; new tokens are
    numbered on in ``vocab``."""
    flat, counts, read = array("i"), array("q"), array("q")
    for i in which:
        ids = [vocab.setdefault(t, len(vocab)) for t in set(_WORD.findall(fold(texts[i], table)))]
        flat.extend(ids)
        counts.append(len(ids))
        read.append(i)
    tokens = np.frombuffer(flat, dtype=np.int32).astype(np.int64) if flat else np.zeros(0, np.int64)
    rows = np.repeat(np.frombuffer(read, np.int64), np.frombuffer(counts, np.int64))
    return tokens, rows


_ARRAYS = ("starts", "offsets", "postings", "tri_keys", "tri_offsets", "tri_tokens")


class GrepIndex:
    """Token vocabulary, CSR postings (token → ascending rows) and vocabulary trigrams.

    ``vocab``: tokens joined by ``\\n`` in id order; ``starts``: each token's offset in it;
    ``offsets``/``postings``: token id → rows; ``tri_*``: trigram → token ids, so the tokens
    containing a piece are found without scanning the whole vocabulary."""

    def __init__(
        self, vocab: str, arrays: dict[str, np.ndarray], n_rows: int, table: dict[int, int]
    ):
        self.vocab = vocab
        self.starts, self.offsets, self.postings = (arrays[k] for k in _ARRAYS[:3])
        self.tri_keys, self.tri_offsets, self.tri_tokens = (arrays[k] for k in _ARRAYS[3:])
        self.n_rows = n_rows
        self.table = table

    @classmethod
    def build(cls, texts: list[str]) -> GrepIndex:
        table = fold_table()
        vocab: dict[str, int] = {}
        tokens, rows = _read(texts, range(len(texts)), vocab, table)
        return cls._assemble(list(vocab), tokens, rows, len(texts), table)

    def updated(self, sources: np.ndarray, texts: list[str]) -> GrepIndex:
        """The index of new rows ``texts``: row i is this index's row ``sources[i]`` (its
        postings are moved), or new (``-1``: read). Answers as :meth:`build` of ``texts``
        would (tests/test_grep_update.py); an update reads only its own rows."""
        table = fold_table()
        if table != self.table:
            return GrepIndex.build(texts)
        moved = np.full(self.n_rows, -1, dtype=np.int64)
        kept = np.flatnonzero(sources >= 0)
        moved[sources[kept]] = kept
        old_tokens = np.repeat(np.arange(len(self.starts), dtype=np.int64), np.diff(self.offsets))
        old_rows = moved[np.asarray(self.postings, dtype=np.int64)]
        live = old_rows >= 0
        names = self.vocab.split("\n") if len(self.starts) else []
        vocab = {t: i for i, t in enumerate(names)}
        new_tokens, new_rows = _read(texts, np.flatnonzero(sources < 0).tolist(), vocab, table)
        tokens = np.concatenate([old_tokens[live], new_tokens])
        rows = np.concatenate([old_rows[live], new_rows])
        used = np.bincount(tokens, minlength=len(vocab)) > 0  # tokens only gone rows held: out
        number = np.cumsum(used) - 1
        kept_names = [t for t, u in zip(vocab, used.tolist(), strict=True) if u]
        return GrepIndex._assemble(kept_names, number[tokens], rows, len(texts), table)

    @classmethod
    def _assemble(
        cls,
        vocab: list[str],
        tokens: np.ndarray,
        rows: np.ndarray,
        n_rows: int,
        table: dict[int, int],
    ) -> GrepIndex:
        """The index of (token id, row) pairs, at most one per pair; ``vocab`` in id order."""
        offsets = np.zeros(len(vocab) + 1, dtype=np.int64)
        np.cumsum(np.bincount(tokens, minlength=len(vocab)), out=offsets[1:])
        starts = np.zeros(len(vocab), dtype=np.int64)
        np.cumsum([len(t) + 1 for t in vocab][:-1], out=starts[1:])
        joined = "\n".join(vocab)
        arrays: dict[str, np.ndarray] = {
            "starts": starts,
            "offsets": offsets,
            "postings": rows[np.lexsort((rows, tokens))].astype(np.int32),
            **_vocab_trigrams(joined, starts),
        }
        return cls(joined, arrays, n_rows, table)

    def _token(self, i: int) -> str:
        end = self.starts[i + 1] - 1 if i + 1 < len(self.starts) else len(self.vocab)
        return self.vocab[self.starts[i] : end]

    def _scan_tokens(self, piece: str) -> np.ndarray | None:
        """Ids of tokens containing a short piece, by searching the joined vocabulary."""
        vocab = self.vocab
        hits: list[int] = []
        pos = vocab.find(piece)
        while pos >= 0:
            if len(hits) >= MAX_TOKEN_HITS:
                return None
            hits.append(pos)
            end = vocab.find("\n", pos + len(piece))
            pos = -1 if end < 0 else vocab.find(piece, end + 1)
        return np.searchsorted(self.starts, np.asarray(hits, dtype=np.int64), side="right") - 1

    def _trigram_tokens(self, piece: str) -> np.ndarray | None:
        """Ids of tokens containing a piece of 3+ chars: its rarest trigrams, then verified."""
        keys = np.unique(_trigram_keys(_codes(piece)))
        at = np.searchsorted(self.tri_keys, keys)
        if not len(self.tri_keys) or (at >= len(self.tri_keys)).any():
            return np.zeros(0, np.int64)
        if (self.tri_keys[at] != keys).any():
            return np.zeros(0, np.int64)
        lo, hi = self.tri_offsets[at], self.tri_offsets[at + 1]
        order = np.argsort(hi - lo, kind="stable")
        ids = self.tri_tokens[lo[order[0]] : hi[order[0]]]
        for j in order[1:]:
            if len(ids) <= 4 * MAX_TOKEN_HITS:
                break
            ids = np.intersect1d(ids, self.tri_tokens[lo[j] : hi[j]], assume_unique=True)
        if len(ids) > 4 * MAX_TOKEN_HITS:
            return None
        found = [i for i in ids.tolist() if piece in self._token(i)]
        return None if len(found) > MAX_TOKEN_HITS else np.asarray(found, dtype=np.int64)

    def literal_rows(self, literal: str) -> np.ndarray | None:
        """Rows that may contain ``literal`` (any case class); ``None`` when not narrowed.

        Each ``\\w`` piece is looked up; the rows of the rarest are materialised, and rarer
        pieces' rows intersected only while that still pays (the regex checks the rest)."""
        sized = []
        for piece in set(pieces(literal, self.table)):
            ids = self._trigram_tokens(piece) if len(piece) >= 3 else self._scan_tokens(piece)
            if ids is None:
                continue
            lo, hi = self.offsets[ids], self.offsets[ids + 1]
            total = int((hi - lo).sum())
            if total <= MAX_ROW_SHARE * self.n_rows:
                sized.append((total, lo, hi))
        best: np.ndarray | None = None
        for total, lo, hi in sorted(sized, key=lambda s: s[0]):
            if best is not None and (len(best) <= 64 or total > 8 * len(best)):
                break
            parts = [self.postings[a:b] for a, b in zip(lo.tolist(), hi.tolist(), strict=True)]
            rows = np.unique(np.concatenate(parts)) if parts else np.zeros(0, np.int32)
            best = rows if best is None else np.intersect1d(best, rows, assume_unique=True)
        return best

    # -- persistence -----------------------------------------------------------------
    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "vocab.txt").write_text(self.vocab, encoding="utf-8", errors="surrogatepass")
        for name in _ARRAYS:
            np.save(folder / f"{name}.npy", getattr(self, name))
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
            arrays = {
                name: np.load(folder / f"{name}.npy", mmap_mode="r" if name == "postings" else None)
                for name in _ARRAYS
            }
            return cls(
                (folder / "vocab.txt").read_text(encoding="utf-8", errors="surrogatepass"),
                arrays,
                int(meta["n_rows"]),
                {int(a): int(b) for a, b in pairs},
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None
