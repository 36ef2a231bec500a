"""Added latency of the learned rerank stage in ``search_corpus`` (50 candidates), side by side.

:func:`selector_latency` times the selection head's calls (linear beside trees) for
``ranker_ablation.py``.

Each query runs through the plain toolbox and the toolbox with the shipped ranker, interleaved, so
machine noise hits both alike; the query embedding is warmed first (it is cached per text).

    python benchmarks/ranker_latency.py --index DIR --tasks-from 2Wiki --queries 100
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from sleuth.index import Index
from sleuth.ranking.chain import chain_features
from sleuth.ranking.features import Search, SeenDoc
from sleuth.ranking.model import RankerModel, load_ranker
from sleuth.ranking.selector import Selector, seen_features
from sleuth.tools.toolbox import Toolbox

sys.path.insert(0, str(Path(__file__).resolve().parent))
from quality import DATASETS  # noqa: E402


def fifty(a: dict, b: dict) -> tuple[str, list[SeenDoc], list[Search]]:
    """``a``'s question over ``a``'s documents topped up to 50 with ``b``'s (and its searches)."""
    question, docs, searches = a["trail"]
    _, more, theirs = b["trail"]
    shift, have = len(searches), {d.doc_id for d in docs}
    extra = [replace(d, ranks=[(s + shift, r) for s, r in d.ranks]) for d in more]
    return question, [*docs, *(d for d in extra if d.doc_id not in have)][:50], [*searches, *theirs]


def selector_latency(
    items: list[dict], search_head: Any, heads: dict[str, Any], tools: Toolbox, calls: int
) -> dict[str, Any]:
    """Per selector call at 50 seen documents (``ranker_ablation.py``'s dev trajectories, each
    topped up from the next): evidence + features + head, and the head alone, interleaved."""
    selectors = {
        name: Selector(tools.index, RankerModel(search=search_head, selection=heads[name]))
        for name in ("linear", "gbdt")
    }
    times: dict[str, list[float]] = {f"{n}{part}": [] for n in selectors for part in ("", " head")}
    times["chain features"] = []
    sizes = []
    for i in range(min(calls, len(items))):
        question, docs, searches = fifty(items[i], items[(i + 1) % len(items)])
        sizes.append(len(docs))
        x = seen_features(tools.index, question, docs, searches)  # also warms the query vector
        started = time.perf_counter()
        chain_features(question, docs, searches, [0.5] * len(docs))
        times["chain features"].append(1000 * (time.perf_counter() - started))
        for name, selector in selectors.items():
            started = time.perf_counter()
            selector.rank(question, docs, searches)
            times[name].append(1000 * (time.perf_counter() - started))
            started = time.perf_counter()
            selector.model.score_selection(x)
            times[f"{name} head"].append(1000 * (time.perf_counter() - started))
    out: dict[str, Any] = {"calls": len(sizes), "mean_docs": float(np.mean(sizes))}
    for name, ms in times.items():
        out[name] = {"p50_ms": float(np.percentile(ms, 50)), "p95_ms": float(np.percentile(ms, 95))}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--index", type=Path, required=True)
    parser.add_argument("--tasks-from", default="2Wiki", choices=list(DATASETS))
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args()
    reader, folder, _ = DATASETS[args.tasks_from]
    queries = [t.query for t in reader(folder)[1][: args.queries]]
    index = Index.open(args.index)
    plain, ranked = Toolbox(index), Toolbox(index, ranker=load_ranker())
    times: dict[str, list[float]] = {"plain": [], "ranked": []}
    for q in queries:
        plain.search_corpus(q)  # warm the cached query embedding
        for name, tools in (("plain", plain), ("ranked", ranked)):
            started = time.perf_counter()
            tools.search_corpus(q)
            times[name].append(1000 * (time.perf_counter() - started))
    p = {k: (np.percentile(v, 50), np.percentile(v, 95)) for k, v in times.items()}
    added = np.asarray(times["ranked"]) - np.asarray(times["plain"])
    print(f"{len(queries)} queries, {len(index)} chunks, 50 candidates per search")
    for name, (p50, p95) in p.items():
        print(f"  {name:6s} search_corpus p50 {p50:6.1f} ms  p95 {p95:6.1f} ms")
    print(
        f"  added by the ranker: p50 {np.percentile(added, 50):.1f} ms, p95 {np.percentile(added, 95):.1f} ms"
    )


if __name__ == "__main__":
    main()
