"""Dense search returns the true top k, the same in every process and under parallel searches.

Chroma's HNSW is approximate, and an embedded collection rebuilds the graph of its unsaved rows
in every process in a varying order: the enron dev index's first search found a chunk in some
fresh processes and missed it in others (docs/scale.md). A corpus of up to
``EXACT_DENSE_ROWS`` chunks is searched exactly instead.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from sleuth.corpus.models import Document
from sleuth.index import Index
from sleuth.tools.toolbox import Toolbox

_VOCAB = [f"w{i}" for i in range(400)]


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Index:
    """1,500 near-random hash vectors: hard for HNSW (its search missed true neighbours of 5 of
    these 40 queries), trivial for an exact pass."""
    rng = np.random.default_rng(7)
    docs = [
        Document(id=f"d{i}", text=" ".join(rng.choice(_VOCAB, 12)), metadata={"part": i % 3})
        for i in range(1500)
    ]
    built = Index.create(tmp_path_factory.mktemp("dense") / "ix", embedder="hash:384")
    built.ingest(docs)
    return built


def _queries(n: int) -> list[str]:
    rng = np.random.default_rng(11)
    return [" ".join(rng.choice(_VOCAB, 5)) for _ in range(n)]


def _brute(index: Index, qvec: np.ndarray, k: int, keep: np.ndarray) -> list[tuple[str, float]]:
    """Cosine similarity of every kept row from Chroma's stored vectors; ties by row order."""
    ids = [r.id for r in index.lexical.rows]
    got = index.collection.get(ids=ids, include=["embeddings"])
    by_id = dict(zip(got["ids"], np.asarray(got["embeddings"], np.float64), strict=True))
    matrix = np.stack([by_id[i] for i in ids])
    scores = matrix @ qvec / np.linalg.norm(matrix, axis=1) / np.linalg.norm(qvec)
    rows = np.flatnonzero(keep)
    top = rows[np.lexsort((rows, -scores[rows]))][:k]
    return [(ids[i], float(scores[i])) for i in top]


def _same(got: list[tuple[str, float]], want: list[tuple[str, float]]) -> None:
    """The same scores (float32 noise aside) in order: the true top k, whatever the ties."""
    assert len(got) == len(want)
    assert np.allclose([s for _, s in got], [s for _, s in want], atol=1e-5)
    assert len({c for c, _ in got}) == len(got)


@pytest.mark.parametrize("k", [1, 25, 200])
def test_dense_search_is_the_exact_top_k(index: Index, k: int) -> None:
    every = np.ones(len(index), bool)
    for query in _queries(40):
        qvec = index.embedder.embed_query(query)
        _same(index.dense_search(qvec, k), _brute(index, qvec, k, every))


def test_exclusions_and_filters_apply_before_the_top_k(index: Index) -> None:
    where = index.check_where({"part": {"$ne": 1}})
    for query in _queries(10):
        qvec = index.embedder.embed_query(query)
        first = [c for c, _ in index.dense_search(qvec, 30)]
        keep = np.ones(len(index), bool)
        keep[index.lexical.rows_for(first)] = False
        _same(index.dense_search(qvec, 25, set(first)), _brute(index, qvec, 25, keep))
        filtered = index.dense_search(qvec, 25, set(first[:5]), where)
        keep = index.rows_matching(where)
        keep[index.lexical.rows_for(first[:5])] = False
        _same(filtered, _brute(index, qvec, 25, keep))
        assert all(index.lexical.doc_meta[index.chunk(c).doc_id]["part"] != 1 for c, _ in filtered)
    assert (
        index.dense_search(index.embedder.embed_query("w1"), 5, {r.id for r in index.lexical.rows})
        == []
    )


def test_a_larger_corpus_keeps_chromas_search(
    index: Index, monkeypatch: pytest.MonkeyPatch
) -> None:
    qvec = index.embedder.embed_query(_queries(1)[0])
    queried: list[int] = []
    query = index.collection.query
    monkeypatch.setattr(index, "exact_rows", len(index) - 1)
    monkeypatch.setattr(index, "_exact", None)
    monkeypatch.setattr(index.collection, "query", lambda **kw: queried.append(1) or query(**kw))
    assert len(index.dense_search(qvec, 10)) == 10 and queried == [1]


