"""What a document names: the corpus graph's nodes (:mod:`sleuth.index.graph`), found without an
LLM. Names are capitalised runs (leading function words and calendar words dropped), plus e-mail
addresses, long numbers and identifiers; a title is stored as its bare key (no RE:/FW:, no
trailing "(...)"), and a title named inside a longer run of names is found there too."""

from __future__ import annotations

import re
from collections.abc import Iterable

NODES_VERSION = 1
"""Bump when what a text names changes: an update reuses a saved graph's nodes of the documents
it leaves alone only when they were found the same way (:mod:`sleuth.index.graphupdate`)."""
_UPPER = "A-ZÀ-ÖØ-Þ"
_CAP_WORD = rf"[{_UPPER}][\w'’&-]*"
_CONNECTOR = r"(?:of|the|for|de|del|la|le|von|van|der|da|du|y)"
_SPAN = re.compile(rf"\b{_CAP_WORD}(?:[ \t]+(?:{_CONNECTOR}[ \t]+)*(?:{_CAP_WORD}|\d+\b))*")
_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
_NUMBER = re.compile(r"\b\d{1,3}(?:,\d{3})+\b|\b\d{4,}\b")
# Letters then a digit, or digits then a letter ("EL-2001A", "H2O", "4G"); no lookahead: fast.
_IDENT = re.compile(r"\b(?:[A-Za-z]+-?\d|\d+-?[A-Za-z])[A-Za-z0-9]*(?:-[A-Za-z0-9]+)*\b")
_EDGE_PUNCTUATION = "?,!;:'\"()"  # around a word typed in a question, not part of a title
_ORDINAL = re.compile(r"^\d+(?:st|nd|rd|th|s)$")
_REPLY = re.compile(r"^(?:\s*(?:re|fw|fwd|aw|tr)\s*:\s*)+", re.IGNORECASE)
_PARENTHESIS = re.compile(r"\s*\([^)]*\)\s*$")
# Words that open a capitalised run without being part of a name ("The", "Which", "In").
_LEADING = frozenset(
    """a an the this that these those in on at of for to from by with and or but as is was are
    were be did does do has have had who whom whose which what when where why how it its his her
    their our my your he she they we i if after before during while since although however also
    not no yes dear hi hello thanks regards""".split()  # noqa: SIM905 - a word list reads better as text
)
CALENDAR = frozenset(  # capitalised words that name no entity worth a node or a search
    """january february march april may june july august september october november december
    monday tuesday wednesday thursday friday saturday sunday""".split()  # noqa: SIM905
)


def node_key(text: str) -> str:
    """The normal form a node is stored under: lower case, single spaces, no leading article."""
    words = text.lower().split()
    while words and words[0] in ("the", "a", "an"):
        words = words[1:]
    return " ".join(words)


def title_key(title: str) -> str:
    """A title's node: no reply prefix, no trailing "(disambiguation)"; "" when under 3 chars."""
    bare = _PARENTHESIS.sub("", _REPLY.sub("", title)).strip()
    key = node_key(bare)
    return key if len(key) >= 3 else ""


def _spans(text: str) -> Iterable[list[str]]:
    """Capitalised runs as word lists, leading function words dropped."""
    for match in _SPAN.finditer(text):
        words = match.group().split()
        while words and words[0].lower() in _LEADING:
            words = words[1:]
        while words and words[-1].lower() in ("of", "the", "for", "de", "y"):
            words = words[:-1]
        if words and not (len(words) == 1 and words[0].lower() in CALENDAR):
            yield words


class Titles:
    """Title keys, looked up inside longer runs of names: by first word, then by length."""

    def __init__(self, keys: Iterable[str]):
        self.keys = set(keys)
        self.longest: dict[str, int] = {}  # a title's first word -> its longest title, in words
        for key in self.keys:
            words = key.split()
            self.longest[words[0]] = max(self.longest.get(words[0], 0), len(words))

    def has(self, key: str) -> bool:
        return key in self.keys

    def longest_from(self, word: str) -> int:
        """Words in the longest title starting with ``word`` (0: none does)."""
        return self.longest.get(word, 0)

    def within(self, lowered: list[str]) -> Iterable[str]:
        """Every run of ``lowered`` words that is a title key."""
        for start, word in enumerate(lowered):
            for size in range(1, min(self.longest_from(word), len(lowered) - start) + 1):
                part = " ".join(lowered[start : start + size])
                if self.has(part):
                    yield part


def extract_nodes(text: str, titles: Titles | None = None) -> set[str]:
    """Node keys ``text`` names: its names, e-mail addresses, long numbers and identifiers, plus
    every part of a name that is one of ``titles`` (a title named inside a longer run)."""
    found: set[str] = set()
    for words in _spans(text):
        key = node_key(" ".join(words))
        if len(key) >= 3:
            found.add(key)
        if titles and len(words) > 1:
            found.update(titles.within([w.lower() for w in words]))
    if "@" in text:  # a fast test: the address pattern is slow over plain prose
        found.update(m.lower() for m in _EMAIL.findall(text))
    found.update(m.replace(",", "") for m in _NUMBER.findall(text))
    found.update(
        m.lower() for m in _IDENT.findall(text) if len(m) >= 3 and not _ORDINAL.match(m.lower())
    )
    return found


def titled_runs(text: str, titles: Titles, longest: int = 8) -> list[str]:
    """Left to right, the longest run of words (up to ``longest``) at each place that is a
    title, whatever its case: the names of a question typed in lower case. Longest first, so
    "big stone gap" is one name, not "big", "stone" and "gap"; on lower-cased pooled questions
    the default agent's R@5 rose 1.0 [+0.2, +1.9] with these as its graph seeds (docs/RESULTS.md)."""
    typed = [w.strip(_EDGE_PUNCTUATION) for w in text.lower().split()]
    bare = [w.rstrip(".") for w in typed]  # a sentence's full stop, or an abbreviation's dot
    found, i = [], 0
    while i < len(typed):
        for size in range(min(longest, len(typed) - i), 0, -1):
            part = next((p for p in _runs(typed, bare, i, size) if titles.has(p)), None)
            if part is not None:
                found.append(part)
                i += size
                break
        else:
            i += 1
    return found


def _runs(typed: list[str], bare: list[str], i: int, size: int) -> list[str]:
    runs = dict.fromkeys(" ".join(w[i : i + size]) for w in (typed, bare))
    return [r for r in runs if len(r) >= 3]
