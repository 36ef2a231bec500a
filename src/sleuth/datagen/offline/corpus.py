"""The offline generator's view of a corpus: entity profiles, BM25 over whole documents, and the
links between documents (a sentence of A names B's title)."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from sleuth.corpus.models import Document
from sleuth.datagen.offline.config import OfflineConfig
from sleuth.datagen.offline.masking import Entity, document_words, name_regex, profile_document
from sleuth.datagen.quotes import normalize

_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Link:
    """Sentence ``sentence`` of document ``source`` names document ``target``."""

    source: str
    target: str
    sentence: int


class OfflineBM25:
    """BM25 (bm25s, English stemming and stopwords) over whole documents, ids in corpus order."""

    def __init__(self, ids: Sequence[str], texts: Sequence[str]):
        import bm25s  # imported here: it pulls in scipy, which `import sleuth.datagen` need not
        import Stemmer

        self._ids = list(ids)
        self._tokenizer = bm25s.tokenization.Tokenizer(
            stemmer=Stemmer.Stemmer("english"), stopwords="en"
        )
        tokens = self._tokenizer.tokenize(list(texts), return_as="ids", show_progress=False)
        self._bm25 = bm25s.BM25()
        self._bm25.index(tokens, show_progress=False)
        self._id_rank = np.argsort(np.argsort(np.asarray(self._ids, dtype=object)))

    def search(self, query: str, k: int) -> list[str]:
        """Ids of the top ``k`` documents with a positive score, best first, ties by id (the
        order is stored in task files, so it must not depend on the machine or corpus order)."""
        from sleuth.index.lexical import rank_scores

        tokens = self._tokenizer.tokenize(
            [query], update_vocab=False, return_as="ids", show_progress=False
        )[0]
        if not tokens:
            return []
        scores = self._bm25.get_scores(tokens)
        return [self._ids[i] for i in rank_scores(scores, k, self._id_rank)]


@dataclass
class Corpus:
    """Documents, their entity profiles, normalised texts, BM25 index and links."""

    texts: dict[str, str]
    entities: dict[str, Entity]
    normalized: dict[str, str]
    lexical: OfflineBM25
    links: list[Link]
    mentions: dict[str, set[str]]
    """Entity id → ids of the documents naming it in any case (candidates for ambiguity)."""
    word_df: Counter[str]
    """Casefolded word → number of documents containing it."""

    @classmethod
    def build(cls, documents: Sequence[Document], config: OfflineConfig) -> Corpus:
        texts = {d.id: d.text for d in documents}
        profiles = (profile_document(d) for d in documents)
        entities = {e.doc_id: e for e in profiles if e is not None}
        links, mentions = build_links(entities, texts, config)
        return cls(
            texts=texts,
            entities=entities,
            normalized={i: normalize(t) for i, t in texts.items()},
            lexical=OfflineBM25(list(texts), list(texts.values())),
            links=links,
            mentions=mentions,
            word_df=Counter(w for t in texts.values() for w in document_words(t)),
        )

    def is_rare(self, word: str, share: float) -> bool:
        return self.word_df[word] <= rare_limit(len(self.texts), share)


def rare_limit(n_docs: int, share: float) -> float:
    """Most documents a rare word may be in: ``share`` of them, but never fewer than 2 or log2
    of the corpus size. Below about 1,000 documents a share allows almost nothing, while names
    there recur in the few documents that mention each other and two such words still single
    out an entity; above it the share decides."""
    return max(2.0, share * n_docs, math.log2(max(n_docs, 1)))


def min_clue_words(n_docs: int, configured: int) -> int:
    """Searchable words a clue needs: ``configured`` from 1,000 documents up, down to 3 in a
    corpus of tens (short stub articles, and fewer rivals to tell apart)."""
    return min(configured, max(3, round(math.log10(max(n_docs, 1))) + 2))


def build_links(
    entities: dict[str, Entity], texts: dict[str, str], config: OfflineConfig
) -> tuple[list[Link], dict[str, set[str]]]:
    """Every (A, B, sentence) where a sentence of A names B with B's exact capitalisation, and
    for each B the documents naming it in any case.

    Names shared by two entities, one-word names cut from a disambiguated title, and names in
    more than ``max_name_df`` documents do not link; nor do sentence-initial single words
    (capitalised anyway).
    """
    index = _first_word_index(entities, config)
    found: dict[tuple[str, str], tuple[int, str]] = {}
    df: Counter[str] = Counter()
    mentions: dict[str, set[str]] = {}
    for doc_id, entity in entities.items():
        seen: set[str] = set()
        for i, (start, end) in enumerate(entity.sentences):
            for name, owner, pos in _mentions(index, texts[doc_id], start, end):
                seen.add(name)
                mentions.setdefault(owner, set()).add(doc_id)
                is_exact = texts[doc_id].startswith(name, pos) and (" " in name or pos > start)
                if owner != doc_id and is_exact:
                    found.setdefault((doc_id, owner), (i, name))
        df.update(seen)
    links = [
        Link(source, target, i)
        for (source, target), (i, name) in sorted(found.items())
        if df[name] <= config.max_name_df
    ]
    return links, mentions


def _first_word_index(
    entities: dict[str, Entity], config: OfflineConfig
) -> dict[str, list[tuple[str, str, re.Pattern[str]]]]:
    """Casefolded first word → (name, owner id, pattern) for every unambiguous linkable name."""
    owners: dict[str, set[str]] = {}
    for entity in entities.values():
        for name in entity.names:
            owners.setdefault(name.casefold(), set()).add(entity.doc_id)
    index: dict[str, list[tuple[str, str, re.Pattern[str]]]] = {}
    for entity in entities.values():
        for name in entity.names:
            first = re.match(r"\w+", name)
            # "Heaven (song)" says itself that the bare word "Heaven" means other things too.
            ambiguous = " " not in name and name != entity.title
            linkable = len(name) >= config.min_name_chars and re.search(r"[^\W\d_]", name)
            if first and linkable and not ambiguous and len(owners[name.casefold()]) == 1:
                pattern = re.compile(name_regex(name), re.IGNORECASE)
                index.setdefault(first.group().casefold(), []).append(
                    (name, entity.doc_id, pattern)
                )
    return index


def _mentions(
    index: dict[str, list[tuple[str, str, re.Pattern[str]]]], text: str, start: int, end: int
) -> Iterator[tuple[str, str, int]]:
    """(name, owner, position) of every indexed name in ``text[start:end]``."""
    for word in _WORD.finditer(text, start, end):
        for name, owner, pattern in index.get(word.group().casefold(), ()):
            if pattern.match(text, word.start(), end):
                yield name, owner, word.start()
