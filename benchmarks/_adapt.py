"""``quality.py --adapt N``: each dataset's index adapted by ``sleuth adapt`` (N tasks generated
over its corpus, never its hand-written questions) and the policies that tell the shipped ranker
from the adapted one."""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console

from sleuth.index import Index
from sleuth.policies.spec import BuiltPolicy, PolicyOptions, build_policy
from sleuth.ranking.adapted import SHIPPED, adapted_path
from sleuth.train.adapt import AdaptConfig, adapt_index

ADAPTED = "heuristic-adapted"
"""The default agent with the ranker ``sleuth adapt`` stored in the index."""


def built_policy(policy: str, index: Index) -> BuiltPolicy:
    """``heuristic`` with the shipped ranker even on an adapted index; ``heuristic-adapted`` with
    the index's own (``sleuth adapt``)."""
    if policy == ADAPTED:
        return build_policy("heuristic", PolicyOptions(ranker=str(adapted_path(index.path))))
    return build_policy(policy, PolicyOptions(ranker=SHIPPED))


def adapt_rows(name: str, index: Index, tasks: int, out: Path, console: Console) -> None:
    """``sleuth adapt`` on the dataset's index (stored even if it loses: the row measures it);
    its held-out generated-task figures go to ``OUT/adapt-<dataset>.json``."""
    started = time.perf_counter()
    report = adapt_index(index, AdaptConfig(tasks=tasks, force=True))
    took = time.perf_counter() - started
    out.mkdir(parents=True, exist_ok=True)
    (out / f"adapt-{name}.json").write_text(report.model_dump_json(indent=1))
    console.print(f"{name}: adapted on {report.train_tasks} generated tasks ({took:.0f} s)")
    for policy, score in report.heldout.items():
        ci = score.interval["recall_at_5"]
        delta = score.delta.get("recall_at_5", [0.0, 0.0, 0.0])
        console.print(
            f"  held-out generated ({report.heldout_tasks}) {policy}: R@2 "
            f"{score.mean['recall_at_2']:.3f} R@5 {score.mean['recall_at_5']:.3f} "
            f"[{ci[0]:.3f}, {ci[1]:.3f}] found {score.mean['final_answer_found']:.3f}; "
            f"ΔR@5 {delta[0]:+.3f} [{delta[1]:+.3f}, {delta[2]:+.3f}]"
        )
