"""What the corpus graph costs at scale: build time, size on disk, peak RAM, load and PageRank time.

Rows are real text: every paragraph of the shared samples (Wikipedia paragraphs, Enron e-mails,
SEC filings) cut into chunk-sized pieces, repeated with perturbation until there are ``--chunks``
of them (each copy gets its own document ids, its titles a copy suffix, and its long numbers
shifted, so copies share names, as real near-duplicates do, but not titles or numbers). No
embedding: the graph needs only the chunk rows.

    python benchmarks/graph_scale.py --chunks 100000
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
        seeds = {graph.doc_ids[i]: 1.0 for i in range(0, len(graph.doc_ids), 997)[:3]}
        times = []
        for q in asked:
            started = time.perf_counter()
            loaded.scores(q, seeds)
            times.append((time.perf_counter() - started) * 1000)
        degree = np.diff(graph.adjacency.indptr)
        print(
            f"{n:,} chunks, {len(graph.doc_ids):,} documents: {len(graph.nodes):,} nodes, "
            f"{graph.incidence.nnz:,} incidences, {graph.adjacency.nnz // 2:,} links "
            f"(median degree {np.median(degree):.0f}, unlinked {np.mean(degree == 0):.1%}); "
            f"build {built:.1f} s, peak RAM +{peak:.0f} MB (process {peak_mb():.0f} MB), "
            f"on disk {size:.1f} MB, load {load_s:.2f} s, PageRank p50 "
            f"{np.percentile(times, 50):.1f} ms / p95 {np.percentile(times, 95):.1f} ms"
        )


if __name__ == "__main__":
    main()
