"""Harness benchmark: per-turn overhead, and parallel vs sequential tool execution.

1. Overhead: a scripted policy and an instant in-memory toolbox drive full runs (three
   searches per turn, a prune every fourth turn) under the default 32,768-token budget. The
   harness's own time per turn (rendering, token counting, budget, dedup, bookkeeping; model
   and search time excluded) comes from the trajectory's ``timings.harness_s``.
2. Parallel speed-up: one turn of 4 searches against a toolbox with a fixed latency, run with
   ``parallel_tools=True`` and ``False`` side by side; the ratio of tool wall times is printed.

Usage: ``python benchmarks/harness_bench.py [--runs 5] [--latency 0.2]``
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from collections.abc import Collection

from sleuth.harness.loop import Harness, HarnessConfig
from sleuth.policies import ScriptedPolicy, call, turn
from sleuth.tokens import count_tokens
from sleuth.tools.types import ChunkHit, ToolResult

HEADER = re.compile(r"# DOCUMENT ID: (\S+)")
ANSWER = '<Document id="d1"><Justification>Benchmark.</Justification></Document>'


class InstantTools:
    """2,000 chunks of ~250 tokens; a search returns the next unseen 4 (or a fixed latency)."""

    def __init__(self, n_chunks: int = 2000, latency_s: float = 0.0):
        self.latency_s = latency_s
        self.chunks = []
        for i in range(n_chunks):
            text = f"chunk {i} " + " ".join(f"word{(i * 13 + k) % 997}" for k in range(180))
            self.chunks.append(
                ChunkHit(id=f"d{i // 5}_{i % 5}", doc_id=f"d{i // 5}", text=text, tokens=0)
            )
        self.chunks = [c.model_copy(update={"tokens": count_tokens(c.text)}) for c in self.chunks]

    def _wait(self) -> None:
        if self.latency_s:
            time.sleep(self.latency_s)

    def search_corpus(
        self, query: str, exclude: Collection[str] = (), max_tokens: int | None = None
    ) -> ToolResult:
        self._wait()
        hits, used = [], 0
        for chunk in self.chunks:
            if chunk.id in exclude:
                continue
            if len(hits) == 4 or (max_tokens is not None and used + chunk.tokens > max_tokens):
                break
            hits.append(chunk)
            used += chunk.tokens
        return ToolResult(tool="search_corpus", chunks=hits)

    def grep_corpus(self, pattern, exclude=(), max_tokens=None) -> ToolResult:
        return self.search_corpus(pattern, exclude, max_tokens)

    def read_document(self, doc_id, query=None, max_tokens=None) -> ToolResult:
        self._wait()
        return ToolResult(
            tool="read_document", chunks=[c for c in self.chunks if c.doc_id == doc_id]
        )


def _searching_policy(turns: int) -> ScriptedPolicy:
    def step(messages, index):
        if index >= turns:
            return ANSWER
        searches = [call("search_corpus", query=f"q{index}.{k}") for k in range(3)]
        if index % 4 == 3:  # prune the oldest third of what is visible
            visible = [i for m in messages[2:] for i in HEADER.findall(m.get("content") or "")]
            searches.append(call("prune_chunks", chunk_ids=visible[: len(visible) // 3]))
        return turn(*searches)

    return ScriptedPolicy(step)


def bench_overhead(runs: int, turns: int) -> None:
    tools = InstantTools()
    per_turn_ms: list[float] = []
    peaks: list[int] = []
    for _ in range(runs):
        trajectory = Harness(tools, _searching_policy(turns)).run("benchmark query")
        per_turn_ms += [t.timings.harness_s * 1000 for t in trajectory.turns]
        peaks.append(trajectory.summary().peak_tokens)
    per_turn_ms.sort()
    print(f"overhead: {runs} runs x {turns + 1} turns, peak context {max(peaks)} tokens")
    print(
        f"  harness time per turn: median {statistics.median(per_turn_ms):.2f} ms, "
        f"p90 {per_turn_ms[int(0.9 * len(per_turn_ms))]:.2f} ms, max {per_turn_ms[-1]:.2f} ms"
    )


def bench_parallel(runs: int, latency_s: float) -> None:
    tools = InstantTools(n_chunks=200, latency_s=latency_s)
    walls: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(runs):
        for parallel in (True, False):
            policy = ScriptedPolicy(
                [turn(*(call("search_corpus", query=f"q{k}") for k in range(4))), ANSWER]
            )
            config = HarnessConfig(parallel_tools=parallel)
            trajectory = Harness(tools, policy, config).run("benchmark query")
            walls[parallel].append(trajectory.turns[0].timings.tools_s)
    par, seq = statistics.median(walls[True]), statistics.median(walls[False])
    print(f"parallel: 4 searches x {latency_s * 1000:.0f} ms latency, median of {runs} turns")
    print(
        f"  sequential {seq * 1000:.0f} ms, parallel {par * 1000:.0f} ms, speed-up {seq / par:.2f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--turns", type=int, default=16, help="tool turns per overhead run")
    parser.add_argument("--latency", type=float, default=0.2, help="tool latency in seconds")
    args = parser.parse_args()
    bench_overhead(args.runs, args.turns)
    bench_parallel(args.runs, args.latency)


if __name__ == "__main__":
    main()
