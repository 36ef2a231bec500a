"""The ``fact`` template: one-hop tasks from any corpus, titled or not (e-mails, notes, templated
records), for when the link templates, which need Wikipedia-style titles, fall short.

A fact task masks one *answer span* of a verbatim sentence — a name (capitalised words), an
e-mail address or an identifier with a digit — and asks for it: ``A document says: "[X] works at
Acme Corp in Boston." What is [X]?``. It ships only when the masked sentence singles out one place
in the corpus: every occurrence of its fixed words, in any document, must be this sentence with
this answer (so a templated sentence shared by two records, or a message copied into two mailboxes,
gives no task), and it keeps the searchable words every clue must.
Verification, distractors and leakage flags are the other templates' (:mod:`.vetting`).
"""

from __future__ import annotations

import random
import re
from collections.abc import Collection, Iterable, Iterator

from sleuth.datagen.evidence import QuoteEvidence
from sleuth.datagen.offline.config import OfflineConfig
from sleuth.datagen.offline.corpus import Corpus, min_clue_words
from sleuth.datagen.offline.masking import Entity, content_words, name_regex, split_sentences
from sleuth.datagen.offline.templates import TARGET, Draft
from sleuth.datagen.quotes import normalize

FACT = "fact"
_EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
# A token with a digit and 3+ characters: deal and meter numbers, codes like EB3131B or US5394511.
_IDENT = re.compile(r"(?<![\w@.-])(?=[\w-]*\d)[A-Za-z0-9][\w-]{2,}(?![\w@-])")
_CAPS = re.compile(
    r"(?<![\w.@'-])[A-Z][A-Za-z'&-]*[a-z][A-Za-z'&-]*(?: [A-Z][A-Za-z'&-]*[a-z]\w*){0,3}"
)
_HEADER = re.compile(r"^\s*(?:From|To|Cc|Bcc|Date|Subject|Sent|Re|Fw|Fwd):", re.I | re.M)
# Capitalised words that name nothing: greetings, days, months, sentence openers.
_NOT_NAME_WORDS = (
    "the this that these those there then thanks thank please hello dear regards best hi"
    " monday tuesday wednesday thursday friday saturday sunday january february march april"
    " may june july august september october november december i we you he she it they"
    " our your his her their my also if in on at for and but or as so"
)
_NOT_NAMES = frozenset(_NOT_NAME_WORDS.split())
_LOWER = re.compile(r"(?<![\w'-])[a-z][a-z'-]*(?![\w'-])")
_SENTINEL = "qzxq"
_MAX_ANSWER_CHARS = 60


def fact_drafts(corpus: Corpus, rng: random.Random, config: OfflineConfig) -> Iterator[Draft | str]:
    """Fact drafts, at most one kept per document, documents in seeded order."""
    doc_ids = sorted(corpus.texts)
    rng.shuffle(doc_ids)
    common = lowercase_words(corpus.texts.values())
    for doc_id in doc_ids:
        yield from _document_drafts(doc_id, corpus, config, common)


def lowercase_words(texts: Iterable[str]) -> set[str]:
    """Words written in lower case somewhere in the corpus: capitalised, they start a sentence
    or a heading ("Million", "Interim"), they do not name anything."""
    return {w for text in texts for w in _LOWER.findall(text)}


def _document_drafts(
    doc_id: str, corpus: Corpus, config: OfflineConfig, common: set[str]
) -> Iterator[Draft | str]:
    """Candidates of one document until one draft is made (or a reason why none was)."""
    text = corpus.texts[doc_id]
    reason = "no_answer_span"
    for start, end in split_sentences(text):
        quote = text[start:end]
        if _HEADER.search(quote) or len(quote) > 2 * config.max_clue_chars:
            continue
        for answer in answer_spans(quote, common):
            draft = draft_fact(doc_id, quote, answer, corpus, config)
            if isinstance(draft, Draft):
                yield draft
                return
            reason = draft
    yield reason


