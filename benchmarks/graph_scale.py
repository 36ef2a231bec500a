"""What the corpus graph costs at scale: build time, size on disk, peak RAM, load and PageRank time.

Rows are real text: every paragraph of the shared samples (Wikipedia paragraphs, Enron e-mails,
SEC filings) cut into chunk-sized pieces, repeated with perturbation until there are ``--chunks``
of them (each copy gets its own document ids, its titles a copy suffix, and its long numbers
shifted, so copies share names, as real near-duplicates do, but not titles or numbers). No
embedding: the graph needs only the chunk rows.

    python benchmarks/graph_scale.py --chunks 100000

PageRank is timed against the power iteration it replaced (walk, unlinked mass back to the
seeds, stop at an L1 change of 1e-5) on the same seeds, with both results' L1 distance from a
power iteration run to 1e-12 (the fixed point).
"""

from __future__ import annotations

import argparse
import re
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from sleuth.index.graph import CorpusGraph
from sleuth.index.lexical import ChunkRow

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _corpus import questions, shared_documents  # noqa: E402

_LONG_NUMBER = re.compile(r"\b\d{4,}\b")
CHUNK_CHARS = 1200  # about a 256-token chunk of English


def base_rows() -> list[ChunkRow]:
    """The shared samples as chunk rows: each document cut at paragraph ends near CHUNK_CHARS."""
    rows = []
    for doc in shared_documents():
        pieces, current = [], ""
        for para in doc.text.split("\n"):
            if current and len(current) + len(para) > CHUNK_CHARS:
                pieces.append(current)
                current = ""
            current = f"{current}\n{para}" if current else para
        pieces.append(current)
        for i, text in enumerate(p for p in pieces if p.strip()):
            rows.append(ChunkRow(f"{doc.id}_{i}", doc.id, i, text, len(text) // 4, doc.title or ""))
    return rows


def scaled_rows(base: list[ChunkRow], n: int) -> list[ChunkRow]:
    """``n`` rows: ``base`` then perturbed copies of it."""
    rows: list[ChunkRow] = []
    copy = 0
    while len(rows) < n:
        for r in base[: n - len(rows)]:
            if copy == 0:
                rows.append(r)
                continue
            text = _LONG_NUMBER.sub(lambda m, c=copy: str(int(m.group()) + c), r.text)
            title = f"{r.title} copy {copy}" if r.title else ""
            doc = f"{r.doc_id}~{copy}"
            rows.append(ChunkRow(f"{doc}_{r.idx}", doc, r.idx, text, r.tokens, title))
        copy += 1
    return rows


def walk_of(graph: CorpusGraph) -> tuple[sp.csr_matrix, np.ndarray]:
    """The old ``ppr``'s column-stochastic walk and unlinked documents (built once a graph)."""
    degree = np.asarray(graph.adjacency.sum(axis=1), dtype=np.float64).ravel()
    inverse = np.divide(1.0, degree, out=np.zeros_like(degree), where=degree > 0)
    walk = (sp.diags(inverse) @ graph.adjacency.astype(np.float64)).T.tocsr()
    return walk, degree == 0


def power_iteration(
    walk: tuple[sp.csr_matrix, np.ndarray], seeds: np.ndarray, tol: float
) -> np.ndarray:
    """The PageRank ``CorpusGraph.ppr`` computed before conjugate gradients."""
    matrix, unlinked = walk
    restart = seeds / seeds.sum()
    p = restart.copy()
    for _ in range(200):
        nxt = 0.5 * (matrix @ p + p[unlinked].sum() * restart) + 0.5 * restart
        done = np.abs(nxt - p).sum() < tol
        p = nxt
        if done:
            break
    return p


def time_pagerank(graph: CorpusGraph, asked: list[str]) -> str:
    """p50 / p95 ms of ``ppr`` and of the power iteration on each question's seeds, in turn."""
    seed_docs = {graph.doc_ids[i]: 1.0 for i in range(0, len(graph.doc_ids), 997)[:3]}
    times: dict[str, list[float]] = {"cg": [], "power": []}
    error: dict[str, list[float]] = {"cg": [], "power": []}
    walk = walk_of(graph)
    for q in asked:
        seeds = graph.seeds(q, seed_docs)
        exact = power_iteration(walk, seeds, 1e-12) if len(error["cg"]) < 10 else None
        for name, run in (
            ("cg", lambda s=seeds: graph.ppr(s)),
            ("power", lambda s=seeds: power_iteration(walk, s, 1e-5)),
        ):
            started = time.perf_counter()
            got = run()
            times[name].append((time.perf_counter() - started) * 1000)
            if exact is not None:
                error[name].append(float(np.abs(got - exact).sum()))
    cg, power = (np.percentile(times[k], [50, 95]) for k in ("cg", "power"))
    return (
        f"PageRank p50 / p95: conjugate gradients {cg[0]:.1f} / {cg[1]:.1f} ms, power iteration "
        f"{power[0]:.1f} / {power[1]:.1f} ms ({power[0] / cg[0]:.1f}x); L1 from the fixed point "
        f"(max of 10): {max(error['cg']):.1e} vs {max(error['power']):.1e}"
    )


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chunks", type=int, nargs="+", default=[100_000])
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args()
    base = base_rows()
    asked = questions(args.queries)
    print(f"{len(base):,} real chunks of the shared samples; {len(asked)} questions")
    for n in args.chunks:
        rows = scaled_rows(base, n)
        before = peak_mb()
        started = time.perf_counter()
        graph = CorpusGraph.build(rows, {"chunks": n})
        built = time.perf_counter() - started
        peak = peak_mb() - before
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            graph.save(folder)
            size = sum(f.stat().st_size for f in folder.iterdir()) / 2**20
            started = time.perf_counter()
            loaded = CorpusGraph.load(folder)
            load_s = time.perf_counter() - started
        assert loaded is not None
        degree = np.diff(graph.adjacency.indptr)
        print(
            f"{n:,} chunks, {len(graph.doc_ids):,} documents: {len(graph.nodes):,} nodes, "
            f"{graph.incidence.nnz:,} incidences, {graph.adjacency.nnz // 2:,} links "
            f"(median degree {np.median(degree):.0f}, unlinked {np.mean(degree == 0):.1%}); "
            f"build {built:.1f} s, peak RAM +{peak:.0f} MB (process {peak_mb():.0f} MB), "
            f"on disk {size:.1f} MB, load {load_s:.2f} s"
        )
        print(time_pagerank(loaded, asked), flush=True)


if __name__ == "__main__":
    main()
