"""How the search margin, floor and sibling margin (``ranking.selector.SEARCH_MARGIN``,
``SEARCH_FLOOR``, ``SIBLING_MARGIN``) were chosen: replay a quality run.

The rule changes only the final list's order, not what the agent searched, so a ``quality.py``
run's ``heuristic`` trajectories replay exactly: the agent's last view is re-ranked by the
shipped selector (checked against the recorded list: with the rule off, or on as shipped) and
re-ordered with :func:`keep_search_head` at each margin (``--floor 1:2,5:5``: the search's top
hit kept in the top two, its top five in the top five). One line per margin and source
dataset: R@2 and R@5 of the rule minus the selector's order alone, in points, and the questions
it won and lost at R@2 / R@5.

    python benchmarks/search_head_sweep.py RUN --dataset enron --margins=-1,0.5,1,2,inf
    python benchmarks/search_head_sweep.py RUN --dataset pooled --floor 1:2 --index DIR
    python benchmarks/search_head_sweep.py RUN --dataset pooled --margins=1 \
        --sibling-margins=-inf,0,0.5,1,2,inf   # how much less a sibling defends (SIBLING_MARGIN)
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _datasets import load_corpus  # noqa: E402
from sleuth.harness import load_trajectory
from sleuth.index import Index
from sleuth.metrics import recall_at
from sleuth.policies.heuristic import HeuristicAgent, question_hits
from sleuth.policies.transcript import observations, query_of
from sleuth.ranking.model import load_ranker
from sleuth.ranking.selector import SEARCH_FLOOR, SIBLING_MARGIN, Selector, keep_search_head
from sleuth.tasks.schema import load_tasks
from sleuth.tools.spec import DESCRIBE_CORPUS

Case = tuple[str, list[str], list[tuple[str, float]], list[str], dict[str, str]]
"""Source, gold, the selector's order, the search hits, the titles of the ordered documents."""
Floor = list[tuple[int, int]]


def replay(run: Path, dataset: str, index: Path, task_file: Path | None = None) -> list[Case]:
    """Per held-out question of the run: its source, gold, the selector's order, the search hits.
    With ``task_file`` the run is a ``sleuth eval`` of those tasks (e.g. generated ones) in
    ``RUN/DATASET/heuristic``."""
    if task_file is None:
        tasks = {t.id: t for ts in load_corpus(dataset).tasks.values() for t in ts}
    else:
        tasks = {t.id: t for t in load_tasks(task_file)}
    agent = HeuristicAgent(selector=Selector(Index.open(index), load_ranker(None)))
    folder = run / dataset / "heuristic"
    cases: list[Case] = []
    for line in (folder / "results.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        trajectory = load_trajectory(folder / "trajectories" / f"{record['task_id']}.jsonl")
        last = trajectory.turns[-1].messages  # what the agent saw when it answered
        question = query_of(last)
        seen = [o for o in observations(last) if o.tool != DESCRIBE_CORPUS]
        ranked = agent.rank(question, seen)
        hits = question_hits(question, seen)
        recorded = record["final_docs"]
        orders = (
            ranked,
            keep_search_head(ranked, hits),  # the rule before siblings gave way
            keep_search_head(ranked, hits, title=agent.selector.title),
            keep_search_head(ranked, hits, floor=[(1, 2), (5, 5)]),  # the older five-place floor
            keep_search_head(
                ranked, hits, floor=agent.selector.floor(), title=agent.selector.title
            ),
        )
        if recorded not in [[d for d, _ in order][: len(recorded)] for order in orders]:
            raise SystemExit(f"{record['task_id']}: replay differs from the recorded list")
        titles = {d: agent.selector.title(d) for d, _ in ranked}
        gold = list(tasks[record["task_id"]].gold_doc_ids)
        cases.append((record["source"], gold, ranked, hits, titles))
    return cases


def sweep(cases: list[Case], margins: list[float], floor: Floor, sibling: float) -> list[str]:
    """One line per margin and source: ΔR@2, ΔR@5 (points) and R@2 / R@5 wins and losses;
    ``sibling``: the rule's ``sibling_margin`` (-inf: the rule without titles, no siblings)."""
    lines = []
    for margin in margins:
        sums: dict[str, list[float]] = defaultdict(lambda: [0.0] * 7)
        for source, gold, ranked, hits, titles in cases:
            before = [d for d, _ in ranked]
            title = titles.__getitem__ if sibling > -math.inf else None
            ordered = keep_search_head(ranked, hits, margin, floor, title, sibling)
            after = [d for d, _ in ordered]
            d2 = recall_at(after, gold, 2) - recall_at(before, gold, 2)
            d5 = recall_at(after, gold, 5) - recall_at(before, gold, 5)
            row = (1, d2, d5, d2 > 0, d2 < 0, d5 > 0, d5 < 0)  # n, Δs, wins and losses
            sums[source] = [a + b for a, b in zip(sums[source], row, strict=True)]
        cells = [
            f"{src} n={s[0]:.0f} ΔR@2 {100 * s[1] / s[0]:+.1f} (+{s[3]:.0f}/−{s[4]:.0f}) "
            f"ΔR@5 {100 * s[2] / s[0]:+.1f} (+{s[5]:.0f}/−{s[6]:.0f})"
            for src, s in sorted(sums.items())
        ]
        lines.append(f"margin {margin:g} sibling {sibling:g}: " + " | ".join(cells))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run", type=Path, help="a quality.py --out folder with a heuristic row")
    parser.add_argument("--dataset", required=True, help="enron, patents, pooled, ...")
    parser.add_argument("--index", type=Path, default=None, help="default RUN/index/DATASET-*")
    parser.add_argument("--tasks", type=Path, default=None, help="a task JSONL the run evaluated")
    parser.add_argument("--margins", default="0,0.25,0.5,1,1.5,2,3,inf")
    parser.add_argument("--floor", default=",".join(f"{n}:{k}" for n, k in SEARCH_FLOOR))
    parser.add_argument("--sibling-margins", default=str(SIBLING_MARGIN), help="-inf: no rule")
    args = parser.parse_args()
    index = args.index or next((args.run / "index").glob(f"{args.dataset}-*"))
    margins = [float(m) for m in args.margins.split(",")]  # float() reads "inf" and "-inf"
    floor = [(int(n), int(k)) for n, k in (p.split(":") for p in args.floor.split(","))]
    cases = replay(args.run, args.dataset, index, args.tasks)
    for sibling in (float(m) for m in args.sibling_margins.split(",")):
        print("\n".join(sweep(cases, margins, floor, sibling)))


if __name__ == "__main__":
    main()
