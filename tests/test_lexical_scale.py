"""The lexical side's shortcuts for large corpora give exactly the answers of the plain way."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sleuth.corpus.models import Document
from sleuth.index import Index
from sleuth.index.lexical import RECENT_SCORES, SCORE_DECIMALS, ChunkRow, LexicalIndex, rank_scores


def full_sort(scores: np.ndarray, k: int, tiebreak: np.ndarray | None) -> np.ndarray:
    """rank_scores before the partial sort: every positive score sorted."""
    positive = np.flatnonzero(scores > 0)
    rounded = np.round(scores[positive].astype(np.float64), SCORE_DECIMALS)
    second = positive if tiebreak is None else tiebreak[positive]
    return positive[np.lexsort((second, -rounded))[:k]]


# Scores on a coarse grid plus sub-rounding noise: many exact and near ties, zeros, negatives.
_score = st.integers(-2, 40).map(lambda v: v / 8) | st.floats(0, 5, width=32)
_noise = st.sampled_from([0.0, 3e-5, -3e-5, 4.9e-5, -4.9e-5, 1e-7])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(_score, _noise), min_size=0, max_size=300),
    st.integers(0, 320),
    st.booleans(),
    st.randoms(use_true_random=False),
)
def test_partial_sort_ranks_as_the_full_sort(pairs, k, by_rank, rnd) -> None:
    for dtype in (np.float32, np.float64):
        scores = np.array([s + n for s, n in pairs], dtype=dtype)
        tiebreak = None
        if by_rank:
            ranks = list(range(len(scores)))
            rnd.shuffle(ranks)
            tiebreak = np.array(ranks, dtype=np.int64)
        got = rank_scores(scores, k, tiebreak)
        assert got.tolist() == full_sort(scores, k, tiebreak).tolist()


def _index() -> LexicalIndex:
    words = ["river", "castle", "king", "film", "born", "city", "war", "queen", "song", "album"]
    rng = np.random.default_rng(3)
    rows = [
        ChunkRow(f"d{i}_0", f"d{i}", 0, " ".join(rng.choice(words, 12)), 12, f"Title {i % 7}")
        for i in range(200)
    ]
    return LexicalIndex.build(rows, stamp={})


def test_repeated_queries_score_once_and_rank_identically() -> None:
    cached, plain = _index(), _index()
    calls = []
    original = cached.retriever.get_scores  # type: ignore[union-attr]
    cached.retriever.get_scores = lambda terms: calls.append(terms) or original(terms)  # type: ignore[union-attr,method-assign]
    queries = [f"{a} {b}" for a in ("king", "film", "war") for b in ("castle", "song", "city")]
    for _ in range(2):  # 9 distinct queries > RECENT_SCORES: the second round evicts and rescores
        for q in queries:
            plain._recent.clear()
            exclude = plain.rows_for([f"d{i}_0" for i in range(0, 200, 3)])
            assert cached.search(q, 10, exclude) == plain.search(q, 10, exclude)
            assert cached.search(q, 10) == plain.search(q, 10)  # the exclusion did not stick
            assert np.array_equal(cached.scores(q), plain.scores(q))  # type: ignore[arg-type]
    assert len(calls) == 2 * len(queries)  # each query scored once a round, not three times
    assert len(cached._recent) == RECENT_SCORES
    assert cached.scores("castle king") is not None  # same terms, other order: another entry
    assert cached.scores("zzz qqq") is None


def _dense_reference(index: Index, query_vec: np.ndarray, k: int, exclude: set[str]) -> list:
    """dense_search as it was: the collection's own count() bounds the over-fetch."""
    n = min(index.collection.count(), k + len(exclude))
    res = index.collection.query(
        query_embeddings=[query_vec.tolist()], n_results=n, include=["distances"]
    )
    pairs = zip(res["ids"][0], res["distances"][0], strict=True)
    return [(c, 1.0 - float(d)) for c, d in pairs if c not in exclude][:k]


def test_dense_search_and_kept_vectors_answer_as_chroma_does(tmp_path) -> None:
    words = ["river", "castle", "king", "film", "born", "city", "war", "queen", "song", "album"]
    rng = np.random.default_rng(5)
    docs = [Document(id=f"d{i}", text=" ".join(rng.choice(words, 9))) for i in range(40)]
    index = Index.create(tmp_path / "ix", embedder="hash:64")
    index.ingest(docs)
    index.exact_rows = 0  # Chroma's own search (a corpus this small is searched exactly)
    ids = [f"d{i}_0" for i in range(40)]
    for q in ("king castle", "war song", "born in a city"):
        qvec = index.embedder.embed_query(q)
        for exclude in (set(), set(ids[:30]), set(ids)):
            assert index.dense_search(qvec, 5, exclude) == _dense_reference(index, qvec, 5, exclude)

    def stored(chunk_ids: list[str]) -> np.ndarray:
        keys = [index.lexical.key_of(c) for c in chunk_ids]  # a changed chunk's row: id#hash
        got = index.collection.get(ids=list(dict.fromkeys(keys)), include=["embeddings"])
        by_key = dict(zip(got["ids"], got["embeddings"], strict=True))
        return np.asarray([by_key[k] for k in keys], dtype=np.float32)

    gets = []
    get = index.collection.get
    index.collection.get = lambda **kw: gets.append(kw["ids"]) or get(**kw)
    assert np.array_equal(index.embeddings(ids[:10]), stored(ids[:10]))
    order = [ids[12], ids[3], ids[12], ids[0]]  # repeats and order kept, only d12 fetched
    assert np.array_equal(index.embeddings(order), stored(order))
    assert gets[0] == ids[:10] and gets[2] == [ids[12]]
    assert index.embeddings([]).shape == (0,)
    index.collection.get = get
    before = index.embeddings([ids[3]])
    index.ingest([Document(id="d3", text="an entirely new text about rivers")])
    assert np.array_equal(index.embeddings([ids[3]]), stored([ids[3]]))  # a new ingest: refetched
    assert not np.array_equal(before, index.embeddings([ids[3]]))
    qvecs = [index.embedder.embed_query(q) for q in ("king castle", "war song", "city")]
    expected = [_dense_reference(index, qvec, 5, set()) for qvec in qvecs]
    counts: list[int] = []
    count = index.collection.count
    index.collection.count = lambda: counts.append(1) or count()
    assert [index.dense_search(qvec, 5) for qvec in qvecs] == expected
    assert len(counts) == 1  # after the ingest, once: count() is a table scan, kept with lexical
    index.collection.count = count
