"""Text helpers for the offline generator: sentences, entity profiles and obfuscation by masking.

An *entity* is a titled document seen as the thing it describes ("Xawery Żuławski", a person).
Clues are verbatim sentences with the entities' names, years and numbers replaced by placeholders,
so a solver has to search for the descriptive words that remain.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from sleuth.corpus.models import Document

Span = tuple[int, int]

YEAR = "[a year]"
DECADE = "[a decade]"
NUMBER = "[a number]"
PLACEHOLDER = re.compile(r"\[[^\[\]]*\]")

_DASH_CLASS = "[-\u2010\u2011\u2012\u2013\u2014\u2015\u2212]"
_QUOTE_CLASS = "['\u2018\u2019\u02bc`]"
_PAREN = re.compile(r"\s*\(([^()]*)\)\s*$")
_BOUNDARY = re.compile(r"[.!?][\"'\u201d\u2019)\]]*\s+|\n\s*\n")


def _vocabulary(words: str) -> frozenset[str]:
    return frozenset(words.split())


_ABBREVIATIONS = _vocabulary(
    "mr mrs ms dr st jr sr mt ft no vs etc inc ltd co corp gen col lt sgt capt prof rev hon"
    " jan feb mar apr jun jul aug sep sept oct nov dec u.s u.k e.g i.e c ca approx"
)
_YEAR = re.compile(r"(?<![\w.,])(1\d{3}|20\d{2})(s?)(?!\w)(?![.,]\d)")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*(?:st|nd|rd|th)?")
_WORD = re.compile(r"[^\W\d_]{3,}")
# A parenthetical with "born"/"née"/"died" or a range of dates: "( 1860- 1929)".
_LIFE_DATES = re.compile(
    r"\([^()]*\b(?:born|n\u00e9e|died)\b|\([^()]*\b\d{3,4}\s*[-\u2013\u2014][^()]*\d{3,4}\b"
)

# The head noun after "is a ..." in a first sentence names the kind of entity (see infer_kind).
# Person nouns collapse to "person": the question asks "who is".
_PERSON_NOUNS = _vocabulary(
    "actor actress singer songwriter rapper musician composer conductor pianist guitarist"
    " drummer politician writer author novelist poet playwright journalist director producer"
    " screenwriter filmmaker cinematographer editor painter artist sculptor photographer designer"
    " architect engineer scientist physicist chemist biologist mathematician philosopher"
    " historian economist lawyer judge diplomat businessman businesswoman businessperson"
    " entrepreneur footballer player athlete boxer wrestler swimmer cyclist coach manager"
    " general admiral officer soldier king queen prince princess emperor empress duke duchess"
    " count countess nobleman noblewoman bishop priest cardinal pope monk nun clergyman"
    " theologian missionary abolitionist activist model dancer comedian presenter broadcaster"
    " lord lady baron baroness knight sultan pharaoh chieftain consort courtier landowner"
    " member saint librarian lexicographer teacher professor educator physician surgeon nurse"
    " inventor explorer aviator pilot astronaut chef critic publisher banker merchant farmer"
    " rabbi monarch ruler regent governor mayor senator minister president chancellor"
    " statesman revolutionary psychologist sociologist linguist anthropologist archaeologist"
    " astronomer botanist zoologist geologist jurist man woman goalkeeper defender midfielder"
    " striker pitcher quarterback jockey driver racer skater skier sprinter golfer daughter son"
    " wife husband mother father"
)
_KINDS = _vocabulary(
    "film album song single novel book play opera musical series show band group game magazine"
    " newspaper company corporation airline university college school village town city"
    " municipality commune comune district county province region state country island river"
    " lake mountain church cathedral building bridge station airport stadium castle palace"
    " museum ship team club party organization award festival battle war character painting"
    " poem dynasty kingdom place neighborhood suburb park hospital journal episode"
    " documentary franchise sitcom anthology collection compilation"
)
_KIND_ALIASES = {"movie": "film", "single": "song", "show": "series", "sitcom": "series"}
_DEFINITION = re.compile(r"\b(?:is|was|are|were)\s+(?:a|an|the|one of the)\b", re.IGNORECASE)
_PHRASE_END = re.compile(
    r"[,;:()]|\b(?:in|of|by|for|from|at|on|with|about|that|which|who|whose|where|and|or|set"
    r"|located|situated|based|born|directed|written|produced|released|known|founded|named"
    r"|starring|featuring|performed|recorded|created|developed|published|owned|operated"
    r"|designed|built|headquartered|serving|including)\b"
)
# Words that identify nothing: function words, and months (dates are half-masked).
_UNSEARCHABLE = _vocabulary(
    "the and was were has had have his her hers him she they them their its this that these"
    " those who whom whose which what when where while with from for into onto than then also"
    " are been being but not nor all any both each other such only own same very can will"
    " would could should may might one two three first second after before between during"
    " about over under born died known later became became january february march april may"
    " june july august september october november december"
)
_CONNECTORS = _vocabulary("of de da del der di du la le van von bin ibn the and no y")


@dataclass(frozen=True)
class Entity:
    """A titled document seen as the thing it describes."""

    doc_id: str
    title: str
    kind: str
    """``person``, a category noun (``film``, ``village``...) or ``entity`` when unknown."""
    names: tuple[str, ...]
    """Surface forms naming it (title, title without its parenthetical, the form the text opens
    with), longest first."""
    surname: str | None
    """For plain personal names, the last name, masked when it stands alone in its own document."""
    sentences: tuple[Span, ...]
    """Character spans of the document's sentences, so clues are exact substrings."""


