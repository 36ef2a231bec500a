"""The offline generator's templates: a draft task (clues, query, answer, gold documents and the
quotes behind each clue) from one entity, one link or two dated entities; a string names why a
candidate gave no draft.

* ``single`` (1 hop): a masked sentence of B; the answer is B's title.
* ``bridge`` (2 hops): a sentence of B describing ``[Y]`` plus the words of A around its mention
  of ``[Y]``; the answer is A's title.
* ``comparison`` (2 hops): two people (or works) dated in their first sentence; the answer is the
  title of the earlier one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from sleuth.datagen.evidence import QuoteEvidence
from sleuth.datagen.offline.config import OfflineConfig
from sleuth.datagen.offline.corpus import Corpus, Link, min_clue_words
from sleuth.datagen.offline.masking import (
    Entity,
    ascii_fold,
    birth_year,
    content_words,
    mask_text,
    name_regex,
    release_year,
)
from sleuth.datagen.quotes import normalize

TARGET, OTHER = "[X]", "[Y]"
_TOKEN = re.compile(r"\S+")


@dataclass(frozen=True)
class Draft:
    """A task before verification and distractor mining."""

    template: str
    hops: int
    clues: tuple[str, ...]
    query: str
    answer: Entity
    gold: tuple[str, ...]
    """Gold document ids in hop order."""
    evidence: dict[str, list[QuoteEvidence]] = field(hash=False)


def draft_single(entity: Entity, corpus: Corpus, config: OfflineConfig) -> Draft | str:
    """A one-hop task: which entity does this masked sentence describe?"""
    picked = clue_sentence(entity, [(entity, TARGET)], TARGET, corpus, config)
    if picked is None:
        return "no_clue_sentence"
    quote, clue = picked
    query = f'Clue about {TARGET}, {a_kind(entity.kind)}: "{clue}" {ask(entity.kind, TARGET)}'
    evidence = {entity.doc_id: [QuoteEvidence(quote=quote, clue_indices=[0])]}
    return Draft("single", 1, (clue,), query, entity, (entity.doc_id,), evidence)


def draft_bridge(link: Link, corpus: Corpus, config: OfflineConfig) -> Draft | str:
    """A two-hop bridge: clue 1 identifies ``[Y]`` (B); clue 2 is the few words around the
    mention of ``[Y]`` in A, found in no other document, so A is reached only through B."""
    a, b = corpus.entities[link.source], corpus.entities[link.target]
    masks = [(a, TARGET), (b, OTHER)]
    picked = clue_sentence(b, masks, OTHER, corpus, config, forbid=TARGET)
    if picked is None:
        return "no_clue_sentence"
    quote_b, clue_b = picked
    window = link_clue(a, b, link.sentence, masks, OTHER, corpus, config)
    if isinstance(window, str):
        return window
    quote_a, clue_a = window
    query = (
        f'Clue 1 is about {OTHER}, {a_kind(b.kind)}: "{clue_b}" '
        f'Clue 2: the article about {TARGET}, {a_kind(a.kind)}, says "{clue_a}". '
        f"{ask(a.kind, TARGET)}"
    )
    evidence = {
        b.doc_id: [QuoteEvidence(quote=quote_b, clue_indices=[0])],
        a.doc_id: [QuoteEvidence(quote=quote_a, clue_indices=[1])],
    }
    return Draft("bridge", 2, (clue_b, clue_a), query, a, (b.doc_id, a.doc_id), evidence)


def link_clue(
    a: Entity,
    b: Entity,
    sentence: int,
    masks: list[tuple[Entity, str]],
    label: str,
    corpus: Corpus,
    config: OfflineConfig,
) -> tuple[str, str] | str:
    """The words of A's ``sentence`` around its mention of B (``label`` once masked) and that
    clue, or why there is none: too few words, or the same words in another document naming B
    (then the clue would not single out A)."""
    quote = _mention_window(a, b, sentence, corpus, config)
    clue = mask_text(quote, masks) if quote else ""
    if not quote or label not in clue or len(content_words(clue)) < config.min_window_words:
        return "weak_link_window"
    others = corpus.mentions.get(b.doc_id, set()) - {a.doc_id}
    if any(normalize(quote) in corpus.normalized[d] for d in others):
        return "ambiguous_link_window"
    return quote, clue


def _mention_window(
    a: Entity, b: Entity, sentence: int, corpus: Corpus, config: OfflineConfig
) -> str | None:
    """The verbatim words of A's sentence around its first mention of B."""
    text = corpus.texts[a.doc_id]
    start, end = a.sentences[sentence]
    spans = [
        m.span()
        for name in b.names
        for m in re.compile(name_regex(name), re.IGNORECASE).finditer(text, start, end)
    ]
    if not spans:
        return None
    first = min(spans)
    tokens = [t.span() for t in _TOKEN.finditer(text, start, end)]
    before = [t for t in tokens if t[1] <= first[0]][-config.window_words :]
    after = [t for t in tokens if t[0] >= first[1]][: config.window_words]
    return text[(before or [first])[0][0] : (after or [first])[-1][1]]


