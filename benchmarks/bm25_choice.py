"""bm25s vs tantivy for the lexical side, measured on the same real chunks in one run.

Both are indexed from identical chunk texts; both answer the same questions for top-25, with
and without an exclusion set of already-seen ids (the harness passes one on every search).

    python benchmarks/bm25_choice.py --chunk-tokens 96
"""

from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np
import tantivy
from rich.console import Console
from rich.table import Table

from _corpus import questions, shared_documents
from sleuth.corpus.chunking import chunk_document
from sleuth.index.lexical import ChunkRow, LexicalIndex

console = Console()


def tantivy_index(rows: list[ChunkRow], folder: str):
    sb = tantivy.SchemaBuilder()
    sb.add_text_field("id", stored=True, tokenizer_name="raw")
    sb.add_text_field("text", stored=False, tokenizer_name="en_stem")
    schema = sb.build()
    index = tantivy.Index(schema, path=folder)
    writer = index.writer(heap_size=200_000_000, num_threads=1)
    for r in rows:
        writer.add_document(tantivy.Document(id=r.id, text=r.text))
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    return index


def tantivy_search(index, query: str, k: int, exclude: frozenset[str]) -> list[str]:
    """Tantivy has no score mask: over-fetch by the exclusion size and filter afterwards."""
    searcher = index.searcher()
    cleaned = "".join(ch if ch.isalnum() or ch.isspace() else " " for ch in query)
    q = index.parse_query(cleaned, ["text"])
    hits = searcher.search(q, k + len(exclude)).hits
    ids = [searcher.doc(addr)["id"][0] for _, addr in hits]
    return [i for i in ids if i not in exclude][:k]


def p(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunk-tokens", type=int, default=96)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument(
        "--exclude", type=int, default=500, help="size of the seen-id set for the second pass"
    )
    args = ap.parse_args()
    rows = [
        ChunkRow(c.id, c.doc_id, c.idx, c.text, c.tokens)
        for d in shared_documents()
        for c in chunk_document(d, args.chunk_tokens, 8)
    ]
    qs = questions(args.queries)
    rng = np.random.default_rng(0)
    exclude = frozenset(rows[i].id for i in rng.choice(len(rows), args.exclude, replace=False))

    t0 = time.perf_counter()
    lex = LexicalIndex.build(rows, {})
    bm25s_build = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        tv = tantivy_index(rows, tmp)
        tantivy_build = time.perf_counter() - t0
        results = {}
        for name, fn in (
            ("bm25s", lambda q, ex: lex.search(q, 25, lex.rows_for(ex))),
            ("tantivy", lambda q, ex: tantivy_search(tv, q, 25, ex)),
        ):
            for label, ex in (("no exclusion", frozenset()), (f"{args.exclude} excluded", exclude)):
                times = []
                for q in qs:
                    t = time.perf_counter()
                    fn(q, ex)
                    times.append(time.perf_counter() - t)
                results[(name, label)] = times
        overlap = np.mean(
            [
                len(
                    set(i for i, _ in lex.search(q, 25))
                    & set(tantivy_search(tv, q, 25, frozenset()))
                )
                / 25
                for q in qs
            ]
        )

    table = Table(title=f"BM25 engines on {len(rows)} real chunks, {len(qs)} questions (ms)")
    for c in ("engine", "build s", "query", "p50", "p95"):
        table.add_column(c)
    for (name, label), times in results.items():
        build = bm25s_build if name == "bm25s" else tantivy_build
        table.add_row(name, f"{build:.1f}", label, f"{p(times, 50):.2f}", f"{p(times, 95):.2f}")
    console.print(table)
    console.print(f"top-25 overlap bm25s vs tantivy: {overlap:.2f}")


if __name__ == "__main__":
    main()
