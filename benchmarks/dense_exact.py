"""Exact dense search over the stored vectors against Chroma's HNSW, side by side on one index.

Reports the one-time read of every stored vector, ms per ``dense_search`` on each path
(alternating, so both see the same load), and how many queries' top k differ (HNSW missing a
true neighbour, or ordering ties another way). The index is copied first: an embedded Chroma
writes its folder even to read.

    nice -n 10 python benchmarks/dense_exact.py --index /work/runs/q-dev-onnx/index/enron-minilm-onnx-int8 \
        --questions /work/runs/q-dev-onnx/enron/heuristic/results.jsonl
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", type=Path, required=True)
    ap.add_argument("--questions", type=Path, required=True, help="JSONL with a query field")
    ap.add_argument("-n", type=int, default=60, help="queries")
    ap.add_argument("-k", type=int, default=25)
    args = ap.parse_args()

    import sleuth

    tmp = Path(tempfile.mkdtemp(prefix="dense-exact-"))
    shutil.copytree(args.index, tmp / "ix")
    index = sleuth.Index.open(tmp / "ix")
    lines = args.questions.read_text(encoding="utf-8").splitlines()
    queries = list(dict.fromkeys(json.loads(x)["query"] for x in lines if x.strip()))[: args.n]
    vecs = [index.embedder.embed_query(q) for q in queries]
    start = time.perf_counter()
    index._exact_matrix()
    read_s = time.perf_counter() - start
    kept, hnsw = index._exact, (index.lexical, None)  # a kept None: Chroma's search answers
    times, differ = {"exact": 0.0, "hnsw": 0.0}, 0
    for i, vec in enumerate(vecs):
        got = {}
        for path in ("exact", "hnsw") if i % 2 else ("hnsw", "exact"):
            index._exact = kept if path == "exact" else hnsw
            start = time.perf_counter()
            got[path] = [c for c, _ in index.dense_search(vec, args.k)]
            times[path] += time.perf_counter() - start
        differ += got["exact"] != got["hnsw"]
    n = len(vecs)
    result = {
        "index": str(args.index),
        "chunks": len(index),
        "queries": n,
        "read_vectors_s": round(read_s, 3),
        "exact_ms": round(1000 * times["exact"] / n, 2),
        "hnsw_ms": round(1000 * times["hnsw"] / n, 2),
        "exact_over_hnsw": round(times["exact"] / times["hnsw"], 2),
        "top_k_differs": differ,
    }
    print(json.dumps(result))
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