def split_sentences(text: str) -> list[Span]:
    """Sentence spans of ``text``: split after ``.!?`` unless the word before is an abbreviation
    or an initial, and at blank lines."""
    spans, start = [], 0
    for m in _BOUNDARY.finditer(text):
        if m.group().strip() and _is_abbreviation(text, m.start()):
            continue
        end = m.start() + len(m.group().rstrip())  # keep closing quotes and brackets
        if text[start:end].strip():
            spans.append(_trimmed(text, start, end))
        start = m.end()
    if text[start:].strip():
        spans.append(_trimmed(text, start, len(text)))
    return spans


def _is_abbreviation(text: str, dot: int) -> bool:
    word = re.findall(r"[\w.]*$", text[max(0, dot - 24) : dot])[0].casefold()
    return text[dot] == "." and (len(word) == 1 or word in _ABBREVIATIONS or "." in word)


def _trimmed(text: str, start: int, end: int) -> Span:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def base_title(title: str) -> str:
    """The title without a trailing disambiguation: ``Ed Wood (film)`` → ``Ed Wood``."""
    return _PAREN.sub("", title).strip() or title


def ascii_fold(text: str) -> str:
    """Accents removed (``Żuławski`` → ``Zuławski``), for aliases a searcher may type."""
    kept = (c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    return unicodedata.normalize("NFC", "".join(kept))


def profile_document(doc: Document) -> Entity | None:
    """The entity a titled document describes; None for an untitled one."""
    if not doc.title or not doc.title.strip():
        return None
    title = doc.title.strip()
    sentences = tuple(split_sentences(doc.text))
    first = doc.text[slice(*sentences[0])] if sentences else ""
    kind = infer_kind(title, first)
    base = base_title(title)
    names = [title, base]
    opening = _opening_name(base, doc.text) if kind == "person" else None
    if opening:
        names.append(opening)
    ordered = tuple(sorted(set(names), key=lambda n: (-len(n), n)))
    return Entity(doc.id, title, kind, ordered, _surname(base, kind), sentences)


def infer_kind(title: str, first_sentence: str) -> str:
    """``person`` if the subject carries life dates or a person noun defines it, else the
    category noun after "is a", else the title's parenthetical, else ``entity``."""
    match = _DEFINITION.search(first_sentence)
    # Life dates belong to the subject, before "is a"; "( 1943)" after it dates something else.
    if _LIFE_DATES.search(first_sentence[: match.start() if match else 200]):
        return "person"
    if match:
        rest = first_sentence[match.end() :].lower()
        # The head noun ends the phrase before "in", "by", a comma...: "a documentary film
        # festival set in" is a festival. Failing that, the first kind noun nearby.
        phrase = _PHRASE_END.split(rest, maxsplit=1)[0]
        for words in (reversed(_words(phrase)), _words(rest)[:12]):
            kind = next(filter(None, map(_kind_of, words)), None)
            if kind:
                return kind
    paren = _PAREN.search(title)
    last = paren.group(1).split()[-1].lower() if paren and paren.group(1).split() else ""
    return _kind_of(last) or "entity"


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z]+(?:-[a-z]+)*", text)


def _kind_of(word: str) -> str | None:
    for form in (word, word.removesuffix("s")):
        if form in _PERSON_NOUNS:
            return "person"
        if form in _KINDS or form in _KIND_ALIASES:
            return _KIND_ALIASES.get(form, form)
    return None


def _opening_name(base: str, text: str) -> str | None:
    """The fuller form a biography opens with: ``Derrick Lavon Jefferson`` for ``Derrick
    Jefferson``. Only at the start of the text, where the subject is named."""
    tokens = base.split()
    if len(tokens) < 2:
        return None
    first, last = re.escape(tokens[0]), re.escape(tokens[-1])
    match = re.match(rf"{first}(?:\s+[^\s(,]+){{0,3}}?\s+{last}(?!\w)", text)
    return match.group() if match else None


