"""The learned ranker: hand-computed features, the linear heads, the split, training end to end."""

from __future__ import annotations

import math
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sleuth.demo import OFFLINE_TASKS as DEMO_TASKS
from sleuth.errors import InputError
from sleuth.index import Index
from sleuth.ranking import (
    SEARCH_COLUMNS,
    SELECTION_COLUMNS,
    Candidate,
    LinearHead,
    QuestionEvidence,
    RankerModel,
    Search,
    SeenDoc,
    load_ranker,
    search_features,
    selection_features,
)
from sleuth.ranking.text import evidence_sentence
from sleuth.tasks import load_tasks, read_2wiki
from sleuth.tasks.split import is_heldout, split_tasks
from sleuth.tools.toolbox import Toolbox
from sleuth.train.ranker import train_ranker
from sleuth.train.recipes.data import generated_tasks

PACKAGED_2WIKI = "data/benchmarks/2wikimultihopqa/2wikimultihopqa_dev_200.jsonl"


def _col(matrix: np.ndarray, columns: tuple[str, ...], name: str) -> list[float]:
    return [round(float(v), 4) for v in matrix[:, columns.index(name)]]


def test_search_features_by_hand():
    cands = [
        Candidate("a_0", "Zanzibar Quartet", "played music", 2 / 61, 1, 8.0, 1, 0.9),
        Candidate("b_0", "Weather (film)", "zanzibar rain", 1 / 62, None, 0.0, 2, 0.5),
    ]
    x = search_features("Who founded the Zanzibar Quartet", cands)
    assert x.shape == (2, len(SEARCH_COLUMNS))
    assert _col(x, SEARCH_COLUMNS, "rrf") == [round(120 / 61, 4), round(60 / 62, 4)]
    assert _col(x, SEARCH_COLUMNS, "bm25_rr") == [1.0, 0.0]
    assert _col(x, SEARCH_COLUMNS, "dense_rr") == [1.0, 0.5]
    assert _col(x, SEARCH_COLUMNS, "bm25_rel") == [1.0, 0.0]
    # query stems: founde, zanzib, quarte → a covers zanzib + quarte, b covers zanzib
    assert _col(x, SEARCH_COLUMNS, "query_cover") == [round(2 / 3, 4), round(1 / 3, 4)]
    assert _col(x, SEARCH_COLUMNS, "title_named") == [1.0, 0.0]
    assert _col(x, SEARCH_COLUMNS, "title_cover") == [1.0, 0.0]


def test_selection_features_link_a_bridge_document_to_the_question():
    question = "Where was the director of Blue Harbor born?"
    docs = [
        SeenDoc("blue", "Blue Harbor", "Blue Harbor is a film directed by Ana Lind.", [(0, 1)]),
        SeenDoc("ana", "Ana Lind", "Ana Lind was born in Oslo.", [(1, 1)]),
        SeenDoc("oslo", "Oslo", "Oslo is the capital of Norway.", [(1, 2)]),
    ]
    searches = [Search(question, 0), Search("Ana Lind born", 1)]
    evidence = QuestionEvidence(
        bm25={"blue": 6.0, "ana": 1.5, "oslo": 0.0},
        bm25_rank={"blue": 1, "ana": 7},
        dense={"blue": 0.8, "ana": 0.4, "oslo": 0.1},
    )
    x = selection_features(question, docs, searches, evidence)
    assert x.shape == (3, len(SELECTION_COLUMNS))
    assert _col(x, SELECTION_COLUMNS, "bm25_rel") == [1.0, 0.25, 0.0]
    assert _col(x, SELECTION_COLUMNS, "bm25_rr") == [1.0, round(1 / 7, 4), 0.0]
    assert _col(x, SELECTION_COLUMNS, "dense_gap") == [0.0, -0.4, -0.7]
    assert _col(x, SELECTION_COLUMNS, "title_named") == [1.0, 0.0, 0.0]
    assert _col(x, SELECTION_COLUMNS, "question_search_rr") == [1.0, 0.0, 0.0]
    assert _col(x, SELECTION_COLUMNS, "best_rr") == [1.0, 1.0, 0.5]
    assert _col(x, SELECTION_COLUMNS, "searches") == [round(math.log(2), 4)] * 3
    # question stems: direct, blue, harbor, born. Blue Harbor covers 3, Ana Lind 1, Oslo 0.
    blue_relevance = 0.5 * (3 / 4) + 0.5 * 1.0
    ana_relevance = 0.5 * (1 / 4) + 0.5 * 0.25
    # "Ana Lind" is named by Blue Harbor, which answers part of the question: a bridge.
    assert _col(x, SELECTION_COLUMNS, "link_in") == [0.0, blue_relevance, ana_relevance]
    # Oslo is named by Ana Lind, which is itself named by Blue Harbor: the next hop.
    assert _col(x, SELECTION_COLUMNS, "link_chain") == [0.0, 0.0, blue_relevance]
    # Blue Harbor names Ana Lind: its link out is worth what Ana Lind answers.
    assert _col(x, SELECTION_COLUMNS, "link_out") == [ana_relevance, 0.0, 0.0]
    assert _col(x, SELECTION_COLUMNS, "entity_search_rr") == [0.0, 1.0, 0.0]
    assert _col(x, SELECTION_COLUMNS, "first_hop") == [0.0, round(1 / 3, 4), round(1 / 3, 4)]


