"""The corpus graph: which documents it links, its PageRank, and its life inside an index."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import tempfile
from pathlib import Path
from unittest.mock import patch

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from sleuth.corpus.models import Document
from sleuth.errors import InputError
from sleuth.index import Index
from sleuth.index.columns import StrColumn
from sleuth.index.graph import CorpusGraph, LinkFactors, open_graph
from sleuth.index.graphfiles import GRAPH_SCHEMA_VERSION
from sleuth.index.graphnodes import Titles, extract_nodes, title_key, titled_runs
from sleuth.index.idmap import IdMap
from sleuth.index.lexical import ChunkRow, LexicalIndex
from sleuth.ranking.evidence import question_evidence
from sleuth.ranking.features import (
    SELECTION_COLUMNS,
    QuestionEvidence,
    Search,
    SeenDoc,
    selection_features,
)
from sleuth.ranking.selector import hop_seeds

CORPUS = {  # id: (title, text)
    "alpha": ("Alpha Corp", "Alpha Corp was founded by Maria Lopez, who later ran Beta Labs."),
    "beta": ("Beta Labs (company)", "Beta Labs builds sensors in Oslo."),
    "c": ("Memo one", "Part XK-200 failed the test; see patent 6,123,456."),
    "d": ("Memo two", "We replaced part XK-200 and filed patent 6123456."),
    "lonely": ("Lonely page", "nothing named here at all."),
    **{f"hub{i}": (f"Note {i}", f"Enron staff met on Tuesday {i}.") for i in range(5)},
}


def _rows(corpus: dict[str, tuple[str, str]]) -> list[ChunkRow]:
    return [ChunkRow(f"{d}_0", d, 0, text, 10, title) for d, (title, text) in corpus.items()]


def _graph(rare_df: int = 3) -> CorpusGraph:
    return CorpusGraph.build(_rows(CORPUS), {"generation": 1}, rare_df=rare_df)


def _linked(g: CorpusGraph, a: str, b: str) -> bool:
    return bool(g.adjacency[g.doc_number[a], g.doc_number[b]] > 0)


def test_nodes_are_names_addresses_numbers_and_identifiers():
    text = "Which prize did The Beatles win in 1965? Ask john.doe@enron.com about EL-2001A, 3rd."
    nodes = extract_nodes(text)
    assert {"beatles", "1965", "john.doe@enron.com", "el-2001a"} <= nodes
    assert "which" not in nodes and "3rd" not in nodes
    # A title inside a longer run of capitalised words is found when titles are given.
    assert "beta labs" in extract_nodes("CEO of Beta Labs Oslo", Titles(["beta labs"]))
    assert title_key("RE: Fw: Gas prices") == "gas prices"
    assert title_key("Mercury (planet)") == "mercury"


def test_edges_title_mentions_rare_nodes_and_no_hubs():
    g = _graph()
    assert _linked(g, "alpha", "beta") and _linked(g, "beta", "alpha")  # a title named
    assert _linked(g, "c", "d")  # a shared identifier and patent number
    assert not any(_linked(g, "lonely", d) for d in g.doc_ids)
    # Five notes share "enron" and "tuesday": a hub over the cap of three links none of them.
    assert not _linked(g, "hub0", "hub1")
    assert _linked(CorpusGraph.build(_rows(CORPUS), {}, rare_df=5), "hub0", "hub1")
    assert (g.adjacency != g.adjacency.T).nnz == 0 and g.adjacency.diagonal().sum() == 0


def test_pagerank_sums_to_one_seeds_dominate_and_unreached_get_nothing():
    g = _graph()
    p = g.scores("Who founded Alpha Corp?", {})
    assert abs(p.sum() - 1) < 1e-6
    order = [g.doc_ids[i] for i in np.argsort(-p)]
    assert order[:2] == ["alpha", "beta"]  # the named document, then the one it links to
    assert p[g.doc_number["lonely"]] == 0 and p[g.doc_number["c"]] == 0
    seeded = g.scores("unrelated words", {"c": 1.0})
    assert seeded.argmax() == g.doc_number["c"] and seeded[g.doc_number["d"]] > 0
    assert not g.scores("unrelated words", {}).any()  # no seeds: no mass anywhere


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 30), st.floats(0.05, 0.5), st.integers(0, 10_000))
def test_pagerank_is_a_distribution_on_any_graph(n, density, seed):
    rng = np.random.default_rng(seed)
    links = sp.random(n, n, density=density, random_state=seed, format="csr")
    links = (links + links.T).tocsr()
    links = (links - sp.diags(links.diagonal())).tocsr()
    g = CorpusGraph(
        [f"d{i}" for i in range(n)],
        [],
        sp.csr_matrix((n, 0), dtype=np.float32),
        links.astype(np.float32),
        np.full(n, -1, np.int32),
        {},
    )
    seeds = rng.random(n) * (rng.random(n) < 0.5)
    p = g.ppr(seeds)
    if seeds.sum() == 0:
        assert not p.any()
    else:
        assert abs(p.sum() - 1) < 1e-5 and (p >= 0).all()
        # Each seed keeps at least its restart share: (1 − damping) × its seed weight.
        assert (p >= 0.5 * seeds / seeds.sum() - 1e-9).all()


def _power_iteration(links: sp.csr_matrix, seeds: np.ndarray, tol: float) -> np.ndarray:
    """The PageRank the conjugate gradients replaced: walk, unlinked mass back to the seeds."""
    degree = np.asarray(links.sum(axis=1)).ravel()
    walk = (sp.diags(np.divide(1.0, degree, out=np.zeros(len(degree)), where=degree > 0)) @ links).T
    restart = seeds / seeds.sum()
    p = restart.copy()
    for _ in range(1000):
        nxt = 0.5 * (walk @ p + p[degree == 0].sum() * restart) + 0.5 * restart
        done = np.abs(nxt - p).sum() < tol
        p = nxt
        if done:
            break
    return p


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 60), st.floats(0.01, 0.4), st.integers(0, 10_000))
def test_pagerank_is_the_fixed_point_the_power_iteration_approached(n, density, seed):
    """Conjugate gradients land within 1e-7 (L1) of the exact fixed point at a tolerance of 1e-8,
    and at the default one (PPR_TOL) within the old power iteration's own stopping distance
    (1e-5) of the fixed point and of what it returned."""
    rng = np.random.default_rng(seed)
    links = sp.random(n, n, density=density, random_state=seed, format="csr")
    links = ((links + links.T) * rng.uniform(0.1, 4)).tocsr()
    links = (links - sp.diags(links.diagonal())).tocsr().astype(np.float32)
    g = CorpusGraph(
        [f"d{i}" for i in range(n)],
        [],
        sp.csr_matrix((n, 0), dtype=np.float32),
        links,
        np.full(n, -1, np.int32),
        {},
    )
    seeds = rng.random(n) * (rng.random(n) < 0.3)
    if seeds.sum() == 0:
        seeds[rng.integers(n)] = 1.0
    exact = _power_iteration(links.astype(np.float64), seeds, 1e-15)
    assert np.abs(g.ppr(seeds, tol=1e-8) - exact).sum() < 1e-7
    p = g.ppr(seeds)
    assert np.abs(p - exact).sum() < 1e-5
    assert np.abs(p - _power_iteration(links.astype(np.float64), seeds, 1e-5)).sum() < 2e-5


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 40), st.integers(1, 30), st.floats(0.02, 0.3), st.integers(0, 10_000))
def test_pagerank_through_the_link_factors_is_pagerank_over_the_links(n, nodes, density, seed):
    """A built graph walks its links as products of the incidence (no link matrix): the same
    links, so the same PageRank as a graph given those links alone."""
    rng = np.random.default_rng(seed)
    incidence = sp.random(n, nodes, density=density, random_state=seed, format="csr")
    incidence.data[:] = 1.0
    title_node = np.where(rng.random(n) < 0.5, rng.integers(0, nodes, n), -1).astype(np.int32)
    factors = LinkFactors.of(incidence.astype(np.float32), title_node, 3)
    links = factors.matrix()
    x = rng.random(n)
    assert np.allclose(factors.times(x), links.astype(np.float64) @ x, rtol=1e-6, atol=1e-6)
    assert (links != links.T).nnz == 0 and links.diagonal().sum() == 0
    with patch("sleuth.index.graph.FACTORED_LINKS", 0):  # factored at any size
        built = CorpusGraph(
            [f"d{i}" for i in range(n)],
            [f"n{j}" for j in range(nodes)],
            incidence.astype(np.float32),
            links,
            title_node,
            {},
            rare_df=3,
        )
    alone = CorpusGraph(
        built.doc_ids, [], sp.csr_matrix((n, 0), dtype=np.float32), links, title_node * 0 - 1, {}
    )
    seeds = rng.random(n) + 0.01
    assert np.abs(built.ppr(seeds) - alone.ppr(seeds)).sum() < 1e-6


def _answers(g: CorpusGraph) -> tuple:
    """What the agent asks of a graph: titles, shares, seeds and PageRank."""
    names = ["Alpha Corp", "the BETA labs", "Maria Lopez", "XK-200", "Nobody", "Note 3"]
    return (
        list(g.doc_ids),
        list(g.nodes),
        [g.titled(n) for n in names],
        [g.share_naming(n) for n in names],
        g.question_seeds("Who at Beta Labs used part XK-200 and met Maria Lopez?").tolist(),
        np.round(g.scores("Alpha Corp and Beta Labs", {"c": 1.0, "nope": 2.0}), 12).tolist(),
        [g.doc_number[d] for d in g.doc_ids] + [g.doc_number.get("nope", -1)],
    )


def _save_v1(g: CorpusGraph, folder) -> None:
    """A graph as schema 1 saved it: JSON lists and a compressed npz named by its checksum."""
    buffer = io.BytesIO()
    a = g.adjacency
    np.savez_compressed(
        buffer,
        inc_indptr=g.incidence.indptr,
        inc_indices=g.incidence.indices,
        adj_indptr=a.indptr,
        adj_indices=a.indices,
        adj_data=a.data,
        title_node=g.title_node,
    )
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "graph.npz").write_bytes(buffer.getvalue())
    meta = {"schema_version": 1, "stamp": g.stamp, "rare_df": g.rare_df}
    meta |= {"npz_sha256": hashlib.sha256(buffer.getvalue()).hexdigest()}
    meta |= {"doc_ids": list(g.doc_ids), "nodes": list(g.nodes)}
    (folder / "graph.json").write_text(json.dumps(meta))


_WORDS = ["Alpha Corp", "Beta Labs", "Oslo", "Maria Lopez", "XK-200", "1999", "Gamma"]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.lists(st.sampled_from(_WORDS), max_size=5), min_size=1, max_size=12))
def test_a_saved_graph_opens_mapped_with_the_same_answers(named):
    corpus = {
        f"d{i}": (_WORDS[i % 7] if i % 3 else "", " and ".join(w)) for i, w in enumerate(named)
    }
    g = CorpusGraph.build(_rows(corpus), {"generation": 1}, rare_df=3)
    with tempfile.TemporaryDirectory() as tmp:
        g.save(Path(tmp))
        back = CorpusGraph.load(Path(tmp))
        assert back is not None and isinstance(back.doc_ids, StrColumn)
        assert isinstance(back.node_number, IdMap) and back.stamp == g.stamp
        assert (back.adjacency != g.adjacency).nnz == 0 and (back.incidence != g.incidence).nnz == 0
        assert _answers(back) == _answers(g)


def test_a_schema_1_graph_is_read_and_saved_again_once(tmp_path):
    g = _graph()
    _save_v1(g, tmp_path)
    back = CorpusGraph.load(tmp_path)
    assert back is not None and _answers(back) == _answers(g)
    header = json.loads((tmp_path / "graph.json").read_text())
    assert header["schema_version"] == GRAPH_SCHEMA_VERSION and "doc_ids" not in header
    assert not (tmp_path / "graph.npz").exists() and isinstance(back.doc_ids, StrColumn)
    written = {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()}
    again = CorpusGraph.load(tmp_path)
    assert again is not None and _answers(again) == _answers(g)
    assert {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()} == written
    _save_v1(g, tmp_path / "kept")  # not upgraded: read as it is
    kept = CorpusGraph.load(tmp_path / "kept", upgrade=False)
    assert kept is not None and _answers(kept) == _answers(g)
    assert json.loads((tmp_path / "kept" / "graph.json").read_text())["schema_version"] == 1


@pytest.mark.parametrize(
    ("name", "damage", "message"),
    [
        ("adj_data.npy", lambda b: b[:-4], "truncated"),
        ("node.npy", lambda b: b[:-8] + (10**6).to_bytes(8, "little"), "do not fit"),
        ("inc_indices.npy", lambda b: b[:-4] + b"\xff\xff\x00\x00", "out of range"),
        ("graph.json", lambda b: b[:10], "unreadable"),
    ],
)
def test_a_damaged_graph_is_refused_in_one_line_and_rebuilt(
    tmp_path, caplog, name, damage, message
):
    g = _graph()
    g.save(tmp_path)
    path = tmp_path / name
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(InputError, match=message) as refused:
        CorpusGraph.load(tmp_path)
    assert "\n" not in str(refused.value) and "corpus graph damaged" in str(refused.value)
    lexical = LexicalIndex.build(_rows(CORPUS), {"generation": 1})
    rebuilt = open_graph(tmp_path, lexical)
    assert "rebuilding" in caplog.text and sorted(rebuilt.doc_ids) == sorted(g.doc_ids)
    reopened = CorpusGraph.load(tmp_path)
    assert reopened is not None and list(reopened.nodes) == list(rebuilt.nodes)


def _documents(corpus: dict[str, tuple[str, str]]) -> list[Document]:
    return [Document(id=d, title=t, text=x) for d, (t, x) in corpus.items()]


def test_ingest_builds_and_updates_the_graph_and_an_old_index_builds_it(tmp_path):
    first = {k: CORPUS[k] for k in ("alpha", "c", "lonely")}
    index = Index.create(tmp_path / "ix", embedder="hash:64")
    index.ingest(_documents(first))
    assert (tmp_path / "ix" / "graph" / "graph.json").exists()
    assert set(index.graph.doc_ids) == set(first)
    index = Index.create(tmp_path / "ix", embedder="hash:64")
    index.ingest(_documents({k: CORPUS[k] for k in ("beta", "d")}))
    reopened = Index.open(tmp_path / "ix")
    assert set(reopened.graph.doc_ids) == {"alpha", "beta", "c", "d", "lonely"}
    assert _linked(reopened.graph, "alpha", "beta") and _linked(reopened.graph, "c", "d")
    # An index saved before the graph existed: it is built on first use and saved.
    shutil.rmtree(tmp_path / "ix" / "graph")
    old = Index.open(tmp_path / "ix")
    evidence = question_evidence(old, "Who founded Alpha Corp?", ["alpha", "beta", "lonely"])
    assert evidence.ppr["alpha"] > evidence.ppr["beta"] > evidence.ppr["lonely"] == 0
    assert (tmp_path / "ix" / "graph" / "adj_data.npy").exists()


def test_an_index_with_a_schema_1_graph_answers_the_same_and_saves_it_once(tmp_path):
    Index.create(tmp_path / "ix", embedder="hash:64").ingest(_documents(CORPUS))
    folder = tmp_path / "ix" / "graph"
    first = Index.open(tmp_path / "ix")
    asked = ("Who founded Alpha Corp?", ["alpha", "beta", "c", "d", "lonely"])
    before = (question_evidence(first, *asked).ppr, _answers(first.graph))
    shutil.rmtree(folder)
    _save_v1(CorpusGraph.build(first.lexical.rows, first.lexical.stamp), folder)
    old = Index.open(tmp_path / "ix")
    assert (question_evidence(old, *asked).ppr, _answers(old.graph)) == before
    assert json.loads((folder / "graph.json").read_text())["schema_version"] == 2
    assert isinstance(old.graph.doc_ids, StrColumn) and not (folder / "graph.npz").exists()


def test_ppr_column_is_the_share_of_the_best_seen():
    docs = [SeenDoc("a", "A", ranks=[(0, 1)]), SeenDoc("b", "B", ranks=[(0, 3)])]
    assert hop_seeds(docs) == {"a": 1.0}
    evidence = QuestionEvidence(bm25={}, bm25_rank={}, dense={}, ppr={"a": 0.4, "b": 0.1})
    rows = selection_features("q", docs, [Search("q", 0)], evidence)
    assert rows[:, SELECTION_COLUMNS.index("ppr")].tolist() == [1.0, 0.25]


def test_title_link_share_counts_titles_another_document_names():
    assert _graph().title_link_share == 0.1  # alpha names "Beta Labs"; nine titles unnamed
    corpus = CORPUS | {"fan": ("Fan page", "I love Alpha Corp and Alpha Corp again.")}
    assert CorpusGraph.build(_rows(corpus), {}).title_link_share == 2 / 11
    # a title named only by the documents that carry it (an e-mail thread) does not count
    thread = {f"m{i}": ("Budget", f"Budget figures {i}.") for i in range(3)}
    assert CorpusGraph.build(_rows(thread), {}).title_link_share == 0.0
    assert CorpusGraph.build(_rows({"x": ("", "untitled text")}), {}).title_link_share == 0.0


def test_titled_finds_the_documents_a_name_titles():
    """The hop's title check: compared as title keys (case, a leading article, "(...)")."""
    g = _graph()
    assert g.titled("Beta Labs") == ["beta"]
    assert g.titled("the ALPHA corp") == ["alpha"]
    assert g.titled("Maria Lopez") == [] and g.titled("") == []
    assert g.share_naming("Beta Labs") == 2 / len(g.doc_ids)  # its own page and Alpha Corp's
    assert g.share_naming("Nobody Here") == 0.0


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["Alpha Corp and Beta Labs", "Who used XK-200?", "Maria Lopez"]),
            st.dictionaries(st.sampled_from(list(CORPUS) + ["nope"]), st.floats(0.1, 2.0)),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_kept_question_seeds_give_the_scores_of_a_fresh_graph(hops):
    """The selector asks at every hop with the same question: the graph keeps the question's
    named seeds, and a later hop's restart and PageRank are bit for bit a fresh graph's."""
    kept = _graph()
    for question, seed_docs in hops:
        fresh = _graph()
        assert (
            kept.seeds(question, seed_docs).tobytes() == fresh.seeds(question, seed_docs).tobytes()
        )
        assert (
            kept.scores(question, seed_docs).tobytes()
            == fresh.scores(question, seed_docs).tobytes()
        )


def test_titled_runs_take_the_longest_title_at_each_place():
    titles = Titles(["big stone gap", "gap", "stone", "alpha corp", "bros. records"])
    text = 'who directed "big stone gap"? ask alpha corp, or bros. records'
    assert titled_runs(text, titles) == ["big stone gap", "alpha corp", "bros. records"]
    assert titled_runs("nothing here", titles) == []


def test_a_lower_case_question_seeds_the_documents_its_titles_name():
    g = _graph()
    lower = g.question_seeds("who founded alpha corp, and where is beta labs?")
    assert lower[g.doc_number["alpha"]] > 0 and lower[g.doc_number["beta"]] > 0
    assert lower[g.doc_number["lonely"]] == 0
    typed = g.question_seeds("Who founded Alpha Corp?")  # names it types: those, not titles
    assert typed[g.doc_number["alpha"]] > 0 and typed[g.doc_number["beta"]] == 0
