"""Query vectors kept by text at ``Index.embedder``: a question embeds each text once, gets the
vectors (and so the final list) it would get without the cache, cannot change a kept vector, and
the cache stays bounded."""

from __future__ import annotations

from collections import Counter
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sleuth
from sleuth.embed import HashEmbedder, KeptQueries
from sleuth.tasks import read_2wiki
from tests.conftest import PACKAGED_2WIKI, wiki_documents


class Counting(HashEmbedder):
    """A hash embedder that counts the query texts it computes."""

    def __init__(self) -> None:
        super().__init__(384)
        self.asked: Counter[str] = Counter()

    def embed_query(self, text: str) -> np.ndarray:
        self.asked[text] += 1
        return super().embed_query(text)


@pytest.fixture(scope="module")
def path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    built = sleuth.Index.create(tmp_path_factory.mktemp("qv") / "ix", embedder="hash:384")
    built.ingest(wiki_documents(8))
    return built.path


def test_a_question_embeds_each_text_once_and_finds_what_it_did_uncached(path, tmp_path):
    _, tasks = read_2wiki(str(resources.files("sleuth").joinpath(PACKAGED_2WIKI)))
    kept, plain = sleuth.Index.open(path), sleuth.Index.open(path)
    kept._embedder = kept_inner = Counting()
    plain._embedder = plain._dim_checked = plain_inner = Counting()  # the cache bypassed
    for i, task in enumerate(tasks[:3]):
        got = [
            sleuth.Agent(ix).search(task.query, trajectory=tmp_path / f"{n}-{i}.jsonl")
            for n, ix in enumerate((kept, plain))
        ]
        assert [d.id for d in got[0].documents] == [d.id for d in got[1].documents]
        assert got[0].documents
        assert plain_inner.asked[task.query] > 1  # every search and selection asks again
    assert isinstance(kept.embedder, KeptQueries) and kept.embedder.inner is kept_inner
    assert set(kept_inner.asked.values()) == {1}
    assert set(kept_inner.asked) == set(plain_inner.asked)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=40), min_size=1, max_size=6))
def test_kept_vectors_equal_computed_ones_and_cannot_be_changed(texts):
    inner = HashEmbedder(32)
    kept = KeptQueries(inner)
    for text in texts + texts:
        vector = kept.embed_query(text)
        assert np.array_equal(vector, inner.embed_query(text))
        assert vector.dtype == np.float32
        with pytest.raises(ValueError):
            vector[0] = 2.0
    assert len(kept._kept) == len(set(texts))


def test_the_cache_is_bounded_and_drops_the_least_recent():
    inner = Counting()
    kept = KeptQueries(inner, size=4)
    for i in range(10):
        kept.embed_query(f"text {i}")
    assert len(kept._kept) == 4
    kept.embed_query("text 9")
    kept.embed_query("text 0")
    assert inner.asked["text 9"] == 1 and inner.asked["text 0"] == 2


def test_every_opening_keeps_query_vectors_once(path):
    opened = sleuth.Index.open(path)  # the manifest's embedder
    kept = opened.embedder
    assert isinstance(kept, KeptQueries) and kept is opened.embedder
    given_one = sleuth.Index.open(path, HashEmbedder(384)).embedder
    assert isinstance(given_one, KeptQueries)
    assert sleuth.Index.open(path, kept).embedder is kept  # not wrapped twice
    text = ["Paris is the capital of France."]
    assert np.array_equal(kept.embed_documents(text), HashEmbedder(384).embed_documents(text))