def _surname(base: str, kind: str) -> str | None:
    tokens = base.split()
    plain = all(t[:1].isupper() and t.lower() not in _CONNECTORS for t in tokens)
    return tokens[-1] if kind == "person" and plain and 2 <= len(tokens) <= 4 else None


def name_regex(name: str) -> str:
    """Regex source for ``name`` as a whole phrase, tolerant of dash, quote and spacing variants
    (compile it with ``re.IGNORECASE``)."""
    parts = []
    for char in name:
        if char.isspace():
            parts.append(r"\s+")
        elif re.fullmatch(_DASH_CLASS, char):
            parts.append(rf"\s*{_DASH_CLASS}\s*")
        elif re.fullmatch(_QUOTE_CLASS, char):
            parts.append(_QUOTE_CLASS)
        else:
            parts.append(re.escape(char))
    return rf"(?<!\w){''.join(parts)}(?!\w)"


def mask_text(text: str, masks: Sequence[tuple[Entity, str]]) -> str:
    """``text`` with each entity's names replaced by its label, then years and numbers.

    ``masks`` pairs an entity with its placeholder (``[X]``); longer names win where they overlap.
    An entity's standalone surname is masked too.
    """
    spans = sorted(_name_spans(text, masks), key=lambda s: (s[0], -(s[1] - s[0])))
    out, pos = [], 0
    for start, end, label in spans:
        if start >= pos:
            out += [_mask_numbers(text[pos:start]), label]
            pos = end
    out.append(_mask_numbers(text[pos:]))
    return "".join(out)


def _name_spans(text: str, masks: Sequence[tuple[Entity, str]]) -> list[tuple[int, int, str]]:
    spans = []
    for entity, label in masks:
        for name in entity.names:
            pattern = re.compile(name_regex(name), re.IGNORECASE)
            spans += [(m.start(), m.end(), label) for m in pattern.finditer(text)]
        if entity.surname:
            spans += [(s, e, label) for s, e in _standalone(text, entity.surname)]
    return spans


def _standalone(text: str, surname: str) -> list[Span]:
    """Occurrences of a surname not next to another capitalised word (``Eliza Wigham`` and
    ``Sultan Abdülaziz`` are someone else)."""
    spans = []
    for m in re.finditer(rf"(?<!\w){re.escape(surname)}(?!\w)", text):
        before = re.search(r"(\S+)\s+$", text[: m.start()])
        after = re.match(r"\s+(\S+)", text[m.end() :])
        named_before = before and before.group(1)[:1].isupper() and before.group(1)[-1].isalpha()
        if not (named_before or (after and after.group(1)[:1].isupper())):
            spans.append(m.span())
    return spans


def _mask_numbers(text: str) -> str:
    text = _YEAR.sub(lambda m: DECADE if m.group(2) else YEAR, text)
    return _NUMBER.sub(NUMBER, text)


def content_words(text: str) -> list[str]:
    """Distinct casefolded words a solver can search with: three or more letters, outside
    placeholders, not function words or month names."""
    words = _WORD.findall(PLACEHOLDER.sub(" ", text).casefold())
    return list(dict.fromkeys(w for w in words if w not in _UNSEARCHABLE))


def document_words(text: str) -> set[str]:
    """The casefolded words of a document, for document frequencies."""
    return set(_WORD.findall(text.casefold()))


def birth_year(entity: Entity, text: str) -> int | None:
    """A person's birth year from the life dates after their name, when unambiguous."""
    if entity.kind != "person" or not entity.sentences:
        return None
    paren = re.search(r"\(([^()]*)\)", text[slice(*entity.sentences[0])])
    body = paren.group(1) if paren else ""
    if "?" in body or re.search(r"\d{5}|\bc\.|circa|\bor\b", body):
        return None  # uncertain or garbled ("191816" is two dates run together)
    if "born" in body:
        head = body
    elif re.search(_DASH_CLASS, body):
        head = re.split(_DASH_CLASS, body)[0]  # the birth side of a range
    else:
        return None
    years = re.findall(r"(?<!\d)\d{4}(?!\d)", head)
    return int(years[0]) if years else None


def release_year(entity: Entity, text: str) -> int | None:
    """The year a work's first sentence dates it by: ``is a 2009 Polish film``."""
    if entity.kind not in {"film", "album", "song", "novel", "book", "play", "opera", "series"}:
        return None
    if not entity.sentences:
        return None
    match = re.search(r"\b(?:is|was) an? (\d{4})\b", text[slice(*entity.sentences[0])])
    return int(match.group(1)) if match else None
