"""The bridge-name columns test each (text, name) pair once; they stay what the pair-by-pair
computation (every holder counted per name, every name tested per document) gives."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from sleuth.ranking import SeenDoc
from sleuth.ranking.chain import COMMON_NAME, _names_held
from sleuth.ranking.text import holds_name

WORD = st.sampled_from(
    [
        "Ana",
        "Lind",
        "Oslo",
        "Subject",
        "Blue",
        "Harbor",
        "Per",
        "Holm",
        "Kay",
        "ab",
        "Ana-b",
        "Dorn",
    ]
)
PHRASE = st.lists(WORD, min_size=1, max_size=3).map(" ".join)
QUESTION = st.sampled_from(["Who is Ana?", "Where was it held?", "Which Blue Harbor album?"])
DOC = st.builds(lambda title, text: SeenDoc("d", title, text), PHRASE | st.just(""), PHRASE)


def pairwise(question, docs, named, relevance):
    question_lower = question.lower()
    names = [(p, name.lower()) for p, name in named if p is not None and name]
    names = [(p, n) for p, n in names if n not in question_lower]
    texts = [f"{d.title}\n{d.text}".lower() for d in docs]
    most = max(1.0, COMMON_NAME * len(docs))
    common = {
        (p, n): sum(holds_name(t, n) for j, t in enumerate(texts) if j != p) for p, n in names
    }
    names = [(p, n) for p, n in names if common[p, n] <= most]
    rows = []
    for i, d in enumerate(docs):
        in_text = [relevance[p] for p, n in names if p != i and holds_name(texts[i], n)]
        in_title = [relevance[p] for p, n in names if p != i and holds_name(d.title.lower(), n)]
        rows.append(
            (max(in_text, default=0.0), max(in_title, default=0.0), math.log1p(len(in_text)))
        )
    return rows


@settings(max_examples=200, deadline=None)
@given(st.lists(DOC, min_size=1, max_size=12), st.data())
def test_name_columns_equal_the_pair_by_pair_computation(docs, data):
    n = len(docs)
    parent = st.none() | st.integers(0, n - 1)
    named = data.draw(st.lists(st.tuples(parent, PHRASE | st.just("")), max_size=8))
    named += named[: data.draw(st.integers(0, len(named)))]  # names recur (several searches)
    relevance = data.draw(st.lists(st.floats(0, 1), min_size=n, max_size=n))
    question = data.draw(QUESTION)
    assert _names_held(question, docs, named, relevance) == pairwise(
        question, docs, named, relevance
    )
