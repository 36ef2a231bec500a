"""The corpus graph: documents linked by the names they share, built at ingest without an LLM.

HippoRAG's idea (a knowledge graph and personalised PageRank seeded by the question's entities)
with nodes any corpus has instead of LLM-extracted triples: each document's bare title (an
e-mail's subject without RE:/FW:), its capitalised spans (names), e-mail addresses, long
numbers (years, patent numbers) and identifiers (letters mixed with digits). Two documents are
linked when one names the other's title, or when they share a *rare* node: one found in at
most ``rare_df`` documents, so hubs ("Enron", "2001") link nothing.

Personalised PageRank over these links, seeded by the nodes the question names and by the
documents a search ranked best, scores documents a few links away from what was found: the
next hop's candidates. The graph is a function of the chunk rows alone, so it follows the
lexical side: an update reads again only the documents it can change
(:mod:`sleuth.index.graphupdate`), and an index built before the graph existed builds it on
first use. Stored in ``graph/`` as memory-mapped columns and arrays
(:mod:`sleuth.index.graphfiles`); a graph saved in schema 1 is read once and saved again.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from sleuth.errors import InputError
from sleuth.index.graphfiles import GRAPH_SCHEMA_VERSION, read_graph, read_header, write_graph
from sleuth.index.graphnodes import NODES_VERSION, Titles, extract_nodes, title_key, titled_runs
from sleuth.index.idmap import IdMap
from sleuth.index.lexical import JSONL_FORMAT, ChunkRow, LexicalIndex, Stamp
from sleuth.recent import Recent

GRAPH_FOLDER = "graph"
RARE_DF = 20
"""A node in more documents than this is a hub: it links none of them (it can still seed)."""
TITLE_WEIGHT = 2.0
"""Weight of a title mention against one shared rare node (at most 1)."""
DAMPING = 0.5  # HippoRAG's: half the mass returns to the seeds at every step
FACTORED_LINKS = 500_000
"""Stored link entries from which PageRank may multiply through the link factors..."""
FACTORED_GAIN = 4
"""...when the links are this many times the factors' incidences: an incidence is used twice and
through more calls, ~3.5x a link's cost (2.6 vs 2.0 ms a product for 833k incidences against
1.86M links; 2.9 vs 5 ms for 654k against 4.1M on the 100k scale corpus)."""
NAMED_KEPT = 8
"""Questions whose named seeds (:meth:`CorpusGraph.question_seeds`) a graph keeps: the selector
asks for the same question's at every hop."""
PPR_TOL = 1e-7
"""PageRank's stopping point: the residual's norm against the restart's. Its scores are within
~1e-6 (L1) of the exact fixed point, 3-5x nearer than the power iteration it replaced (which
stopped ~5e-6 away), in 11 products rather than 13 at 1e-8: the same final lists on every pooled
and dev question (docs/scale.md, "Fourth round")."""


class GraphTitles(Titles):
    """A graph's titles looked up through its node map and owners, with no set of strings:
    every run of a question's names is tried (a few dozen look-ups)."""

    def __init__(self, graph: CorpusGraph):
        self.graph = graph

    def has(self, key: str) -> bool:
        node = self.graph.node_number.get(key)
        return node is not None and len(self.graph.owned(node)) > 0

    def longest_from(self, word: str) -> int:
        return 1 << 30


