"""Where the default agent's missed gold documents sit in its selector's whole ranking.

For every question of a ``quality.py`` run whose gold documents are not all in the agent's top
five, the agent runs the question again (same index, same policy: deterministic) and the
selector's final ranking of every document it saw is read; each missed gold is counted as never
seen, or by its place in that ranking. Seen-but-ranked-low points at the selector; never seen at
the searches.

    python benchmarks/missed_gold.py --index OUT/index/pooled-minilm-onnx-int8 \
        --results OUT/pooled/heuristic/results.jsonl --source musique [--list]
"""

from __future__ import annotations

import argparse
import collections
import json
from pathlib import Path
from typing import Any

from sleuth.api.agent import Agent
from sleuth.policies import heuristic


def bucket(place: int | None) -> str:
    if place is None:
        return "never seen"
    return "6-10" if place <= 10 else "11-15" if place <= 15 else "> 15"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", required=True)
    ap.add_argument("--results", type=Path, required=True, help="the heuristic run's results.jsonl")
    ap.add_argument("--source", default="", help="only questions of this source (e.g. musique)")
    ap.add_argument("--list", action="store_true", help="print each missed gold and its place")
    args = ap.parse_args()
    rows = [json.loads(line) for line in args.results.read_text().splitlines() if line.strip()]
    missed = {
        r["query"]: [g for g in r["gold_doc_ids"] if g not in r["final_docs"][:5]]
        for r in rows
        if not args.source or r["source"] == args.source
    }
    missed = {q: gold for q, gold in missed.items() if gold}
    ranked: list[Any] = []
    plain = heuristic.HeuristicAgent.answer

    def answer(self: Any, question: str, order: Any, seen: Any) -> Any:
        ranked[:] = [doc for doc, _ in order]
        return plain(self, question, order, seen)

    heuristic.HeuristicAgent.answer = answer  # type: ignore[method-assign]
    agent, counts = Agent(args.index, "heuristic"), collections.Counter[str]()
    for query, gold in missed.items():
        agent.search(query, trajectory=Path("/dev/null"))
        for doc in gold:
            place = ranked.index(doc) + 1 if doc in ranked else None
            counts[bucket(place)] += 1
            if args.list:
                print(f"{place or '-':>4} of {len(ranked):<3} {doc:<45} {query[:70]}")
    total = sum(counts.values())
    print(f"{total} missed gold documents of {len(missed)} questions:")
    for name in ("never seen", "6-10", "11-15", "> 15"):
        print(f"  {name:>10}: {counts[name]:3d} ({100 * counts[name] / max(total, 1):.0f}%)")


if __name__ == "__main__":
    main()
