"""The offline generator on small corpora (thresholds scale with size; a shortfall says why)
and its stored rankings (ties broken by id, never by corpus order or float noise)."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from sleuth.corpus.models import Document
from sleuth.datagen.offline.config import OfflineConfig
from sleuth.datagen.offline.corpus import OfflineBM25, min_clue_words, rare_limit
from sleuth.datagen.offline.generator import generate_offline
from sleuth.index.lexical import rank_scores
from sleuth.tasks import load_tasks
from tests.test_datagen_offline import (
    PACKAGED_CORPUS,
    PACKAGED_N,
    PACKAGED_SEED,
    PACKAGED_TASKS,
    _assert_verified,
    read_benchmark,
)

PLACES = [
    ("Varnholm", "a coastal town in northern Norway"),
    ("Lofsund", "a village on the Ostra fjord"),
    ("Castelbrino", "a hill town in Umbria"),
    ("Montevera", "a commune near Lake Trasimeno"),
    ("Kirrawee Falls", "a mining town in Western Australia"),
    ("Tanbarra", "a pastoral district in the Pilbara"),
    ("Oldmere", "a market town in Shropshire"),
    ("Brackwater", "a parish on the Severn estuary"),
]
PEOPLE = [
    ("Ingrid Solvang", 1921, "painter", "seascapes", "Varnholm"),
    ("Halvard Brekke", 1898, "shipwright", "clinker boats", "Lofsund"),
    ("Lucia Ferrantelli", 1934, "sculptor", "bronze reliefs", "Castelbrino"),
    ("Ottavio Marangon", 1902, "architect", "terraced villas", "Montevera"),
    ("Doris McAllister", 1911, "geologist", "banded ironstone", "Kirrawee Falls"),
    ("Wilfred Tanner", 1887, "surveyor", "stock routes", "Tanbarra"),
    ("Agnes Whitlock", 1945, "novelist", "village sagas", "Oldmere"),
    ("Reginald Pyecroft", 1879, "botanist", "marsh orchids", "Brackwater"),
]


def stub_corpus() -> list[Document]:
    """Sixteen two-sentence encyclopedic stubs: people born in places that name them back."""
    born_in = {place: name for name, *_, place in PEOPLE}
    docs = [
        Document(
            id=f"place-{i}",
            title=name,
            text=f"{name} is {what}. It is the birthplace of {born_in[name]}.",
        )
        for i, (name, what) in enumerate(PLACES)
    ]
    docs += [
        Document(
            id=f"person-{i}",
            title=name,
            text=f"{name} (born {year}) was a {job}. {name.split()[0]} was born in {place} and is known for {work}.",
        )
        for i, (name, year, job, work, place) in enumerate(PEOPLE)
    ]
    return docs


def test_small_stub_corpus_yields_verified_tasks_and_says_why_not_more() -> None:
    docs = stub_corpus()
    tasks, report = generate_offline(docs, n=50, seed=0)
    assert tasks  # a 1%-of-documents rarity bar and 5-word clues made none here
    for task in tasks:
        _assert_verified(task, {d.id: d.text for d in docs})
    assert report.shortfall.startswith(f"made {len(tasks)} of 50 tasks")
    assert "16 titled documents" in report.shortfall and "lower --n" in report.shortfall
    assert generate_offline(docs, n=len(tasks), seed=0)[1].shortfall is None


def test_untitled_corpus_makes_fact_and_relay_tasks_or_explains_why_it_makes_nothing() -> None:
    docs = [Document(id=d.id, text=d.text) for d in stub_corpus()]
    tasks, report = generate_offline(docs, n=5, seed=0)
    assert tasks and {t.model_extra["template"] for t in tasks} <= {"fact", "relay"}
    for task in tasks:
        _assert_verified(task, {d.id: d.text for d in docs})
    tasks, report = generate_offline(docs, n=5, seed=0, config=OfflineConfig(facts=False))
    assert tasks == [] and "no document has a title" in report.shortfall


@given(st.integers(1, 10**7), st.integers(1, 10**7))
def test_thresholds_scale_with_corpus_size(n: int, m: int) -> None:
    small, large = sorted((n, m))
    assert 2 <= rare_limit(small, 0.01) <= rare_limit(large, 0.01)
    assert 3 <= min_clue_words(small, 5) <= min_clue_words(large, 5) <= 5
    if small >= 1000:  # large corpora keep the configured bars
        assert rare_limit(small, 0.01) == 0.01 * small and min_clue_words(small, 5) == 5


def test_bm25_ties_are_broken_by_id_whatever_the_corpus_order() -> None:
    ids, text = ["c", "a", "d", "b"], "the same words about river towns"
    for order in (ids, ids[::-1]):
        lexical = OfflineBM25(order, [text] * len(order))
        assert lexical.search("river towns", 3) == ["a", "b", "c"]


def test_scores_equal_up_to_float_noise_tie_and_go_by_the_tiebreak() -> None:
    scores = np.array([2.0, 1.0 + 3e-7, 1.0, 0.0, 1.0 - 2e-7], dtype=np.float32)
    assert rank_scores(scores, 4, np.array([9, 3, 1, 0, 2])).tolist() == [0, 2, 4, 1]
    assert rank_scores(scores, 2).tolist() == [0, 1]


def test_packaged_tasks_do_not_depend_on_corpus_order() -> None:
    docs, _ = read_benchmark(PACKAGED_CORPUS)
    reversed_run, _ = generate_offline(docs[::-1], n=PACKAGED_N, seed=PACKAGED_SEED)
    assert reversed_run == load_tasks(PACKAGED_TASKS)
