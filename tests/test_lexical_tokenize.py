"""The lexical side's own tokenizer gives exactly bm25s's tokens: saved BM25 indexes were built
with ``bm25s.tokenize``, so a query tokenized any other way would miss their vocabulary."""

from __future__ import annotations

import bm25s
from hypothesis import given, settings
from hypothesis import strategies as st

from sleuth.index.lexical import _STEMMER, tokenize


def bm25s_tokens(texts: list[str]) -> list[list[str]]:
    tokens: list[list[str]] = bm25s.tokenize(
        texts, stopwords="en", stemmer=_STEMMER, return_ids=False, show_progress=False
    )
    return tokens


WORDS = st.sampled_from(
    ["The", "and", "IS", "running", "ran", "Berg", "Ærø", "straße", "İstanbul", "ﬁle", "x", "42"]
)
PIECES = st.one_of(WORDS, st.text(max_size=12), st.sampled_from([" ", "-", "'", "\n", "(", "."]))
TEXTS = st.lists(PIECES, max_size=20).map("".join)


@settings(max_examples=300, deadline=None)
@given(st.lists(TEXTS, max_size=5))
def test_tokens_equal_bm25s_tokenize(texts: list[str]) -> None:
    assert tokenize(texts) == bm25s_tokens(texts)


def test_stop_words_dropped_words_stemmed_and_empty_texts_kept() -> None:
    texts = ["", "the and of", "Running Dogs ran, a-b", "Ana Lind-Berg (album)"]
    assert tokenize(texts) == bm25s_tokens(texts)
    assert tokenize(texts)[:3] == [[], [], ["run", "dog", "ran"]]
    assert tokenize([]) == []
