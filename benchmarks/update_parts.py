"""What an update rebuilds besides BM25: the corpus graph and the grep index, each made from the
rows before it (reading only what the update can change) against a full build, side by side.

The corpus of ``incremental.py`` (the shared QA paragraphs, repeated with rotated sentences),
one chunk a document. Each round, on the same rows: ``CorpusGraph.build`` of the updated rows
against ``graphupdate.updated_graph`` from the graph of the rows before, and
``GrepIndex.build`` against ``GrepIndex.updated`` (1% of the documents added, 1% left out, 1%
changed). The graphs must be the same arrays and the grep indexes the same postings; the run
fails if not.

    python benchmarks/update_parts.py --docs 30000 --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

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


def _postings(index: GrepIndex) -> dict[str, list[int]]:
    names = index.vocab.split("\n") if len(index.starts) else []
    bounds = index.offsets.tolist()
    return {t: index.postings[bounds[i] : bounds[i + 1]].tolist() for i, t in enumerate(names)}


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


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
    old_row = {r.id: i for i, r in enumerate(before)}
    sources = np.asarray([-1 if r.doc_id in fresh else old_row[r.id] for r in after], np.int64)
    texts = [r.text for r in after]
    old_graph = CorpusGraph.build(before, {"generation": 1})
    old_grep = GrepIndex.build([r.text for r in before])
    times: dict[str, list[float]] = {k: [] for k in ("graph", "graph+", "grep", "grep+")}
    for _ in range(a.rounds):
        seconds, grep = _timed(lambda: GrepIndex.build(texts))
        times["grep"].append(seconds)
        seconds, moved = _timed(lambda: old_grep.updated(sources, texts))
        times["grep+"].append(seconds)
        if _postings(grep) != _postings(moved):
            raise SystemExit("the updated grep index differs from the full build")
        seconds, full = _timed(lambda: CorpusGraph.build(after, {"generation": 2}))
        times["graph"].append(seconds)
        seconds, updated = _timed(
            lambda: updated_graph(old_graph, after, {"generation": 2}, fresh, moved)  # noqa: B023 - called at once
        )
        times["graph+"].append(seconds)
        if not _same(full, updated):
            raise SystemExit("the updated graph differs from the full build")
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{a.docs} documents; 1% added, 1% gone, 1% changed; medians of {a.rounds} rounds")
    print("| part | full build s | update s | ratio |\n|---|---|---|---|")
    for part, label in (("graph", "corpus graph"), ("grep", "grep index")):
        full_s, update_s = med[part], med[f"{part}+"]
        print(f"| {label} | {full_s:.2f} | {update_s:.2f} | {full_s / update_s:.1f}x |")


if __name__ == "__main__":
    main()