def answer_spans(sentence: str, common: Collection[str] = ()) -> list[str]:
    """Names, e-mail addresses and identifiers in a sentence, in order, each once.

    A name loses leading words that name nothing (a short list, and ``common``: words the corpus
    writes in lower case); a single capitalised word counts only away from the sentence start.
    """
    flat = " ".join(sentence.split())
    found: list[tuple[int, str]] = [(m.start(), m.group()) for m in _EMAIL.finditer(flat)]
    emails = [span for _, span in found]
    found += [
        (m.start(), m.group())
        for m in _IDENT.finditer(flat)
        if not any(m.group() in e for e in emails)
    ]
    for m in _CAPS.finditer(flat):
        words = m.group().split()
        while words and (words[0].casefold() in _NOT_NAMES or words[0].casefold() in common):
            words.pop(0)
        single = len(words) == 1
        if not words or (single and (m.start() == 0 or len(words[0]) < 4)):
            continue
        found.append((m.start(), " ".join(words)))
    spans = [s.strip(".,;:'") for _, s in sorted(found)]
    return [s for s in dict.fromkeys(spans) if 3 <= len(s) <= _MAX_ANSWER_CHARS]


def draft_fact(
    doc_id: str, quote: str, answer: str, corpus: Corpus, config: OfflineConfig
) -> Draft | str:
    """A one-hop fact task: ``quote`` with ``answer`` masked, or why it cannot be one."""
    flat = " ".join(quote.split())
    clue = re.sub(name_regex(answer), TARGET, flat, flags=re.IGNORECASE)
    if TARGET not in clue or not searchable(clue, corpus, config):
        return "no_clue_sentence"
    if not clue_fits_once(doc_id, flat, clue, corpus):
        return "clue_not_unique"
    query = f'A document says: "{clue}" What is {TARGET}? Give it as the document writes it.'
    entity = Entity(doc_id, answer, FACT, (answer,), None, ())
    evidence = {doc_id: [QuoteEvidence(quote=quote, clue_indices=[0])]}
    return Draft(FACT, 1, (clue,), query, entity, (doc_id,), evidence)


def searchable(clue: str, corpus: Corpus, config: OfflineConfig) -> bool:
    """Short enough to read as a clue, with the searchable words any clue needs. Rare words are
    not required (the link templates' proxy for "singles out its subject"): :func:`clue_fits_once`
    checks that exactly, and templated records share every word but their values."""
    words = content_words(clue)
    needed = min_clue_words(len(corpus.texts), config.min_clue_words)
    return len(clue) <= config.max_clue_chars and len(words) >= needed


def clue_fits_once(doc_id: str, sentence: str, clue: str, corpus: Corpus) -> bool:
    """Every occurrence of the clue's fixed words, with any filler, is ``sentence`` in ``doc_id``."""
    pieces = normalize(clue.replace(TARGET, _SENTINEL)).split(_SENTINEL)
    inner = [p for p in pieces if p.strip()]
    if not inner:
        return False
    gap = rf".{{1,{_MAX_ANSWER_CHARS}}}?"
    skeleton = re.compile(_strip_gaps(pieces, gap))
    longest = max(inner, key=len)
    exact = corpus.normalized[doc_id].count(normalize(sentence))
    if exact == 0:
        return False
    seen = 0
    for other, text in corpus.normalized.items():
        if longest in text:
            seen += sum(1 for _ in skeleton.finditer(text))
            if seen > exact or (other != doc_id and skeleton.search(text)):
                return False
    return seen == exact


def _strip_gaps(pieces: list[str], gap: str) -> str:
    """The regex of the pieces joined by gaps, without gaps at either end (an answer at the
    start or end of the sentence leaves an empty piece there)."""
    while pieces and not pieces[0]:
        pieces = pieces[1:]
    while pieces and not pieces[-1]:
        pieces = pieces[:-1]
    return gap.join(re.escape(p) for p in pieces)
