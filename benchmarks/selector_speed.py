"""One selector call at 50 seen documents: this source tree against another, side by side.

Two worker processes, one importing ``sleuth`` from this tree and one from ``--before`` (a
checkout of an earlier commit, e.g. ``git worktree add /tmp/before <commit>``), score the same
cases in turn, call by call, so machine load hits both alike. Each case is a dev trajectory
that ``ranker_ablation.py --prepare dev`` cached, topped up to 50 documents from the next one
(``ranker_latency.fifty``); a call is the whole :meth:`Selector.rank` (corpus evidence, features,
head) with the shipped ranker. The rankings of the two trees must be identical: a speed-up
that changes what the selector returns is a bug, and the script exits 1.

    python benchmarks/selector_speed.py --items OUT/dev-MuSiQue-100.pkl \\
        --index OUT/index/MuSiQue-minilm --before /tmp/before [--after /tmp/after] --calls 100
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def worker(items_path: Path, index_path: Path) -> None:
    """Answer ``i`` on stdin with case i's call time and ranking (one JSON line each)."""
    sys.path.insert(0, str(HERE))
    import sleuth
    from ranker_latency import fifty
    from sleuth.index import Index
    from sleuth.ranking.model import load_ranker
    from sleuth.ranking.selector import Selector

    items = pickle.loads(items_path.read_bytes())
    selector = Selector(Index.open(index_path), load_ranker())
    cases = [fifty(items[i], items[(i + 1) % len(items)]) for i in range(len(items))]
    selector.rank(*cases[0])  # load the graph and the embedder once
    for question, _, _ in cases:  # the agent's first search has embedded the question
        selector.index.embedder.embed_query(question)
    print(json.dumps({"cases": len(cases), "sleuth": sleuth.__file__}), flush=True)
    for line in sys.stdin:
        question, docs, searches = cases[int(line) % len(cases)]
        ms = []
        for _ in range(2):  # first: the chunks' vectors fetched; again: as at a later hop
            started = time.perf_counter()
            ranked = selector.rank(question, docs, searches)
            ms.append(1000 * (time.perf_counter() - started))
        print(json.dumps({"ms": ms, "ranked": [d for d, _ in ranked]}), flush=True)


def start(src: Path, args: argparse.Namespace) -> subprocess.Popen[str]:
    env = os.environ | {"PYTHONPATH": str(src), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, __file__, "--worker", "--items", str(args.items)]
    command += ["--index", str(args.index)]
    proc = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout is not None
    ready = json.loads(proc.stdout.readline())
    if not Path(ready["sleuth"]).is_relative_to(src):
        raise SystemExit(f"the worker for {src} imported {ready['sleuth']}")
    return proc


def ask(proc: subprocess.Popen[str], case: int) -> dict:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(f"{case}\n")
    proc.stdin.flush()
    return json.loads(proc.stdout.readline())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=Path, required=True)
    parser.add_argument("--index", type=Path, required=True)
    parser.add_argument("--before", type=Path, help="a tree whose src/ is imported (required)")
    parser.add_argument("--after", type=Path, default=HERE.parent, help="default: this tree")
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.items, args.index)
        return 0
    if args.before is None:
        parser.error("--before is required")
    trees = {"before": args.before / "src", "after": args.after / "src"}
    procs = {name: start(src, args) for name, src in trees.items()}
    times: dict[str, list[list[float]]] = {name: [] for name in procs}
    differ = 0
    for case in range(args.calls):
        order = list(procs) if case % 2 == 0 else list(procs)[::-1]  # alternate who goes first
        replies = {name: ask(procs[name], case) for name in order}
        for name, reply in replies.items():
            times[name].append(reply["ms"])
        differ += replies["before"]["ranked"] != replies["after"]["ranked"]
    for proc in procs.values():
        proc.terminate()
    print(f"{args.calls} cases at up to 50 documents, {args.index.name}, interleaved")
    for call, label in enumerate(("first call (vectors fetched)", "repeat call (later hop)")):
        print(f" {label}:")
        for name, ms in times.items():
            mine = [m[call] for m in ms]
            p50, p95 = np.percentile(mine, 50), np.percentile(mine, 95)
            print(f"  {name:6s} p50 {p50:6.1f} ms  p95 {p95:6.1f} ms")
        ratio = [b[call] / a[call] for b, a in zip(times["before"], times["after"], strict=True)]
        print(f"  before/after per call: median {np.median(ratio):.1f}x")
    print(f" rankings differ: {differ} of {args.calls}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
