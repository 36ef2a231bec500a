"""CPU milliseconds a question by stage of the default agent, without a profiler's inflation.

cProfile (``agent_speed.py --profile``) charges every Python call, so it inflates Python-heavy
stages several times over against native ones (the ONNX query embedding, tiktoken). Here a few
functions are wrapped instead, each charged its calling thread's CPU time (``time.thread_time``):
tools run in turn and onnxruntime on one thread, so a stage's CPU is on the thread that asked for
it (BM25 runs on the toolbox's own thread and is charged there). Stages nest; the wrappers cost
~1 µs a call, which shows only on the many-call rows (the chunk row decode). Wall time stands
beside it: on a loaded machine the gap is time spent runnable but waiting for a CPU (or on I/O).

    nice -n 10 python benchmarks/agent_stages.py --index IDX --embedder minilm-onnx-int8 \
        --questions /work/runs/q-musique/MuSiQue/heuristic/results.jsonl -n 20
"""

from __future__ import annotations

import argparse
import collections
import functools
import importlib
import json
import tempfile
import time
from pathlib import Path
from typing import Any

# label -> (module, class or "", function); a module-level function is also replaced where
# another module imported it by name (``rebind``).
STAGES = {
    "whole question": ("sleuth.harness.run", "", "run_query"),
    "search_corpus": ("sleuth.tools.toolbox", "Toolbox", "search_corpus"),
    "  candidates (retrieval + rows)": ("sleuth.tools.toolbox", "Toolbox", "candidates"),
    "    query embedding (computed)": ("sleuth.embed.onnx", "OnnxMiniLM", "embed_documents"),
    "    BM25 top k (own thread)": ("sleuth.index.reads", "IndexReads", "lexical_search"),
    "    exact dense top k": ("sleuth.index.reads", "IndexReads", "dense_search"),
    "  search features": ("sleuth.ranking.features", "", "search_features"),
    "  packing (block token counts)": ("sleuth.tools.toolbox", "Toolbox", "_pack"),
    "policy (heuristic turns)": ("sleuth.policies.heuristic", "HeuristicAgent", "__call__"),
    "  selector rank": ("sleuth.policies.heuristic", "HeuristicAgent", "rank"),
    "    evidence": ("sleuth.ranking.evidence", "", "question_evidence"),
    "      graph PPR": ("sleuth.index.graph", "CorpusGraph", "scores"),
    "    selection features": ("sleuth.ranking.features", "", "selection_features"),
    "    trees": ("sleuth.ranking.model", "RankerModel", "score_selection"),
    "  bridge queries": ("sleuth.policies.heuristic", "HeuristicAgent", "_bridge_queries"),
    "harness: fit the view (counts new results)": ("sleuth.harness.loop", "_Episode", "_fit"),
    "harness: settle the usage line": ("sleuth.harness.loop", "_Episode", "_settle"),
    "tiktoken encodes (all)": ("sleuth.tokens", "TiktokenCounter", "encode"),
    "trajectory writes": ("sleuth.io", "", "append_jsonl"),
    "chunk row decode (all)": ("sleuth.index.columns", "ChunkColumns", "__getitem__"),
}
REBIND = {  # modules that imported a wrapped function by name
    "search_features": ["sleuth.tools.toolbox"],
    "question_evidence": ["sleuth.ranking.selector"],
    "selection_features": ["sleuth.ranking.selector"],
}


def wrap(totals: dict[str, list[float]], label: str, module: str, owner: str, name: str) -> None:
    try:  # an older tree (a baseline) may lack a stage
        mod = importlib.import_module(module)
        holder: Any = getattr(mod, owner) if owner else mod
        inner = getattr(holder, name)
    except (ImportError, AttributeError):
        return

    @functools.wraps(inner)
    def timed(*args: Any, **kwargs: Any) -> Any:
        start, wall = time.thread_time(), time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            got = totals[label]
            got[0] += time.thread_time() - start
            got[1] += time.perf_counter() - wall
            got[2] += 1

    setattr(holder, name, timed)
    for other in REBIND.get(name, []) if not owner else []:
        setattr(importlib.import_module(other), name, timed)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", type=Path, required=True)
    ap.add_argument("--questions", type=Path, required=True, help="JSONL with a query field")
    ap.add_argument("-n", type=int, default=20, help="questions timed (after 2 warm-up ones)")
    ap.add_argument("--embedder", help="search with this embedder (same vector space)")
    a = ap.parse_args()
    import sleuth
    import sleuth.embed.onnx as onnx
    from sleuth.embed import make_embedder
    from sleuth.harness.loop import HarnessConfig

    onnx.default_threads = lambda: 1  # its CPU on the calling thread
    lines = a.questions.read_text(encoding="utf-8").splitlines()
    qs = list(dict.fromkeys(json.loads(x)["query"] for x in lines if x.strip()))[: a.n + 2]
    totals: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0, 0])
    for label, (module, owner, name) in STAGES.items():
        wrap(totals, label, module, owner, name)
    index = sleuth.Index.open(a.index, make_embedder(a.embedder) if a.embedder else None)
    agent = sleuth.Agent(index, harness=HarnessConfig(parallel_tools=False))
    runs = Path(tempfile.mkdtemp(prefix="agent-stages-"))
    for i, q in enumerate(qs):
        if i == 2:
            totals.clear()
            cpu0, wall0 = time.process_time(), time.perf_counter()
        agent.search(q, trajectory=runs / f"{i}.jsonl")
    n = len(qs) - 2
    cpu, wall = (time.process_time() - cpu0) / n * 1e3, (time.perf_counter() - wall0) / n * 1e3
    print(f"{n} questions, {a.index}: {cpu:.1f} ms CPU, {wall:.1f} ms wall a q")
    print("| stage | CPU ms/q | wall ms/q | calls/q |\n|---|---|---|---|")
    for label in STAGES:
        if label in totals:
            cpu, wall, calls = totals[label]
            print(f"| {label} | {cpu / n * 1e3:.1f} | {wall / n * 1e3:.1f} | {calls / n:.1f} |")


if __name__ == "__main__":
    main()
