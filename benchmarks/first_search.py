"""A fresh process's first search, with and without the kept exact-search matrix, side by side.

Each run is a new ``sleuth tools search`` process (open the index, embed the query, search); runs
alternate between the matrix kept beside the lexical side (``reads.VECTORS_FILE``) and removed
first, so the process reads every stored vector from Chroma (and keeps it again).

    python benchmarks/first_search.py --index OUT/index/pooled-minilm-onnx-int8 --runs 6
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

from _child import run_sleuth
from sleuth.index.reads import VECTORS_FILE


def one_search(index: Path, query: str) -> tuple[float, int]:
    """Wall seconds and peak RSS (MB) of one fresh ``sleuth tools search``."""
    with tempfile.TemporaryDirectory() as tmp:
        args = ["tools", "search", query, "--index", str(index), "--json"]
        return run_sleuth(args, Path(tmp) / "search.log")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", type=Path, required=True)
    ap.add_argument("--runs", type=int, default=6, help="runs of each, alternating")
    ap.add_argument("--query", default="who founded the company")
    args = ap.parse_args()
    lexical = json.loads((args.index / "sleuth-index.json").read_text())["lexical_dir"]
    kept = args.index / lexical / VECTORS_FILE
    one_search(args.index, args.query)  # warm the page cache, keep the matrix
    runs: dict[str, list[tuple[float, int]]] = {"kept": [], "read from Chroma": []}
    for i in range(2 * args.runs):
        name = "kept" if i % 2 else "read from Chroma"
        if name != "kept":
            kept.unlink(missing_ok=True)
        runs[name].append(one_search(args.index, args.query))
    for name, got in runs.items():
        wall = statistics.median(s for s, _ in got)
        rss = statistics.median(r for _, r in got)
        print(
            f"{name:>17}: {wall:.2f} s median wall, {rss:.0f} MB median peak RSS ({len(got)} runs)"
        )
    ratio = statistics.median(s for s, _ in runs["kept"]) / statistics.median(
        s for s, _ in runs["read from Chroma"]
    )
    print(f"kept / read from Chroma: {ratio:.2f}x wall")


if __name__ == "__main__":
    main()