def test_linear_head_scores_standardised_features_and_round_trips(tmp_path):
    head = LinearHead(
        columns=["a", "b"], mean=[1.0, 0.0], scale=[2.0, 1.0], weights=[1.0, -1.0], bias=0.5
    )
    got = head.score(np.array([[3.0, 1.0], [1.0, 0.0]]))
    assert got.tolist() == [0.5, 0.5]  # (3-1)/2 - 1 + .5 ; 0 - 0 + .5
    with pytest.raises(ValueError):
        head.score(np.zeros((1, 3)))
    search = head.model_copy(update={"columns": list(SEARCH_COLUMNS)})
    search = search.model_copy(update={"mean": [0.0] * 8, "scale": [1.0] * 8, "weights": [1.0] * 8})
    selection = search.model_copy(
        update={
            "columns": list(SELECTION_COLUMNS),
            "mean": [0.0] * len(SELECTION_COLUMNS),
            "scale": [1.0] * len(SELECTION_COLUMNS),
            "weights": [0.5] * len(SELECTION_COLUMNS),
        }
    )
    model = RankerModel(search=search, selection=selection, question_ids=["q1"])
    model.save(tmp_path / "r.json")
    assert load_ranker(tmp_path / "r.json") == model
    bad = model.model_copy(update={"search": head})
    bad.save(tmp_path / "bad.json")
    with pytest.raises(InputError, match="retrain"):
        load_ranker(tmp_path / "bad.json")


def test_split_is_fixed_disjoint_and_complete():
    _, tasks = read_2wiki(str(resources.files("sleuth").joinpath(PACKAGED_2WIKI)))
    train, heldout = split_tasks(tasks)
    assert {t.id for t in train}.isdisjoint({t.id for t in heldout})
    assert len(train) + len(heldout) == len(tasks)
    assert 0.35 < len(heldout) / len(tasks) < 0.65
    assert all(is_heldout(t.id) for t in heldout)
    assert split_tasks(list(reversed(tasks)))[1] == list(reversed(heldout))


def test_shipped_ranker_never_trained_on_a_heldout_question():
    model = load_ranker()
    assert model.question_ids, "the shipped ranker lists the questions it trained on"
    # Generated tasks are all training data: they were made over training-side paragraphs only
    # (tests/test_datagen_chains.py); every other id must be on the training side of the split.
    generated = {t.id for t in generated_tasks()}
    assert not [q for q in model.question_ids if q not in generated and is_heldout(q)]
    # No task of the demo's file (made over the whole 2Wiki sample, held-out paragraphs included).
    demo = {t.id for t in load_tasks(str(resources.files("sleuth").joinpath(DEMO_TASKS)))}
    assert not demo & set(model.question_ids) - generated


@pytest.fixture(scope="module")
def small_index(tmp_path_factory):
    docs, tasks = read_2wiki(str(resources.files("sleuth").joinpath(PACKAGED_2WIKI)))
    tasks = tasks[:16]
    wanted = {d for t in tasks for d in t.gold_doc_ids + t.distractor_doc_ids}
    path = Path(tmp_path_factory.mktemp("rank")) / "ix"
    Index.create(path, embedder="hash:64").ingest([d for d in docs if d.id in wanted])
    return Index.open(path), tasks


def test_training_uses_only_the_given_questions_and_reranks_search(small_index):
    index, tasks = small_index
    train, heldout = split_tasks(tasks)
    model = train_ranker([(Toolbox(index), train)])
    assert model.question_ids == sorted(t.id for t in train)
    assert not set(model.question_ids) & {t.id for t in heldout}
    assert model.trained_on["selection_examples"] > 0
    plain, ranked = Toolbox(index), Toolbox(index, ranker=model)
    query = heldout[0].query
    shown = ranked.search_corpus(query).chunks
    assert shown, "the reranked search still returns chunks"
    cands = {c.chunk_id for c in plain.candidates(query)}
    assert {c.id for c in shown} <= cands  # reranking reorders the fused candidates only
    scores = [c.score for c in shown]
    assert scores == sorted(scores, reverse=True)  # in the search head's order
    expected = model.search.score(search_features(query, plain.candidates(query)))
    assert max(scores) == pytest.approx(float(expected.max()), rel=1e-5)


