"""The hand-written Enron and patent questions: every answer and quote is in its gold documents.

Checked against the documents exactly as sleuth's readers name and store them (the Enron sample
with repeated copies of a message kept once), so a gold id the index would not hold, a typo in an
answer or a quote that is not in its message fails here.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from sleuth.tasks.schema import load_tasks

from .conftest import SHARED_DATA

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))
import _datasets  # noqa: E402

needs_data = pytest.mark.skipif(not SHARED_DATA.exists(), reason=f"{SHARED_DATA} is absent")


def flat(text: str) -> str:
    """Case and runs of whitespace do not matter (messages wrap lines anywhere)."""
    return " ".join(text.split()).casefold()


@pytest.fixture(scope="module", params=sorted(_datasets.HANDWRITTEN))
def question_set(request):
    path, read_docs = _datasets.HANDWRITTEN[request.param]
    if not SHARED_DATA.exists():
        pytest.skip(f"{SHARED_DATA} is absent")
    return request.param, load_tasks(path), {d.id: flat(d.text) for d in read_docs()}


def test_corpus_sizes_are_the_ones_the_notice_names():
    if not SHARED_DATA.exists():
        pytest.skip(f"{SHARED_DATA} is absent")
    assert len(_datasets.enron_documents()) == 595
    assert len(_datasets.patent_documents()) == 3522


@needs_data
def test_every_answer_and_quote_occurs_in_its_gold_documents(question_set):
    name, tasks, texts = question_set
    assert len(tasks) >= 40
    assert sum(t.hops > 1 for t in tasks) >= 10, "two-hop questions where the documents allow"
    for t in tasks:
        assert t.gold_doc_ids and set(t.gold_doc_ids) <= set(texts), t.id
        evidence = t.model_extra["evidence"]
        assert set(evidence) == set(t.gold_doc_ids), t.id
        for doc_id, quote in evidence.items():
            assert flat(quote) in texts[doc_id], (t.id, doc_id, quote)
        assert any(flat(t.answer) in texts[d] for d in t.gold_doc_ids), (t.id, t.answer)
        assert t.hops == 1 or len(t.gold_doc_ids) >= 2, t.id
    if name.endswith("-2hop"):  # a set of two-hop questions only
        assert all(t.hops == 2 for t in tasks)


@needs_data
def test_two_hop_questions_need_both_documents(question_set):
    """A two-hop question's quotes are not all in any one of its gold documents."""
    _, tasks, texts = question_set
    for t in (t for t in tasks if t.hops > 1):
        quotes = [flat(q) for q in t.model_extra["evidence"].values()]
        distinct = set(quotes)
        if len(distinct) > 1:  # families of one text quote their headers, which differ
            assert not all(all(q in texts[d] for q in distinct) for d in t.gold_doc_ids), t.id


def test_split_is_the_fixed_seeded_one_and_dev_is_what_quality_reads():
    for path, _ in _datasets.HANDWRITTEN.values():
        tasks = load_tasks(path)
        expected = _datasets.seeded_split([t.id for t in tasks])
        assert {t.id: t.model_extra["split"] for t in tasks} == expected
        dev = _datasets.split_questions(path)
        assert 0.55 <= len(dev) / len(tasks) <= 0.65
        assert all(t.model_extra["split"] == "dev" for t in dev)
        test = _datasets.split_questions(path, "test")
        assert len(dev) + len(test) == len(tasks)
        assert all(t.model_extra["split"] == "test" for t in test)
        assert all(re.fullmatch(r"[a-z]+\d?-\d\d", t.id) for t in tasks)


def test_the_test_splits_are_only_reachable_by_their_final_names():
    assert set(_datasets.FINAL).isdisjoint(_datasets.HANDWRITTEN)
    assert set(_datasets.FINAL.values()) == set(_datasets.HANDWRITTEN)
    corpus = _datasets.load_corpus("patents-test")
    assert all(t.model_extra["split"] == "test" for t in corpus.tasks["patents-test"])
