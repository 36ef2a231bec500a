"""Tool latency on a ≥100k-chunk index, against a naive design, in one run.

sleuth: bm25s (sparse matrix, exclusion mask before top-k) + embedded Chroma HNSW + RRF.
naive:  rank-bm25 (pure Python BM25Okapi) + the same Chroma dense query + Python RRF, as in the
        public community rebuild of this harness.

Corpus: real text from ../shared/data (Wikipedia paragraphs, Enron mail, SEC filings), chunked
small and repeated under new ids until it reaches --chunks. Building 100k MiniLM embeddings would
take most of an hour on 2 cores, so stored vectors come from the hash embedder (allowed for
building); every query is embedded with the real all-MiniLM-L6-v2, so search latency includes
true query-embedding cost.

    python benchmarks/search_bench.py --chunks 100000 --queries 60

grep at scale (``--grep-chunks 100000 1000000``): chunk rows are built directly from the same real
chunk texts (no embedding, no BM25), each copy tagged with a unique reference token so the
vocabulary grows with the corpus as it would in real data. ``grep_corpus`` (literal prefilter
through word-piece postings, then the regex on the candidates) is timed side by side with the
previous design (the regex over every chunk in corpus order until 5 matches), on rare words,
common words, absent terms, case-insensitive phrases, pieces inside words and a pattern with no
literal:

    python benchmarks/search_bench.py --grep-only --grep-chunks 100000 1000000
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from _corpus import questions, shared_documents
from _grep_scale import grep_at_scale, pct
from sleuth.corpus.chunking import chunk_document
from sleuth.corpus.models import Document
from sleuth.embed import HashEmbedder, make_embedder
from sleuth.index import Index
from sleuth.tools.rrf import rrf
from sleuth.tools.toolbox import Toolbox

console = Console(width=120)


class BuildEmbedder:
    """Hash vectors for stored chunks, real MiniLM for queries (same 384 dimensions)."""

    spec = "minilm"

    def __init__(self) -> None:
        self.fast, self.real = HashEmbedder(384), make_embedder("minilm")
        self.dim = 384

    def embed_documents(self, texts, batch_size=64, progress=None):
        return self.fast.embed_documents(texts)

    def embed_query(self, text):
        return self.real.embed_query(text)


def build_corpus(n_chunks: int, chunk_tokens: int) -> list[Document]:
    base = shared_documents()
    sizes = [len(chunk_document(d, chunk_tokens, 8)) for d in base]
    per_copy = sum(sizes)
    copies = -(-n_chunks // per_copy)
    console.print(f"{len(base)} real documents → {per_copy} chunks per copy × {copies} copies")
    return [
        Document(id=f"{d.id}~{c}", text=d.text, title=d.title, metadata=d.metadata)
        for c in range(copies)
        for d in base
    ]


def timed(fn, args_list) -> list[float]:
    out = []
    for args in args_list:
        t0 = time.perf_counter()
        fn(*args)
        out.append(time.perf_counter() - t0)
    return out


class NaiveSearch:
    """rank-bm25 + Chroma dense + Python RRF, excluding seen ids after fusion."""

    def __init__(self, index: Index):
        from rank_bm25 import BM25Okapi

        self.index = index
        self.rows = index.lexical.rows
        self.bm25 = BM25Okapi([r.text.lower().split() for r in self.rows])

    def search(self, query: str, exclude: frozenset[str] = frozenset()):
        scores = self.bm25.get_scores(query.lower().split())
        lex = [self.rows[i].id for i in np.argsort(-scores)[:25]]
        qvec = self.index.embedder.embed_query(query)
        res = self.index.collection.query(query_embeddings=[qvec.tolist()], n_results=25)
        fused = [cid for cid, _ in rrf([lex, res["ids"][0]])]
        return [cid for cid in fused if cid not in exclude][:10]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunks", type=int, default=100_000)
    ap.add_argument("--chunk-tokens", type=int, default=96)
    ap.add_argument("--queries", type=int, default=60)
    ap.add_argument(
        "--ingest-sample", type=int, default=384, help="chunks for the ingest-throughput ratio"
    )
    ap.add_argument("--grep-chunks", type=int, nargs="*", default=[], help="grep-at-scale sizes")
    ap.add_argument("--grep-queries", type=int, default=12, help="patterns per grep category")
    ap.add_argument("--grep-only", action="store_true", help="skip the full search benchmark")
    args = ap.parse_args()
    if args.grep_chunks:
        base = [c.text for d in shared_documents() for c in chunk_document(d, args.chunk_tokens, 8)]
        for n in args.grep_chunks:
            grep_at_scale(base, n, args.grep_queries)
    if not args.grep_only:
        search_bench(args)


def search_bench(args: argparse.Namespace) -> None:

    with tempfile.TemporaryDirectory() as tmp:
        docs = build_corpus(args.chunks, args.chunk_tokens)
        index = Index.create(
            Path(tmp) / "ix", embedder="minilm", chunk_tokens=args.chunk_tokens, overlap_tokens=8
        )
        index._embedder = BuildEmbedder()
        t0 = time.perf_counter()
        index.ingest(docs, batch_size=2000)
        build_s = time.perf_counter() - t0
        index = Index.open(Path(tmp) / "ix", embedder=BuildEmbedder())
        console.print(f"built {len(index)} chunks in {build_s:.0f} s (hash vectors)")
        tb = Toolbox(index)
        qs = questions(args.queries)
        for q in qs[:5]:  # warm-up: model load, first HNSW touch
            tb.search_corpus(q)
        seen = [frozenset(h.id for h in tb.search_corpus(q).chunks) for q in qs]
        search_t = timed(
            lambda q, ex: tb.search_corpus(q, exclude=ex), list(zip(qs, seen, strict=True))
        )
        words = [w for q in qs for w in q.split() if w[:1].isupper() and len(w) > 4][: args.queries]
        patterns = [rf"\b{w.strip('?,.')}\b" for w in words]
        grep_t = timed(tb.grep_corpus, [(p,) for p in patterns])
        doc_ids = [tb.search_corpus(q).chunks[0].doc_id for q in qs[:20]]
        read_t = timed(
            lambda d, q: tb.read_document(d, query=q), list(zip(doc_ids, qs, strict=False))
        )

        t0 = time.perf_counter()
        naive = NaiveSearch(index)
        naive_build = time.perf_counter() - t0
        naive_t = timed(naive.search, [(q, ex) for q, ex in zip(qs, seen, strict=True)])

        ingest = ingest_ratio(docs, args.ingest_sample, args.chunk_tokens)

    table = Table(title=f"search_bench: {len(index)} chunks, {len(qs)} queries (ms)")
    for col in ("operation", "p50", "p95", "mean"):
        table.add_column(col, justify="right" if col != "operation" else "left")
    for name, vals in (
        ("search_corpus (sleuth, incl. MiniLM query)", search_t),
        ("search (naive rank-bm25 + Chroma + RRF)", naive_t),
        ("grep_corpus", grep_t),
        ("read_document (with query)", read_t),
    ):
        table.add_row(
            name,
            f"{pct(vals, 50):.1f}",
            f"{pct(vals, 95):.1f}",
            f"{statistics.mean(vals) * 1000:.1f}",
        )
    console.print(table)
    console.print(
        f"naive / sleuth search latency, p50: {pct(naive_t, 50) / pct(search_t, 50):.1f}x, "
        f"p95: {pct(naive_t, 95) / pct(search_t, 95):.1f}x (naive index build {naive_build:.0f} s)"
    )
    console.print(
        f"ingest throughput: {ingest['ingest_cps']:.1f} chunks/s vs raw MiniLM {ingest['raw_cps']:.1f} "
        f"chunks/s on the same texts → ratio {ingest['ratio']:.2f}"
    )


def ingest_ratio(docs: list[Document], n_chunks: int, chunk_tokens: int) -> dict:
    """Full ingest (chunk + embed + Chroma + BM25) vs bare embedding of the same chunk texts."""
    sample, total = [], 0
    for d in docs:
        sample.append(d)
        total += len(chunk_document(d, chunk_tokens, 8))
        if total >= n_chunks:
            break
    texts = [c.text for d in sample for c in chunk_document(d, chunk_tokens, 8)]
    embedder = make_embedder("minilm")
    embedder.embed_documents(texts[:32])
    raw_s, full_s = [], []
    for attempt in range(2):  # interleaved, best of two: the machine is noisy
        t0 = time.perf_counter()
        embedder.embed_documents(texts, batch_size=64)
        raw_s.append(time.perf_counter() - t0)
        with tempfile.TemporaryDirectory() as tmp:
            index = Index.create(
                Path(tmp) / f"ix{attempt}",
                embedder="minilm",
                chunk_tokens=chunk_tokens,
                overlap_tokens=8,
            )
            t0 = time.perf_counter()
            index.ingest(sample, batch_size=64)
            full_s.append(time.perf_counter() - t0)
    raw, full = len(texts) / min(raw_s), len(texts) / min(full_s)
    return {"raw_cps": raw, "ingest_cps": full, "ratio": full / raw}


if __name__ == "__main__":
    main()
