"""Added latency of the learned rerank stage in ``search_corpus`` (50 candidates), side by side.

Each query runs through the plain toolbox and the toolbox with the shipped ranker, interleaved, so
machine noise hits both alike; the query embedding is warmed first (it is cached per text).

    python benchmarks/ranker_latency.py --index DIR --tasks-from 2Wiki --queries 100
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from sleuth.index import Index
from sleuth.ranking.model import load_ranker
from sleuth.tools.toolbox import Toolbox

sys.path.insert(0, str(Path(__file__).resolve().parent))
from quality import DATASETS  # noqa: E402


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