def test_parallel_searches_return_what_each_returns_alone(index: Index) -> None:
    """Many search_corpus calls at once, started together from a fresh toolbox and cache, each
    give the result the same call gives alone."""
    queries = _queries(24)
    alone = Toolbox(index)
    want = {q: alone.search_corpus(q).chunks for q in queries}
    for _ in range(3):
        index._exact = None  # the first searches of a fresh process read the vectors together
        tools = Toolbox(index)
        start = threading.Barrier(8)

        def run(query: str, tools: Toolbox = tools, start: threading.Barrier = start) -> list:
            start.wait()
            return tools.search_corpus(query).chunks

        with ThreadPoolExecutor(8) as pool:
            for begin in range(0, len(queries), 8):
                batch = queries[begin : begin + 8]
                for query, got in zip(batch, pool.map(run, batch), strict=True):
                    assert [(c.id, c.score) for c in got] == [(c.id, c.score) for c in want[query]]


def test_stored_vectors_are_read_from_the_exact_search_rows(
    index: Index, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After an exact search, the selector's vector look-ups answer from the rows that search
    read (a Chroma ``get`` cost 5-8 ms a hop), with the values Chroma stores, in the order
    asked, repeats kept."""
    rows = index.lexical.rows
    ids = [rows[i].id for i in (40, 3, 1499, 3, 0)]
    got = index.collection.get(ids=list(dict.fromkeys(ids)), include=["embeddings"])
    by_id = dict(zip(got["ids"], np.asarray(got["embeddings"], np.float32), strict=True))
    index.dense_search(index.embedder.embed_query(_queries(1)[0]), 5)
    monkeypatch.setattr(index.collection, "get", lambda **kw: pytest.fail("a Chroma get"))
    assert np.array_equal(index.embeddings(ids), np.stack([by_id[i] for i in ids]))
    assert index.embeddings([]).shape == (0,)


def _small(tmp_path) -> Index:
    rng = np.random.default_rng(3)
    docs = [Document(id=f"s{i}", text=" ".join(rng.choice(_VOCAB, 12))) for i in range(60)]
    built = Index.create(tmp_path / "ix", embedder="hash:384")
    built.ingest(docs)
    return built


def _no_vector_reads(index: Index, monkeypatch: pytest.MonkeyPatch) -> None:
    get = index.collection.get

    def guarded(**kw):
        if "embeddings" in (kw.get("include") or []):
            pytest.fail("read every vector from Chroma again")
        return get(**kw)

    monkeypatch.setattr(index.collection, "get", guarded)


def test_a_fresh_process_loads_the_kept_matrix(tmp_path, monkeypatch) -> None:
    """The first exact search keeps its matrix beside the lexical side; the next process to
    open the index searches from it without reading Chroma's rows, with the same results."""
    from sleuth.index.reads import VECTORS_FILE

    built = _small(tmp_path)
    queries = [built.embedder.embed_query(q) for q in _queries(5)]
    first = Index.open(built.path)
    want = [first.dense_search(q, 10) for q in queries]
    assert (built.path / first.manifest.lexical_dir / VECTORS_FILE).is_file()
    again = Index.open(built.path)
    _no_vector_reads(again, monkeypatch)
    assert [again.dense_search(q, 10) for q in queries] == want


@pytest.mark.parametrize("damage", ["garbage", "other rows", "truncated"])
def test_a_damaged_or_stale_kept_matrix_is_read_from_chroma_again(tmp_path, damage) -> None:
    """A torn file, or one saved for other rows (a rebuilt side may order them differently),
    is never used: the search reads Chroma and keeps a good file again."""
    from sleuth.index.reads import VECTORS_FILE, load_vectors, save_vectors

    built = _small(tmp_path)
    query = built.embedder.embed_query(_queries(1)[0])
    want = Index.open(built.path).dense_search(query, 10)
    kept = built.path / built.manifest.lexical_dir / VECTORS_FILE
    keys = [r.key or r.id for r in built.lexical.rows]
    if damage == "garbage":
        kept.write_bytes(b"not a matrix")
    elif damage == "truncated":
        kept.write_bytes(kept.read_bytes()[:1000])
    else:
        matrix = load_vectors(kept, keys)
        assert matrix is not None
        save_vectors(kept, keys[::-1], matrix[::-1] * 0 + 1)  # same rows, other order
        assert load_vectors(kept, keys) is None
    assert Index.open(built.path).dense_search(query, 10) == want
    assert load_vectors(kept, keys) is not None


def test_the_kept_matrix_never_brings_back_a_removed_side(tmp_path) -> None:
    """A search that finishes after an ingest removed its lexical side's folder keeps nothing
    (the save raises, which the search ignores) rather than making the old folder again."""
    from sleuth.index.reads import save_vectors

    gone = tmp_path / "lexical-1" / "vectors.npz"
    with pytest.raises(FileNotFoundError):
        save_vectors(gone, ["a"], np.zeros((1, 4), np.float32))
    assert not gone.parent.exists()
