"""Memory of a serving process: an index opened as ``sleuth serve`` and the Python API open it
(``sleuth.Index.open``), then asked questions by the default agent; resident memory (RSS) and
its private part (anonymous pages: what the process holds itself, not mapped files the kernel
can drop and read again) after each step.

Each measurement is a fresh process. With ``--baseline-src`` (another tree's ``src/``, e.g.
``git archive main src``) both trees run over their own copy of the index, alternating, so they
share the machine's load; each copy is opened once by its tree first (untimed), so a format one
tree upgrades on first open is measured as that tree leaves it on disk.

    nice -n 10 python benchmarks/serve_memory.py --index /tmp/sleuth-scale/ix-100000 \\
        --questions 10 --runs 2 --baseline-src /tmp/base/src
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
STEPS = ("imported", "opened", "lexical", "graph", "first_search", "questions")


def memory_mib() -> dict[str, float]:
    """RSS and its anonymous (private) part now, from ``/proc/self/smaps_rollup``."""
    fields: dict[str, float] = {}
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            name, _, rest = line.partition(":")
            if name in ("Rss", "Anonymous") and rest.strip().endswith("kB"):
                fields[name] = int(rest.split()[0]) / 1024
    return {"rss": round(fields["Rss"], 1), "private": round(fields["Anonymous"], 1)}


def child(index_dir: Path, questions: list[str], out: Path) -> None:
    """One serving process: open, first use, ``questions`` by the default agent."""
    import sleuth
    from sleuth.tools.toolbox import Toolbox

    report: dict[str, Any] = {"src": str(Path(sleuth.__file__).parent)}
    seconds: dict[str, float] = {}

    def step(name: str, t0: float) -> None:
        seconds[name] = round(time.perf_counter() - t0, 2)
        report[name] = memory_mib()

    step("imported", time.perf_counter())
    t0 = time.perf_counter()
    index = sleuth.Index.open(index_dir)
    step("opened", t0)
    t0 = time.perf_counter()
    _ = index.lexical
    step("lexical", t0)
    t0 = time.perf_counter()
    _ = index.graph
    step("graph", t0)
    t0 = time.perf_counter()
    Toolbox(index).search_corpus(questions[0])
    step("first_search", t0)
    agent = sleuth.Agent(index)  # the default: heuristic policy + the shipped selector
    runs = Path(tempfile.mkdtemp(prefix="serve-memory-"))
    t0 = time.perf_counter()
    for i, q in enumerate(questions):
        agent.search(q, trajectory=runs / f"{i}.jsonl")
    step("questions", t0)
    shutil.rmtree(runs, ignore_errors=True)
    report["seconds"] = seconds
    report["peak_rss"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    out.write_text(json.dumps(report))


def run_child(src: Path, index_dir: Path, questions: list[str]) -> dict[str, Any]:
    """A fresh process of the tree at ``src`` over ``index_dir``; its report."""
    env = {**os.environ, "PYTHONPATH": f"{src}:{HERE.parent}"}
    with tempfile.TemporaryDirectory() as tmp:
        qfile, out = Path(tmp) / "q.json", Path(tmp) / "out.json"
        qfile.write_text(json.dumps(questions))
        cmd = [sys.executable, str(HERE), "--child", str(index_dir), str(qfile), str(out)]
        subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
        report: dict[str, Any] = json.loads(out.read_text())
    return report


def summary(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """Median over runs of each step's RSS and private MiB, seconds and peak RSS."""
    out: dict[str, Any] = {}
    for name in STEPS:
        out[name] = {k: statistics.median(r[name][k] for r in reports) for k in ("rss", "private")}
    out["seconds"] = {k: statistics.median(r["seconds"][k] for r in reports) for k in STEPS}
    out["peak_rss"] = statistics.median(r["peak_rss"] for r in reports)
    return out


def table(results: dict[str, dict[str, Any]]) -> str:
    """Markdown: each step's RSS (private) MiB per tree, then seconds and peak."""
    trees = list(results)
    lines = ["| step | " + " | ".join(f"{t}: RSS (private) MiB" for t in trees) + " |"]
    lines.append("|---" * (len(trees) + 1) + "|")
    for name in STEPS:
        cells = [
            f"{results[t][name]['rss']:.0f} ({results[t][name]['private']:.0f})" for t in trees
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    for name in STEPS[1:]:
        cells = [f"{results[t]['seconds'][name]:.2f} s" for t in trees]
        lines.append(f"| {name} time | " + " | ".join(cells) + " |")
    lines.append(
        "| peak RSS | " + " | ".join(f"{results[t]['peak_rss']:.0f}" for t in trees) + " |"
    )
    return "\n".join(lines)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        index_dir, qfile, out = (Path(p) for p in sys.argv[2:5])
        child(index_dir, json.loads(qfile.read_text()), out)
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", type=Path, required=True, help="a built index (copied per tree)")
    ap.add_argument("--questions", type=int, default=10, help="default-agent questions a run")
    ap.add_argument("--runs", type=int, default=2, help="fresh processes per tree")
    ap.add_argument("--baseline-src", type=Path, help="another tree's src/ to compare with")
    ap.add_argument("--work", type=Path, default=Path("/tmp/serve-memory"))
    ap.add_argument("--out", type=Path, help="write the results as JSON here")
    a = ap.parse_args()
    if not (a.index / "sleuth-index.json").exists():
        raise SystemExit(f"{a.index}: not a sleuth index (no sleuth-index.json)")
    from _corpus import questions as read_questions

    qs = read_questions(a.questions)
    trees = {"this": HERE.parents[1] / "src"}
    if a.baseline_src:
        if not (a.baseline_src / "sleuth").is_dir():
            raise SystemExit(f"{a.baseline_src}: no sleuth package in it")
        trees = {"baseline": a.baseline_src.resolve(), **trees}
    copies = {}
    for name, src in trees.items():
        copies[name] = a.work / f"index-{name}"
        if not copies[name].exists():
            shutil.copytree(a.index, copies[name])
        run_child(src, copies[name], qs[:1])  # untimed: the tree's own format on disk
    reports: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    for run in range(a.runs):
        for name in list(trees) if run % 2 == 0 else list(trees)[::-1]:
            reports[name].append(run_child(trees[name], copies[name], qs))
            print(json.dumps({name: reports[name][-1]}), flush=True)
    results = {name: summary(r) for name, r in reports.items()}
    print(table(results))
    if a.out:
        meta = {
            "index": str(a.index),
            "questions": len(qs),
            "runs": a.runs,
            "load": os.getloadavg(),
        }
        a.out.write_text(json.dumps({**meta, "results": results, "reports": reports}, indent=1))


if __name__ == "__main__":
    main()
