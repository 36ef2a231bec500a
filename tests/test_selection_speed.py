"""The selection features stay what they were when their code is made faster.

``GOLDEN`` is the feature table of a fixed case as the code before the speed-up (commit
6a4456c: stems recomputed per call, title mentions tested pair by pair) computed it; the case
has titles named inside longer words, titles in parentheses, short titles, an untitled document
and repeated searches, so every column is exercised.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from sleuth.ranking import QuestionEvidence, Search, SeenDoc, selection_features
from sleuth.ranking.features import COVER_COLUMNS, SELECTION_COLUMNS
from sleuth.ranking.text import mentioned_by, mentions, stems

QUESTION = "Who founded the label that released Blue Harbor (album) by Ana Lind-Berg?"
DOCS = [
    SeenDoc(
        "blue",
        "Blue Harbor (album)",
        "Blue Harbor is an album by Ana Lind-Berg, released on Nordlys Records.",
        [(0, 1), (2, 3)],
    ),
    SeenDoc(
        "ana",
        "Ana Lind-Berg",
        "Ana Lind-Berg (born 1970) is a singer. Her album Blue Harbor sold well.",
        [(0, 2), (1, 1)],
    ),
    SeenDoc(
        "nord",
        "Nordlys Records",
        "Nordlys Records was founded by Per Holm in Oslo.\nIt released Blue Harbor.",
        [(2, 1)],
    ),
    SeenDoc(
        "per", "Per Holm", "Per Holm founded Nordlys Records; Holm was born in Bergen.", [(3, 1)]
    ),
    SeenDoc(
        "oslo", "Oslo", "Oslo is a city. Nordlys records are sold in Oslo-area shops.", [(3, 2)]
    ),
    SeenDoc("os", "OS", "OS is short. Blue Harbor's label.", [(1, 4)]),
    SeenDoc("holmx", "Holmx", "Holmxyz is not Holmx alone; per holm.", [(3, 5)]),
    SeenDoc("empty", "", "No title here, about founded labels.", []),
]
SEARCHES = [
    Search(QUESTION, 0),
    Search("Ana Lind-Berg", 0),
    Search("Nordlys Records founded label", 1),
    Search("Per Holm founded", 2),
]
EVIDENCE = QuestionEvidence(
    bm25={"blue": 7.0, "ana": 3.0, "nord": 2.0, "per": 1.0, "oslo": 0.5, "os": 0.0},
    bm25_rank={"blue": 1, "ana": 4, "nord": 9, "per": 30, "oslo": 80},
    dense={
        "blue": 0.7,
        "ana": 0.6,
        "nord": 0.5,
        "per": 0.45,
        "oslo": 0.2,
        "os": 0.1,
        "holmx": 0.05,
    },
    ppr={"blue": 0.3, "nord": 0.2, "per": 0.1},
)
GOLDEN = [
    [
        1.0,
        1.0,
        0.7,
        0.0,
        0.75,
        1.0,
        1.0,
        1.0,
        1.0,
        1.098612,
        0.526786,
        0.875,
        0.526786,
        0.0,
        0.0,
        1.0,
        0.0,
        0.0,
        0.75,
        0.392857,
        0.693147,
    ],
    [
        0.428571,
        0.25,
        0.6,
        -0.1,
        0.625,
        1.0,
        1.0,
        0.5,
        1.0,
        1.098612,
        0.875,
        0.526786,
        0.875,
        1.0,
        0.0,
        0.0,
        0.0,
        0.0,
        0.625,
        0.0,
        0.0,
    ],
    [
        0.285714,
        0.111111,
        0.5,
        -0.2,
        0.5,
        0.0,
        0.0,
        0.0,
        1.0,
        0.693147,
        0.875,
        0.526786,
        0.875,
        1.0,
        0.333333,
        0.666667,
        0.333333,
        0.875,
        0.875,
        0.133929,
        0.693147,
    ],
    [
        0.142857,
        0.033333,
        0.45,
        -0.25,
        0.125,
        0.0,
        0.0,
        0.0,
        1.0,
        0.693147,
        0.392857,
        0.875,
        0.392857,
        1.0,
        0.666667,
        0.333333,
        0.666667,
        0.392857,
        0.875,
        0.0,
        0.0,
    ],
    [
        0.071429,
        0.0125,
        0.2,
        -0.5,
        0.0,
        0.0,
        0.0,
        0.0,
        0.5,
        0.693147,
        0.392857,
        0.875,
        0.392857,
        0.0,
        0.666667,
        0.0,
        0.666667,
        0.392857,
        0.875,
        0.0,
        0.0,
    ],
    [
        0.0,
        0.0,
        0.1,
        -0.6,
        0.375,
        0.0,
        0.0,
        0.0,
        0.25,
        0.693147,
        0.0,
        0.0,
        0.875,
        0.0,
        0.0,
        0.0,
        0.0,
        0.0,
        0.375,
        0.0,
        0.0,
    ],
    [
        0.0,
        0.0,
        0.05,
        -0.65,
        0.0,
        0.0,
        0.0,
        0.0,
        0.2,
        0.693147,
        0.0,
        0.0,
        0.133929,
        0.0,
        0.666667,
        0.0,
        0.666667,
        0.392857,
        0.875,
        0.0,
        0.0,
    ],
    [
        0.0,
        0.0,
        0.0,
        -0.7,
        0.125,
        0.0,
        0.0,
        0.0,
        0.0,
        0.0,
        0.0,
        0.0,
        0.0,
        0.0,
        0.0,
        0.0,
        0.0,
        0.0,
        0.125,
        0.0,
        0.0,
    ],
]


def test_selection_features_match_the_code_before_the_speed_up():
    x = selection_features(QUESTION, DOCS, SEARCHES, EVIDENCE)
    # The columns that existed then; the cover group (tests/test_cover_features.py) and the
    # bridge-name columns (tests/test_ranking_trees.py) came later.
    later = {*COVER_COLUMNS, "name_held", "name_title", "names_held"}
    old = [SELECTION_COLUMNS.index(c) for c in SELECTION_COLUMNS if c not in later]
    np.testing.assert_allclose(x[:, old], np.asarray(GOLDEN), atol=1e-6)
    again = selection_features(QUESTION, DOCS, SEARCHES, EVIDENCE)  # the stems cache is warm
    np.testing.assert_array_equal(x, again)


_WORDS = st.sampled_from(["oslo", "Ana", "lind", "ana lind", "os", "(film)", "-", " ", "x", "é"])


@given(st.lists(st.lists(_WORDS, max_size=4).map("".join), min_size=1, max_size=6), st.data())
def test_mentioned_by_is_mentions_for_every_pair(titles, data):
    texts = [
        t.lower()
        for t in data.draw(
            st.lists(
                st.lists(_WORDS, max_size=8).map(" ".join),
                min_size=len(titles),
                max_size=len(titles),
            )
        )
    ]
    expected = [
        [j for j in range(len(texts)) if j != i and title and mentions(texts[j], title)]
        for i, title in enumerate(titles)
    ]
    assert mentioned_by(titles, texts) == expected


def test_stems_are_cached_and_immutable():
    first = stems("Founders founded the founding")
    assert first is stems("Founders founded the founding")
    assert first == frozenset({"founde", "foundi"})
