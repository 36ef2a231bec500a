"""The cover features: what a document adds to the documents that answer the question best.

A hand-built two-hop transcript: the first hop's document ("Ana Lind"), a sibling that repeats it
("Ana Lind (album)"), the last hop's document ("Norway", found by a bridge search) and noise.
"""

from __future__ import annotations

import numpy as np
import pytest

from sleuth.ranking import QuestionEvidence, Search, SeenDoc, selection_features
from sleuth.ranking.features import COVER_COLUMNS, FEATURE_GROUPS, SELECTION_COLUMNS

QUESTION = "When did the country where Ana Lind was born join the European Union?"
# Question stems (7): ana, born, countr, europe, join, lind, union.
DOCS = [
    SeenDoc("ana", "Ana Lind", "Ana Lind was born in Norway.", [(0, 1)]),  # ana lind born
    SeenDoc("album", "Ana Lind (album)", "Ana Lind is the debut album of Ana Lind.", [(0, 2)]),
    SeenDoc("norway", "Norway", "Norway voted not to join the European Union.", [(1, 2)]),
    SeenDoc("rain", "Rain", "Rain falls in Norway.", [(1, 1)]),
]
SEARCHES = [Search(QUESTION, 0), Search("Norway join European Union", 1)]
# Relevance (half question cover, half BM25 share): ana 0.714, album 0.476, norway 0.381, rain 0.
EVIDENCE = QuestionEvidence(
    bm25={"ana": 6.0, "album": 4.0, "norway": 2.0},
    bm25_rank={"ana": 1, "album": 2, "norway": 5},
    dense={"ana": 0.6, "album": 0.5, "norway": 0.4, "rain": 0.1},
)


def _col(name: str, docs: list[SeenDoc] = DOCS) -> list[float]:
    x = selection_features(QUESTION, docs, SEARCHES, EVIDENCE)
    return [round(float(v), 4) for v in x[:, SELECTION_COLUMNS.index(name)]]


def test_cover_is_a_feature_group():
    assert FEATURE_GROUPS["cover"] == COVER_COLUMNS
    assert set(COVER_COLUMNS) <= set(SELECTION_COLUMNS)


def test_residual_cover_counts_words_the_three_most_relevant_others_leave():
    # Norway's join/europe/union are covered by none of ana, album, rain; ana adds "born".
    assert _col("residual_cover") == [round(1 / 7, 4), 0.0, round(3 / 7, 4), 0.0]


def test_novel_share_is_zero_for_a_document_repeating_a_more_relevant_one():
    # album covers ana + lind, both already covered by the more relevant ana.
    assert _col("novel_share") == [1.0, 0.0, 1.0, 0.0]


def test_bridge_tail_weighs_the_bridge_searchs_question_words_by_rank():
    # The bridge search asks for join/europe/union; Norway covers all three at rank 2.
    assert _col("bridge_tail") == [0.0, 0.0, 0.5, 0.0]
    # The whole-question search is no bridge: the first hop gets nothing from it.
    first_only = [SeenDoc("norway", "Norway", DOCS[2].text, [(0, 1)])]
    assert _col("bridge_tail", first_only) == [0.0]


def test_link_gain_is_what_a_document_adds_to_the_best_document_linked_with_it():
    # Norway is named by ana (and rain); ana is the more relevant: Norway adds 3 of 7 words.
    # ana is linked with album (it names "Ana Lind") and Norway; album is the more relevant.
    assert _col("link_gain") == [round(1 / 7, 4), 0.0, round(3 / 7, 4), 0.0]


def test_title_sibling_is_title_overlap_with_a_more_relevant_document():
    # "Ana Lind (album)" shares ana, lind of its three title stems with "Ana Lind".
    assert _col("title_sibling") == [0.0, round(2 / 3, 4), 0.0, 0.0]


@pytest.mark.parametrize("question", ["", "the of and"])
def test_a_question_without_content_words_has_no_cover(question):
    x = selection_features(question, DOCS, SEARCHES, EVIDENCE)
    cover = x[:, [SELECTION_COLUMNS.index(c) for c in COVER_COLUMNS]]
    assert np.all(cover == 0.0)