@dataclass
class CorpusGraph:
    """Documents × nodes incidence, document links, and which node is each document's title."""

    doc_ids: Sequence[str]  # a list when built; a mapped column when loaded
    nodes: Sequence[str]
    incidence: sp.csr_matrix  # documents × nodes, 1.0 where the document names the node
    adjacency: sp.csr_matrix  # documents × documents, symmetric link weights, zero diagonal
    title_node: np.ndarray  # per document: its title's node number, or -1
    stamp: Stamp
    rare_df: int = RARE_DF
    maps: dict[str, IdMap] | None = None  # saved look-ups ("doc", "node"); made when None
    saved_node_docs: tuple[np.ndarray, np.ndarray] | None = None  # as node_docs; made when None
    nodes_version: int = NODES_VERSION  # the extraction that found the nodes (0: unknown)
    doc_number: Mapping[str, int] = field(init=False)
    node_number: Mapping[str, int] = field(init=False)
    node_docs: tuple[np.ndarray, np.ndarray] = field(init=False)
    """Each node's documents: indptr and indices of the incidence by column."""
    _named: Recent[str, np.ndarray] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        maps = self.maps or {}
        self.doc_number = maps["doc"] if "doc" in maps else IdMap.build(self.doc_ids)
        self.node_number = maps["node"] if "node" in maps else IdMap.build(self.nodes)
        self.node_docs = self.saved_node_docs or _by_column(self.incidence)
        self.df = np.diff(self.node_docs[0])  # documents naming each node
        degree = np.asarray(self.adjacency.sum(axis=1), dtype=np.float64).ravel()
        self._sqrt_degree = np.sqrt(np.where(degree > 0, degree, 1.0))
        self._walk = _walk_operator(self, degree, self._sqrt_degree)
        titled = np.flatnonzero(self.title_node >= 0)  # owners: documents sorted by title node
        self._owner_docs = titled[np.argsort(self.title_node[titled], kind="stable")]
        self._owner_nodes = np.asarray(self.title_node[self._owner_docs])
        self._titles = GraphTitles(self)
        self._named = Recent(NAMED_KEPT)

    def owned(self, node: int) -> np.ndarray:
        """The documents whose title is ``node``, in document order."""
        owners = self._owner_nodes
        start, end = owners.searchsorted(node), owners.searchsorted(node, side="right")
        return self._owner_docs[start:end]

    @classmethod
    def build(cls, rows: Sequence[ChunkRow], stamp: Stamp, rare_df: int = RARE_DF) -> CorpusGraph:
        """The graph of ``rows`` (any order; documents in first-seen order)."""
        by_doc = rows_by_doc(rows)
        titles = {d: title_key(chunks[0].title) for d, chunks in by_doc.items()}
        title_set = Titles(t for t in titles.values() if t)
        keys = {d: document_nodes(chunks, titles[d], title_set) for d, chunks in by_doc.items()}
        return cls.from_nodes(titles, keys, stamp, rare_df)

    @classmethod
    def from_nodes(
        cls, titles: Mapping[str, str], keys: Mapping[str, set[str]], stamp: Stamp, rare_df: int
    ) -> CorpusGraph:
        """The graph of documents (in ``titles``' order: id → title key) naming ``keys``; nodes
        are numbered in order of first naming, so the same documents give the same arrays."""
        vocab: dict[str, int] = {}
        cols: list[int] = []
        indptr = [0]
        for d in titles:
            cols.extend(vocab.setdefault(k, len(vocab)) for k in sorted(keys[d]))
            indptr.append(len(cols))
        incidence = sp.csr_matrix(
            (np.ones(len(cols), np.float32), np.asarray(cols, np.int32), np.asarray(indptr)),
            shape=(len(titles), len(vocab)),
        )
        title_node = np.asarray([vocab[t] if t else -1 for t in titles.values()], np.int32)
        adjacency = _links(incidence, title_node, rare_df)
        return cls(list(titles), list(vocab), incidence, adjacency, title_node, stamp, rare_df)

    def document_keys(self) -> dict[str, set[str]]:
        """Each document's node keys, as :meth:`from_nodes` takes them."""
        names = list(self.nodes)
        indptr, indices = self.incidence.indptr, self.incidence.indices.tolist()
        return {
            doc: {names[j] for j in indices[indptr[i] : indptr[i + 1]]}
            for i, doc in enumerate(self.doc_ids)
        }

    @cached_property
    def title_link_share(self) -> float:
        """The share of titled documents whose title another document names: about a fifth in
        Wikipedia paragraphs (0.14-0.22), 0.05 in the Enron sample, 0.005 in patent abstracts.
        A corpus without this structure is unlike the one the selector learned from."""
        titled = self._owner_nodes
        if not len(titled):
            return 0.0
        owners = titled.searchsorted(titled, side="right") - titled.searchsorted(titled)
        return float(np.mean(self.df[titled] - owners >= 1))

    def titled(self, name: str) -> list[str]:
        """Ids of the documents titled ``name`` (compared as title keys: case, spacing, a
        leading article and a trailing "(...)" aside); none when no document is."""
        node = self.node_number.get(title_key(name))
        return [self.doc_ids[d] for d in self.owned(node).tolist()] if node is not None else []

    def share_naming(self, name: str) -> float:
        """The share of documents that name ``name`` (as a node key); 0.0 when none does."""
        node = self.node_number.get(title_key(name))
        return float(self.df[node]) / len(self.doc_ids) if node is not None else 0.0

    # -- personalised PageRank ----------------------------------------------------------
    def question_seeds(self, question: str) -> np.ndarray:
        """Seed mass over documents from the nodes ``question`` names: a node's documents share
        its inverse document frequency; a document titled by it takes as much again. A question
        naming no node the graph has (one typed in lower case) is read for titles instead
        (:func:`~sleuth.index.graphnodes.titled_runs`)."""
        seeds = np.zeros(len(self.doc_ids))
        n = max(len(self.doc_ids), 1)
        keys = extract_nodes(question, self._titles)
        if not any(k in self.node_number for k in keys):  # typed in lower case, say
            keys = set(titled_runs(question, self._titles))
        for key in keys:
            node = self.node_number.get(key)
            if node is None:
                continue
            weight = np.log1p(n / self.df[node])
            indptr, indices = self.node_docs
            docs = indices[indptr[node] : indptr[node + 1]]
            seeds[docs] += weight / len(docs)
            seeds[self.owned(node)] += weight
        return seeds

    def ppr(self, seeds: np.ndarray, damping: float = DAMPING, tol: float = PPR_TOL) -> np.ndarray:
        """Personalised PageRank with restart to ``seeds`` (normalised; all zeros when they
        are). Documents without links hand their mass back to the seeds, so it sums to 1.

        That is the fixed point of p = d·(W·p + (mass on unlinked documents)·r) + (1 − d)·r for
        the walk W = A·D⁻¹ and restart r; it is q / Σq for q = (1 − d)·(I − d·W)⁻¹·r, and with
        q = D^½·y, (I − d·D^-½·A·D^-½)·y = (1 − d)·D^-½·r is symmetric positive definite
        (eigenvalues in [1 − d, 1 + d]). Conjugate gradients solve it to ``tol`` (:data:`PPR_TOL`)
        in ~11 products, fewer than the power iteration it replaced took, and nearer the fixed
        point (docs/scale.md); the time goes down with each product's cost (:class:`LinkFactors`)."""
        total = float(seeds.sum())
        if total <= 0:
            return np.zeros(len(self.doc_ids))
        b = (1 - damping) * (seeds / total) / self._sqrt_degree
        y = _conjugate_gradients(self._walk, damping, b, tol)
        q: np.ndarray = np.maximum(y * self._sqrt_degree, 0.0)  # round-off: -1e-17 far away
        return q / float(q.sum())

    def scores(self, question: str, seed_docs: Mapping[str, float]) -> np.ndarray:
        """PPR seeded half by the question's names, half by ``seed_docs`` (id → weight)."""
        return self.ppr(self.seeds(question, seed_docs))

    def seeds(self, question: str, seed_docs: Mapping[str, float]) -> np.ndarray:
        """The restart :meth:`scores` uses: the question's names and ``seed_docs``, each
        normalised to 1 (when it has any mass). The question's part is kept
        (:data:`NAMED_KEPT`); never written to."""
        named = self._named.get(question, lambda: self.question_seeds(question))
        chosen = np.zeros(len(self.doc_ids))
        for doc, weight in seed_docs.items():
            if (i := self.doc_number.get(doc)) is not None:
                chosen[i] += weight
        parts = [s / s.sum() for s in (named, chosen) if s.sum() > 0]
        return sum(parts, np.zeros(len(self.doc_ids)))

    # -- persistence --------------------------------------------------------------------
    def save(self, folder: Path) -> None:
        """Every part as its own file (:func:`~sleuth.index.graphfiles.write_graph`)."""
        parts: dict[str, Any] = {"doc_keys": self.doc_ids, "doc_map": self.doc_number}
        parts |= {"node_keys": self.nodes}
        parts |= {"node_map": self.node_number, "incidence": self.incidence}
        parts |= {"adjacency": self.adjacency, "node_docs": self.node_docs}
        write_graph(folder, parts | {"title_node": self.title_node}, self._header())

    def _header(self) -> dict[str, Any]:
        return {"stamp": self.stamp, "rare_df": self.rare_df, "nodes_version": self.nodes_version}

    @classmethod
    def load(cls, folder: Path, *, upgrade: bool = True) -> CorpusGraph | None:
        """The saved graph, mapped; None when missing, torn in schema 1, or of another schema
        (rebuild it). A schema-1 graph is saved again in schema 2 (``upgrade``; kept as read
        when the folder is read-only).

        Raises:
            InputError: a schema-2 graph truncated or damaged (one line naming the file)."""
        header = read_header(folder)
        if header is None:
            return None
        if header.get("schema_version") == 1:
            graph = cls._load_v1(folder, header)
            if graph is not None and upgrade:
                with contextlib.suppress(OSError):
                    graph.save(folder)
                    return cls.load(folder, upgrade=False)
            return graph
        if header.get("schema_version") != GRAPH_SCHEMA_VERSION:
            return None
        parts = read_graph(folder, header)
        try:
            stamp, rare_df = dict(header["stamp"]), int(header["rare_df"])
            nodes_version = int(header.get("nodes_version", 0))
        except (KeyError, TypeError, ValueError):
            return None
        maps = {"doc": parts["doc_map"], "node": parts["node_map"]}
        return cls(
            parts["doc_keys"],
            parts["node_keys"],
            parts["incidence"],
            parts["adjacency"],
            parts["title_node"],
            stamp,
            rare_df,
            maps,
            parts["node_docs"],
            nodes_version,
        )

    @classmethod
    def _load_v1(cls, folder: Path, meta: dict[str, Any]) -> CorpusGraph | None:
        """Schema 1: ids and nodes as JSON lists, matrices in a compressed ``graph.npz`` whose
        checksum ``graph.json`` names; None when torn."""
        try:
            data = (folder / "graph.npz").read_bytes()
            if hashlib.sha256(data).hexdigest() != meta["npz_sha256"]:
                return None
            z = np.load(io.BytesIO(data))
            n_docs, n_nodes = len(meta["doc_ids"]), len(meta["nodes"])
            indices = z["inc_indices"]
            incidence = sp.csr_matrix(
                (np.ones(len(indices), np.float32), indices, z["inc_indptr"]),
                shape=(n_docs, n_nodes),
            )
            adjacency = sp.csr_matrix(
                (z["adj_data"], z["adj_indices"], z["adj_indptr"]), shape=(n_docs, n_docs)
            )
            return cls(
                meta["doc_ids"],
                meta["nodes"],
                incidence,
                adjacency,
                z["title_node"],
                meta["stamp"],
                int(meta["rare_df"]),
                nodes_version=0,
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None


@dataclass
class LinkFactors:
    """The links as the products they are made of, A = I·diag(w)·Iᵀ + T·(I·Oᵀ + O·Iᵀ) − diag:
    I the incidence on the nodes that link (rare ones, titles a document owns), w a rare node's
    weight, O each document's own title, T :data:`TITLE_WEIGHT`. Multiplying through them
    touches each incidence twice instead of each link once: a name in 14 documents is 14
    incidences but 182 links (6x fewer entries on the 100k scale corpus)."""

    incidence: sp.csr_matrix  # documents × linking nodes
    incidence_t: sp.csr_matrix
    weights: np.ndarray  # per linking node: 1/(df−1) when rare, else 0
    owners: sp.csr_matrix  # documents × linking nodes: 1 at the document's own title
    owners_t: sp.csr_matrix
    diagonal: np.ndarray  # what the products put on the diagonal (a document and itself)

    @classmethod
    def of(cls, incidence: sp.csr_matrix, title_node: np.ndarray, rare_df: int) -> LinkFactors:
        n_docs = incidence.shape[0]
        df = np.asarray(incidence.sum(axis=0)).ravel()
        rare = (df >= 2) & (df <= rare_df)
        titled = np.flatnonzero(title_node >= 0)
        owners = sp.csr_matrix(
            (np.ones(len(titled)), (titled, title_node[titled])),
            shape=(n_docs, incidence.shape[1]),
        )
        owned = np.asarray(owners.sum(axis=0)).ravel()
        # A title many documents carry (a thread's subject) is a shared node, not a name to follow.
        owned_here = (owned >= 1) & (owned <= 3)
        keep = np.flatnonzero(rare | owned_here)
        inc = incidence[:, keep].astype(np.float64).tocsr()
        own = (owners @ sp.diags(owned_here.astype(np.float64))).tocsr()[:, keep]
        own.eliminate_zeros()
        weights = np.where(rare, 1.0 / np.maximum(df - 1, 1), 0.0)[keep]
        diagonal = np.asarray(inc.multiply(inc) @ weights).ravel()
        diagonal += 2 * TITLE_WEIGHT * np.asarray(inc.multiply(own).sum(axis=1)).ravel()
        return cls(inc, inc.T.tocsr(), weights, own.tocsr(), own.T.tocsr(), diagonal)

    def times(self, x: np.ndarray) -> np.ndarray:
        """A·x without A."""
        named = self.incidence_t @ x
        spread = self.weights * named + TITLE_WEIGHT * (self.owners_t @ x)
        out: np.ndarray = self.incidence @ spread + TITLE_WEIGHT * (self.owners @ named)
        out -= self.diagonal * x
        return out

    def matrix(self) -> sp.csr_matrix:
        """A itself (float32, zero diagonal, no stored zeros)."""
        shared = self.incidence @ sp.diags(self.weights) @ self.incidence_t
        named = self.incidence @ self.owners_t  # [i, j]: document i names document j's title
        links = (shared + TITLE_WEIGHT * (named + named.T)).tocsr()
        links = (links - sp.diags(links.diagonal())).tocsr()
        links.eliminate_zeros()
        return links.astype(np.float32)


def rows_by_doc(rows: Sequence[ChunkRow]) -> dict[str, list[ChunkRow]]:
    """Chunk rows grouped by document, documents in first-seen order."""
    by_doc: dict[str, list[ChunkRow]] = {}
    for r in rows:
        by_doc.setdefault(r.doc_id, []).append(r)
    return by_doc


def document_nodes(chunks: Sequence[ChunkRow], title: str, titles: Titles) -> set[str]:
    """The node keys a document names (its title's among them)."""
    keys: set[str] = set().union(*(extract_nodes(r.text, titles) for r in chunks))
    if title:
        keys.add(title)
    return keys


def _by_column(incidence: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray]:
    by_node = incidence.tocsc()
    return by_node.indptr, by_node.indices


def _links(incidence: sp.csr_matrix, title_node: np.ndarray, rare_df: int) -> sp.csr_matrix:
    """Symmetric document links: shared rare nodes (each adds 1/(df−1), so a pair sharing one
    node of two documents weighs 1) plus ``TITLE_WEIGHT`` from a document to each one it names
    by title (a star, so a much-named title is no clique)."""
    return LinkFactors.of(incidence, title_node, rare_df).matrix()


def _walk_operator(
    graph: CorpusGraph, degree: np.ndarray, sqrt_degree: np.ndarray
) -> Callable[[np.ndarray], np.ndarray]:
    """x ↦ D^-½·A·D^-½·x, PageRank's walk made symmetric. A large graph multiplies through
    its :class:`LinkFactors` where those are far fewer entries and make its links (a graph
    built here); others by that matrix, made once (one product a step: a few-thousand-document
    graph is all call overhead)."""
    if graph.adjacency.nnz >= FACTORED_LINKS:
        factors = LinkFactors.of(graph.incidence, graph.title_node, graph.rare_df)
        if FACTORED_GAIN * factors.incidence.nnz < graph.adjacency.nnz and np.allclose(
            factors.times(np.ones(len(degree))), degree, rtol=1e-5, atol=1e-6
        ):
            inverse = 1.0 / sqrt_degree
            return lambda x: inverse * factors.times(inverse * x)
    scale = sp.diags(1.0 / sqrt_degree)
    walk = (scale @ graph.adjacency.astype(np.float64) @ scale).tocsr()
    return lambda x: np.asarray(walk @ x)


def _conjugate_gradients(
    normalised: Callable[[np.ndarray], np.ndarray], damping: float, b: np.ndarray, tol: float
) -> np.ndarray:
    """y with (I − damping·N)·y = b for N = ``normalised``, from y = b (the restart's share), to a
    residual norm of ``tol``·|b|. Sums are numpy's, not BLAS dot products: those spin up
    threads that fight the searches' for the cores (3x slower on a busy machine)."""
    y = b.copy()
    residual = b - (y - damping * normalised(y))
    direction = residual.copy()
    rr = float((residual * residual).sum())
    limit = tol * tol * float((b * b).sum())
    for _ in range(100):
        if rr <= limit:
            break
        product = direction - damping * normalised(direction)
        step = rr / float((direction * product).sum())
        y += step * direction
        residual -= step * product
        rr, previous = float((residual * residual).sum()), rr
        direction = residual + (rr / previous) * direction
    return y


def open_graph(folder: Path, lexical: LexicalIndex) -> CorpusGraph:
    """The graph saved in ``folder`` when it matches ``lexical``'s stamp, else one built from
    its rows and saved (kept in memory only when the folder is read-only)."""
    try:
        loaded = CorpusGraph.load(folder)
    except InputError as e:  # derived data: rebuilt from the rows, as a damaged lexical side
        logging.getLogger(__name__).warning("rebuilding the corpus graph: %s", e)
        loaded = None
    # format 5 changed only how the rows are stored: a graph of the same rows as JSON lines fits
    if loaded is not None and loaded.stamp in (
        lexical.stamp,
        {**lexical.stamp, "format": JSONL_FORMAT},
    ):
        return loaded
    graph = CorpusGraph.build(lexical.rows, lexical.stamp)
    with contextlib.suppress(OSError):
        graph.save(folder)
    return graph
