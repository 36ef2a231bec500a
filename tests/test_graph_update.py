"""An update's corpus graph reads again only what the update can change, and is the graph a
full build of the new rows makes, array for array."""

from __future__ import annotations

from unittest.mock import patch

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import sleuth.index.graphupdate as graphupdate
from sleuth.corpus.models import Document
from sleuth.index import Index
from sleuth.index.graph import CorpusGraph
from sleuth.index.grepindex import GrepIndex
from sleuth.index.lexical import ChunkRow

NAMES = ["Alpha Corp", "Beta", "Gamma Delta", "Oslo", "Maria Lopez", "Beta Labs", "José Ruiz"]


def _same(a: CorpusGraph, b: CorpusGraph) -> None:
    assert list(a.doc_ids) == list(b.doc_ids)
    assert list(a.nodes) == list(b.nodes)
    for x, y in ((a.incidence, b.incidence), (a.adjacency, b.adjacency)):
        assert np.array_equal(x.indptr, y.indptr) and np.array_equal(x.indices, y.indices)
        assert np.array_equal(x.data, y.data)
    assert np.array_equal(a.title_node, b.title_node)


def _rows(docs: dict[str, tuple[str, str]]) -> list[ChunkRow]:
    return [ChunkRow(f"{d}_0", d, 0, text, 10, title) for d, (title, text) in docs.items()]


def _text(picks: list[int]) -> str:
    """A sentence naming some of NAMES inside longer runs ("Met Alpha Corp Board In Oslo")."""
    return " ".join(f"Met {NAMES[i % len(NAMES)]} Board in town {i}." for i in picks)


def _doc(spec: tuple[int, list[int]]) -> tuple[str, str]:
    """A title from NAMES (or a plain one) and a text naming some of NAMES."""
    title, picks = spec
    return NAMES[title] if title < len(NAMES) else f"Plain note {title}", _text(picks)


picks_st = st.lists(st.integers(0, 40), max_size=4)
FATES = ["keep", "keep", "keep", "drop", "change"]


@settings(max_examples=80, deadline=None)
@given(
    before=st.lists(st.tuples(st.integers(0, len(NAMES) + 8), picks_st), min_size=1, max_size=12),
    fates=st.lists(st.sampled_from(FATES), min_size=12, max_size=12),
    changed=st.lists(st.tuples(st.integers(0, len(NAMES) + 8), picks_st), min_size=12, max_size=12),
    added=st.lists(st.tuples(st.integers(0, len(NAMES)), picks_st), max_size=4),
)
def test_an_updated_graph_is_the_full_build_of_the_new_rows(before, fates, changed, added):
    old_docs = {f"d{i}": _doc(spec) for i, spec in enumerate(before)}
    new_docs: dict[str, tuple[str, str]] = {}
    for i, doc in enumerate(old_docs):
        if fates[i] != "drop":
            new_docs[doc] = _doc(changed[i]) if fates[i] == "change" else old_docs[doc]
    new_docs |= {f"n{i}": _doc(spec) for i, spec in enumerate(added)}
    old = CorpusGraph.build(_rows(old_docs), {"generation": 1})
    # The rows in the order an update leaves them: the kept old ones, then the new ones.
    fresh = {d for d, v in new_docs.items() if old_docs.get(d) != v}
    rows = [r for r in _rows(old_docs) if r.doc_id in new_docs and r.doc_id not in fresh]
    rows += _rows({d: new_docs[d] for d in fresh})
    grep = GrepIndex.build([r.text for r in rows])
    updated = graphupdate.updated_graph(old, rows, {"generation": 2}, fresh, grep)
    _same(updated, CorpusGraph.build(rows, {"generation": 2}))


def test_an_unrelated_addition_reads_only_the_new_document():
    old_docs = {f"d{i}": (f"Note {i}", _text([i, i + 1])) for i in range(20)}
    old = CorpusGraph.build(_rows(old_docs), {"generation": 1})
    new_docs = old_docs | {"x": ("Zeta Works", "Zeta Works hired Maria Lopez.")}
    rows = _rows(new_docs)
    calls = []
    real = graphupdate.document_nodes

    def counted(chunks, title, titles):
        calls.append(chunks[0].doc_id)
        return real(chunks, title, titles)

    with patch.object(graphupdate, "document_nodes", counted):
        grep = GrepIndex.build([r.text for r in rows])
        updated = graphupdate.updated_graph(old, rows, {"generation": 2}, {"x"}, grep)
    assert calls == ["x"]  # no old text holds "Zeta Works"
    _same(updated, CorpusGraph.build(rows, {"generation": 2}))
    # A new title that old texts name sends exactly those documents back to be read.
    new_docs["y"] = ("Board", "A page titled Board.")
    rows = _rows(new_docs)
    calls.clear()
    with patch.object(graphupdate, "document_nodes", counted):
        grep = GrepIndex.build([r.text for r in rows])
        updated = graphupdate.updated_graph(old, rows, {"generation": 2}, {"x", "y"}, grep)
    assert set(calls) == set(new_docs)  # every old text has "Met ... Board"
    _same(updated, CorpusGraph.build(rows, {"generation": 2}))


def _documents(docs: dict[str, tuple[str, str]]) -> list[Document]:
    return [Document(id=d, title=t, text=x) for d, (t, x) in docs.items()]


def test_ingest_updates_the_saved_graph_as_a_full_build_would(tmp_path):
    first = {f"d{i}": (NAMES[i % len(NAMES)], _text([i, 2 * i])) for i in range(10)}
    index = Index.create(tmp_path / "ix", embedder="hash:64")
    index.ingest(_documents(first))
    second = {k: v for k, v in first.items() if k != "d3"}  # d3 leaves, d4 changes, one comes
    second["d4"] = ("Oslo", "Oslo news: Gamma Delta moved.")
    second["new"] = ("Board", "The Board met.")
    index = Index.create(tmp_path / "ix", embedder="hash:64")
    with patch.object(graphupdate, "updated_graph", wraps=graphupdate.updated_graph) as spy:
        index.ingest(_documents(second), delete_missing=True)
    assert spy.call_count == 1  # the saved graph was updated, not built again
    graph = Index.open(tmp_path / "ix").graph
    _same(graph, CorpusGraph.build(Index.open(tmp_path / "ix").lexical.rows, graph.stamp))


def test_a_graph_from_another_extraction_is_built_again(tmp_path):
    index = Index.create(tmp_path / "ix", embedder="hash:64")
    index.ingest(_documents({"a": ("Alpha Corp", "Alpha Corp met Beta.")}))
    index = Index.create(tmp_path / "ix", embedder="hash:64")
    with (
        patch.object(graphupdate, "NODES_VERSION", 999),
        patch.object(graphupdate, "updated_graph") as spy,
    ):
        index.ingest(_documents({"b": ("Beta", "Beta met Alpha Corp.")}))
    spy.assert_not_called()
    graph = Index.open(tmp_path / "ix").graph
    assert set(graph.doc_ids) == {"a", "b"}
