"""Word-level text helpers shared by the ranker's features and the scripted agent.

Words are compared folded (:func:`fold`: lower case, ASCII dashes and quotes, no accents) and
cut to ``STEM`` characters, a crude stemmer that lets "founded" meet "founder" without a stemming
dependency; it only needs to be consistent.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator, Sequence
from collections.abc import Set as AbstractSet
from functools import lru_cache

STEM = 6


def _latin_letters() -> dict[str, str]:
    """Accented Latin letters as their bare letters ("é" -> "e", "Ẩ" -> "A"): a user types "Jose"
    for "José". Letters with no decomposition ("ß", "ø") stay as they are."""
    table = {}
    for code in [*range(0xC0, 0x250), *range(0x1E00, 0x1F00)]:
        letter = chr(code)
        bare = "".join(
            c for c in unicodedata.normalize("NFKD", letter) if not unicodedata.combining(c)
        )
        if bare != letter and bare.isascii() and bare.isalpha():
            table[letter] = bare
    return table


_WORD = re.compile(r"\w[\w'’&-]*")
# Abbreviations a name keeps inside it ("Warner Bros. Records", "St. Peter's Basilica",
# "J. R. Smith"): no sentence ends after them.
_ABBREVIATIONS = "St Mt Ft Jr Sr Co Inc Ltd Corp Bros No Gen Col Lt Sgt Capt Rev Prof"
_NOT_AN_END = "".join(rf"(?<!\b{a}\.)" for a in _ABBREVIATIONS.split()) + r"(?<!\b[A-Z]\.)"
_SENTENCE_END = re.compile(rf"(?<=[.!?]){_NOT_AN_END}\s+|\n+")
# For quoting: a single line break inside a paragraph is wrapping (e-mail, plain text), not an end.
_PARAGRAPH_END = re.compile(r"\n\s*\n")
_WRAPPED_SENTENCE_END = re.compile(rf"(?<=[.!?]){_NOT_AN_END}\s+")
_FOLD = str.maketrans(
    dict.fromkeys("‐‑‒–—―−", "-")
    | dict.fromkeys("‘’′", "'")
    | dict.fromkeys("“”″", '"')
    | _latin_letters()
)
_YEAR = re.compile(r"1\d{3}|20\d{2}")
_PARENTHESIS = re.compile(r"\s*\([^)]*\)\s*$")
STOPWORDS = frozenset(  # a short English list plus words every question uses
    """a about above after again against all also am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is it its
    itself just me more most my myself no nor not now of off on once only or other our ours out over
    own same she should so some such than that the their theirs them themselves then there these
    they this those through to too under until up very was we were what when where which while who
    whom whose why will with would you your yours first second one two name named known called
    many much year years""".split()  # noqa: SIM905 - a word list reads better as text
)
# Lower-case words that may sit inside a name ("Bank of England", "First for Women").
_CONNECTORS = frozenset({"of", "the", "for", "de", "del", "la", "le", "von", "van", "der", "da"})


def words(text: str) -> list[str]:
    return _WORD.findall(text)


def content_words(text: str) -> list[str]:
    """Lower-cased words that carry meaning (no stopwords, no one- or two-letter words)."""
    return list(dict.fromkeys(_content(text)))


def _content(text: str) -> Iterator[str]:
    # ASCII: lower-casing the text first gives the same words (12% faster, one call not many);
    # otherwise words are cut first ("İ" lower-cased is two characters, the second no letter)
    if text.isascii():
        found = _WORD.findall(text.lower())
    else:
        found = [w.lower() for w in _WORD.findall(text.translate(_FOLD))]
    return (w for w in found if len(w) > 2 and w not in STOPWORDS)


@lru_cache(maxsize=2048)  # texts of a few kB: a few MB at most
def stems(text: str) -> frozenset[str]:
    """The text's content-word stems. Cached: the selector meets the same document texts and
    question at every hop of a question (and twice per call), so each is cut into words once."""
    return frozenset([w[:STEM] for w in _content(text)])


def overlap(wanted: AbstractSet[str], text: str) -> float:
    """Share of ``wanted`` stems that occur in ``text`` (1.0 when nothing is wanted)."""
    return len(wanted & stems(text)) / len(wanted) if wanted else 1.0


def evidence_sentence(question: str, text: str, limit: int = 240) -> str:
    """The sentence of ``text`` sharing the most content stems with ``question`` (the first of
    equals), whitespace collapsed and cut to ``limit`` characters: what a reader of the ranked
    list should check first. A line with no letter or digit (a Markdown table rule, a row of
    dashes) is never it. Empty when ``text`` has no such sentence.
    """
    wanted = stems(question)
    best, best_score = "", -1
    sentences = (s for p in _PARAGRAPH_END.split(text) for s in _WRAPPED_SENTENCE_END.split(p))
    for sentence in sentences:
        sentence = " ".join(sentence.split())
        score = len(wanted & stems(sentence))
        if score > best_score and any(ch.isalnum() for ch in sentence):
            best, best_score = sentence, score
    return best if len(best) <= limit else best[: limit - 1].rstrip() + "…"


def fold(text: str) -> str:
    """``text`` lower-cased, its dash and quote variants as ASCII and accents dropped: names are
    compared in this form, since "1894-95 FA Cup" must name "1894–95 FA Cup", "Jose" "José"."""
    return text.lower() if text.isascii() else text.translate(_FOLD).lower()


@lru_cache(maxsize=8192)  # the selector cuts every seen title at every hop
def bare_title(title: str) -> str:
    """A title without its trailing disambiguation: "Mercury (planet)" → "Mercury"."""
    return _PARENTHESIS.sub("", title).strip() or title.strip()


def mentions(text_lower: str, title: str) -> bool:
    """Whether ``text_lower`` (already :func:`fold`-ed) names ``title`` as whole words."""
    return holds_name(text_lower, fold(bare_title(title)))


def mentioned_by(titles: Sequence[str], texts_lower: Sequence[str]) -> list[list[int]]:
    """Per title i, the indices j ≠ i of the texts (:func:`fold`-ed) that name it (:func:`mentions`).

    The selector asks this of every pair of seen documents at every hop: each title is cut to its
    name once, and a plain substring test skips the pairs that cannot match."""
    found: list[list[int]] = []
    for i, title in enumerate(titles):
        name = fold(bare_title(title)) if title else ""
        if len(name) < 3:
            found.append([])
            continue
        found.append(
            [j for j, t in enumerate(texts_lower) if j != i and name in t and holds_name(t, name)]
        )
    return found


def holds_name(text_lower: str, name: str) -> bool:
    """Whether ``text_lower`` holds ``name`` (both :func:`fold`-ed, 3+ characters) as whole words."""
    if len(name) < 3:
        return False
    start = text_lower.find(name)
    while start >= 0:
        end = start + len(name)
        before = text_lower[start - 1] if start else " "
        after = text_lower[end] if end < len(text_lower) else " "
        if not before.isalnum() and not after.isalnum():
            return True
        start = text_lower.find(name, start + 1)
    return False


def capitalised_spans(text: str) -> list[str]:
    """Runs of capitalised words (names, titles), allowing connectors and numbers inside.

    A sentence's first word counts only when it is not a stopword ("Which", "The").
    """
    return list(_spans(text))


@lru_cache(maxsize=2048)  # the agent reads the best documents' chunks again at every hop
def _spans(text: str) -> tuple[str, ...]:
    spans: list[str] = []
    for sentence in _SENTENCE_END.split(text):
        current: list[str] = []
        pending: list[str] = []
        previous_end, year = 0, ""
        for i, match in enumerate(_WORD.finditer(sentence)):
            word, lower = match.group(), match.group().lower()
            gap = sentence[previous_end : match.start()]
            # a name keeps the dot of an abbreviation inside it ("Bros. Records")
            dotted = bool(current) and gap.startswith(".")
            previous_end = match.end()
            if dotted and lower in STOPWORDS:  # "World War I. Then": a sentence did end there
                _flush(current, spans)
                current, pending = [], []
            elif word[0].isupper() and not (i == 0 and lower in STOPWORDS):
                if dotted and not pending:
                    current[-1] += "."
                if year and not current and gap == " ":  # "1988 World Series" opens with its year
                    current = [year]
                current += [*pending, word]
                pending = []
            elif current and not pending and word[0].isdigit():
                current.append(word)
            elif current and lower in _CONNECTORS:
                pending.append(word)
            else:
                _flush(current, spans)
                current, pending = [], []
            year = word if not current and _YEAR.fullmatch(word) else ""
        _flush(current, spans)
    return tuple(dict.fromkeys(spans))


def _flush(span_words: list[str], spans: list[str]) -> None:
    span = " ".join(span_words)
    if len(span) > 2 and span.lower() not in STOPWORDS:
        spans.append(span)