def test_evidence_sentence_is_the_one_sharing_most_question_words():
    text = "Berlin has many parks.\nIts mayor in 1990 was Walter Momper.  The city is large."
    assert evidence_sentence("Who was the mayor of Berlin in 1990?", text) == (
        "Its mayor in 1990 was Walter Momper."
    )
    assert evidence_sentence("nothing shared", text) == "Berlin has many parks."  # first of equals
    assert evidence_sentence("anything", " \n ") == ""
    table = "| | | |\n|:-|:-|:-|\n\nNet sales rose in the quarter."
    assert evidence_sentence("nothing shared", table) == "Net sales rose in the quarter."
    assert evidence_sentence("anything", "|---|---|\n\n***") == ""
    wrapped = "Subject: budget\n\nThe meeting on the\nCalifornia crisis is at noon. Bring notes"
    assert evidence_sentence("California crisis meeting", wrapped) == (
        "The meeting on the California crisis is at noon."  # a line break inside is wrapping
    )
    cut = evidence_sentence("mayor", "The mayor " + "word " * 100, limit=40)
    assert len(cut) == 40 and cut.endswith("…") and cut.startswith("The mayor word")


@given(st.text(max_size=80), st.text(max_size=400), st.integers(2, 300))
def test_evidence_sentence_is_a_bounded_piece_of_the_text(question, text, limit):
    quote = evidence_sentence(question, text, limit=limit)
    assert len(quote) <= limit
    assert quote.removesuffix("…").rstrip() in " ".join(text.split())


def test_evidence_ranks_documents_by_their_best_chunk_against_the_whole_corpus(small_index):
    from sleuth.ranking.evidence import question_evidence

    index, tasks = small_index
    lexical = index.lexical
    for task in tasks[:4]:
        docs = list(lexical.rows_of_doc)[:12]
        scores = lexical.scores(task.query)
        assert scores is not None
        best = {d: max(float(scores[i]) for i in rows) for d, rows in lexical.rows_of_doc.items()}
        expected = {d: 1 + sum(v > best[d] for v in best.values()) for d in docs if best[d] > 0}
        for _ in range(2):  # the second asks again: kept per question, same answer
            got = question_evidence(index, task.query, docs)
            assert got.bm25_rank == expected
            assert got.bm25 == {d: best[d] for d in docs}


def test_kept_document_scores_belong_to_the_side_they_were_computed_on():
    """Each lexical side keeps its own per-question maxima: a side built after an ingest (new
    rows, possibly at a reused address) never answers with an older side's."""
    from sleuth.index.lexical import ChunkRow, LexicalIndex
    from sleuth.ranking.evidence import _document_scores

    def side(texts: list[str]) -> LexicalIndex:
        rows = [ChunkRow(f"d{i}_0", f"d{i}", 0, t, 5, f"T{i}") for i, t in enumerate(texts)]
        return LexicalIndex.build(rows, {"generation": len(texts)})

    old = side(["oslo sensors", "nothing here", "more words"])
    new = side(["nothing here", "oslo oslo sensors", "more words", "oslo"])
    first = _document_scores(old, "oslo sensors")
    assert first is not None and _document_scores(old, "oslo sensors") is first
    got = _document_scores(new, "oslo sensors")
    assert got is not None and len(got[0]) == 4 and got[0][1] == max(got[0])
    assert len(old.kept_best) == 1 and len(new.kept_best) == 1


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from("aAbBzZtThHeEnNdD İıßẞ'’&-–—_.,1\n\tÉé"), max_size=60))
def test_stems_equal_content_words_cut(text: str) -> None:
    """The ASCII fast path (lower-case the text, then cut words) gives the words and stems that
    cutting first and lower-casing each word gives, whatever the text; dash and quote variants
    count as their ASCII forms ("1894–95" is the one word "1894-95")."""
    from sleuth.ranking.text import _FOLD, _WORD, STEM, STOPWORDS, content_words, stems

    lowered = (w.lower() for w in _WORD.findall(text.translate(_FOLD)))
    slow = list(dict.fromkeys(w for w in lowered if len(w) > 2 and w not in STOPWORDS))
    assert content_words(text) == slow
    assert stems(text) == frozenset(w[:STEM] for w in slow)


@pytest.mark.parametrize(
    ("question", "title"),
    [
        ("When did X beat the 1894-95 FA Cup winner?", "1894–95 FA Cup"),  # en dash in the title
        ("Who sang Don't Stop Me Now?", "Don’t Stop Me Now (song)"),  # curly apostrophe
        ("Who wrote “Ekam – Son Of Soil”?", "Ekam - Son of Soil"),  # the dash in the question
        ("What league was Jose Cancela in?", "José Cancela"),  # accents
        ("Where is Sivarama Swami?", "Śivarāma Swami"),
    ],
)
def test_a_name_typed_with_ascii_dashes_and_quotes_still_names_the_title(question, title):
    """Names are compared folded: a question says "1894-95" where the title says "1894–95"."""
    from sleuth.ranking.text import bare_title, fold, mentions, stems

    assert mentions(fold(question), title)
    assert stems(bare_title(title)) <= stems(question)
