"""The corpus graph after a small update: read again only what it can change, against a full build.

The corpus of ``incremental.py`` (the shared QA paragraphs, repeated with rotated sentences),
one chunk a document. Each round, side by side on the same rows: a full
``CorpusGraph.build`` of the updated rows, and ``graphupdate.updated_graph`` from the graph of
the rows before (1% of the documents added, 1% left out, 1% changed); the two must be the same
arrays, and the run fails if not.

    python benchmarks/graph_update.py --docs 30000 --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402

from incremental import corpus  # noqa: E402
from sleuth.index.graph import CorpusGraph  # noqa: E402
from sleuth.index.graphupdate import updated_graph  # noqa: E402
from sleuth.index.grepindex import GrepIndex  # noqa: E402
from sleuth.index.lexical import ChunkRow  # noqa: E402


def _same(a: CorpusGraph, b: CorpusGraph) -> bool:
    pairs = ((a.incidence, b.incidence), (a.adjacency, b.adjacency))
    return (
        list(a.doc_ids) == list(b.doc_ids)
        and list(a.nodes) == list(b.nodes)
        and np.array_equal(a.title_node, b.title_node)
        and all(
            np.array_equal(x.indptr, y.indptr)
            and np.array_equal(x.indices, y.indices)
            and np.array_equal(x.data, y.data)
            for x, y in pairs
        )
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=30000)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    docs = corpus(a.docs + a.docs // 100)
    rows = [ChunkRow(f"{d.id}_0", d.id, 0, d.text, 10, d.title) for d in docs]
    before, extra = rows[: a.docs], rows[a.docs :]
    changed = {r.doc_id for i, r in enumerate(before) if i % 100 == 2}
    after = [r for i, r in enumerate(before) if i % 100 != 1 and r.doc_id not in changed]
    after += [
        ChunkRow(r.id, r.doc_id, 0, r.text + " Revised by Gamma Works.", 10, r.title)
        for r in before
        if r.doc_id in changed
    ]
    after += extra
    fresh = changed | {r.doc_id for r in extra}
    start = time.perf_counter()
    old = CorpusGraph.build(before, {"generation": 1})
    print(f"{a.docs} documents: the graph before, built in {time.perf_counter() - start:.1f} s")
    grep = GrepIndex.build([r.text for r in after])  # an update has it already (the lexical side)
    full_s, update_s = [], []
    for _ in range(a.rounds):
        start = time.perf_counter()
        full = CorpusGraph.build(after, {"generation": 2})
        full_s.append(time.perf_counter() - start)
        start = time.perf_counter()
        updated = updated_graph(old, after, {"generation": 2}, fresh, grep)
        update_s.append(time.perf_counter() - start)
        if not _same(full, updated):
            raise SystemExit("the updated graph differs from the full build")
    full_m, update_m = statistics.median(full_s), statistics.median(update_s)
    print(
        "| documents | update (1% added, 1% gone, 1% changed) | full build s | update s | ratio |"
    )
    print("|---|---|---|---|---|")
    print(
        f"| {a.docs} | {len(fresh)} read again | {full_m:.2f} | {update_m:.2f} | "
        f"{full_m / update_m:.1f}x |"
    )


if __name__ == "__main__":
    main()