def draft_comparison(
    first: Entity, second: Entity, corpus: Corpus, config: OfflineConfig
) -> Draft | str:
    """A two-hop comparison: which of two masked people was born (or works came out) first?"""
    year_first, year_second = (dating_year(e, corpus) for e in (first, second))
    if year_first is None or year_second is None or year_first == year_second:
        return "no_distinct_years"
    masks = [(first, TARGET), (second, OTHER)]
    quotes = [corpus.texts[e.doc_id][slice(*e.sentences[0])] for e in (first, second)]
    clues = [mask_text(q, masks) for q in quotes]
    labelled = TARGET in clues[0] and OTHER in clues[1]
    if not labelled or not all(_usable(c, corpus, config) for c in clues):
        return "no_clue_sentence"
    earlier = first if year_first < year_second else second
    question = (
        f"Who was born first, {TARGET} or {OTHER}? Give the name."
        if first.kind == "person"
        else f"Which came out first, {TARGET} or {OTHER}? Give the title."
    )
    query = (
        f'Clue 1 is about {TARGET}, {a_kind(first.kind)}: "{clues[0]}" '
        f'Clue 2 is about {OTHER}, {a_kind(second.kind)}: "{clues[1]}" {question}'
    )
    evidence = {
        e.doc_id: [QuoteEvidence(quote=q, clue_indices=[i])]
        for i, (e, q) in enumerate(zip((first, second), quotes, strict=True))
    }
    gold = (first.doc_id, second.doc_id)
    return Draft("comparison", 2, tuple(clues), query, earlier, gold, evidence)


def clue_sentence(
    entity: Entity,
    masks: list[tuple[Entity, str]],
    label: str,
    corpus: Corpus,
    config: OfflineConfig,
    forbid: str | None = None,
) -> tuple[str, str] | None:
    """The first sentence of ``entity`` that, masked, still names it by ``label`` and keeps
    enough searchable words: (verbatim quote, masked clue)."""
    text = corpus.texts[entity.doc_id]
    for start, end in entity.sentences:
        quote = text[start:end]
        clue = mask_text(quote, masks)
        if (
            label in clue
            and (forbid is None or forbid not in clue)
            and _usable(clue, corpus, config)
        ):
            return quote, clue
    return None


def _usable(clue: str, corpus: Corpus, config: OfflineConfig) -> bool:
    """Short enough to read as a clue, with enough words, some rare, to identify its subject."""
    words = content_words(clue)
    rare = [w for w in words if corpus.is_rare(w, config.rare_df)]
    return (
        len(clue) <= config.max_clue_chars
        and len(words) >= min_clue_words(len(corpus.texts), config.min_clue_words)
        and len(rare) >= config.min_rare_words
    )


def dating_year(entity: Entity, corpus: Corpus) -> int | None:
    text = corpus.texts[entity.doc_id]
    return birth_year(entity, text) or release_year(entity, text)


def a_kind(kind: str) -> str:
    return f"{'an' if kind[:1] in 'aeiou' else 'a'} {kind}"


def ask(kind: str, label: str) -> str:
    if kind == "person":
        return f"Who is {label}? Give the name."
    if kind == "entity":
        return f"What is {label}? Give its name."
    return f"Which {kind} is {label}? Give the title."


def aliases_of(entity: Entity) -> list[str]:
    """Other names accepted as the answer: title variants, the opening form, accent-free forms."""
    forms = [*entity.names, *(ascii_fold(n) for n in entity.names)]
    return [f for f in dict.fromkeys(forms) if f != entity.title]
