"""The ``relay`` template: two-hop tasks through a value two documents share (a rare name, e-mail
address or identifier), for corpora without Wikipedia-style titles.

Document A names the shared value ``[Y]`` in a sentence that singles it out; document B names
``[Y]`` next to the answer ``[X]``. The task gives both sentences masked: ``One document says:
"[Y] works at Acme Corp in Boston." Another says: "[Y] manages project P-[X] for Acme Corp."``.
The solver finds ``[Y]`` through A, then B through ``[Y]``. A ships only when its clue fits no
other place in the corpus (the fact template's check), the shared value occurs in these two
documents only, the answer does not occur in A, and B's sentence with ``[Y]`` filled in fits no
other place. Verification, distractors and leakage flags are the other templates' (:mod:`.vetting`).
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator

from sleuth.datagen.evidence import QuoteEvidence
from sleuth.datagen.offline.config import OfflineConfig
from sleuth.datagen.offline.corpus import Corpus
from sleuth.datagen.offline.facts import (
    FACT,
    answer_spans,
    clue_fits_once,
    lowercase_words,
    searchable,
)
from sleuth.datagen.offline.masking import Entity, name_regex, split_sentences
from sleuth.datagen.offline.templates import OTHER, TARGET, Draft
from sleuth.datagen.quotes import normalize

RELAY = "relay"
_MAX_SENTENCE_CHARS = 400

Sentence = tuple[str, str]
"""(document id, a sentence of it, whitespace flattened)."""


def relay_drafts(
    corpus: Corpus, rng: random.Random, config: OfflineConfig
) -> Iterator[Draft | str]:
    """Relay drafts over values found in exactly two documents, in seeded order; each document
    answers at most once."""
    common = lowercase_words(corpus.texts.values())
    shared = _shared_values(corpus, common)
    values = sorted(shared)
    rng.shuffle(values)
    answered: set[str] = set()
    for value in values:
        found = shared[value]
        docs = sorted({d for d, _ in found})
        if len(docs) != 2 or answered & set(docs) or not _in_two_documents(value, corpus):
            continue
        draft = _draft(value, found, corpus, config, common)
        if isinstance(draft, Draft):
            answered.add(draft.gold[1])
        yield draft


def _shared_values(corpus: Corpus, common: set[str]) -> dict[str, list[Sentence]]:
    """Value → the sentences naming it, for values named in more than one document."""
    by_value: dict[str, list[Sentence]] = {}
    for doc_id in sorted(corpus.texts):
        text = corpus.texts[doc_id]
        for start, end in split_sentences(text):
            flat = " ".join(text[start:end].split())
            if len(flat) > _MAX_SENTENCE_CHARS:
                continue
            for value in answer_spans(flat, common):
                by_value.setdefault(value, []).append((doc_id, flat))
    return {v: s for v, s in by_value.items() if len({d for d, _ in s}) > 1}


def _in_two_documents(value: str, corpus: Corpus) -> bool:
    needle = normalize(value)
    return sum(1 for text in corpus.normalized.values() if needle in text) == 2


def _draft(
    value: str, found: list[Sentence], corpus: Corpus, config: OfflineConfig, common: set[str]
) -> Draft | str:
    """The first (A, B) order and sentence pair that makes a relay, or why none does."""
    reason = "no_clue_sentence"
    docs = sorted({d for d, _ in found})
    for first, second in (docs, docs[::-1]):
        for quote_a in (s for d, s in found if d == first):
            clue_a = _mask(quote_a, value, TARGET)
            if not searchable(clue_a, corpus, config):
                continue
            if not clue_fits_once(first, quote_a, clue_a, corpus):
                reason = "clue_not_unique"
                continue
            for quote_b in (s for d, s in found if d == second):
                draft = _second_hop(value, first, second, quote_a, quote_b, corpus, common)
                if draft is not None:
                    return draft
    return reason


def _second_hop(
    value: str,
    first: str,
    second: str,
    quote_a: str,
    quote_b: str,
    corpus: Corpus,
    common: set[str],
) -> Draft | None:
    """B's sentence with ``value`` as ``[Y]`` and an answer absent from A as ``[X]``."""
    for answer in answer_spans(quote_b, common):
        if value.casefold() in answer.casefold() or answer.casefold() in value.casefold():
            continue
        if normalize(answer) in corpus.normalized[first]:
            continue
        clue_b = _mask(_mask(quote_b, value, OTHER), answer, TARGET)
        if TARGET not in clue_b or not clue_fits_once(
            second, quote_b, _mask(quote_b, answer, TARGET), corpus
        ):
            continue
        clue_a = _mask(quote_a, value, OTHER)
        query = (
            f'One document says: "{clue_a}" Another document says: "{clue_b}" Both name the same '
            f"{OTHER}. What is {TARGET}? Give it as the document writes it."
        )
        entity = Entity(second, answer, FACT, (answer,), None, ())
        evidence = {
            first: [QuoteEvidence(quote=quote_a, clue_indices=[0])],
            second: [QuoteEvidence(quote=quote_b, clue_indices=[1])],
        }
        return Draft(RELAY, 2, (clue_a, clue_b), query, entity, (first, second), evidence)
    return None


def _mask(sentence: str, value: str, placeholder: str) -> str:
    return re.sub(name_regex(value), placeholder, sentence, flags=re.IGNORECASE)
