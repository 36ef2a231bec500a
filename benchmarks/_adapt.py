"""``quality.py --adapt N``: each dataset's index adapted by ``sleuth adapt`` (N tasks generated
over its corpus, never its hand-written questions) and the policies that tell the shipped ranker
from the adapted one."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from rich.console import Console

from sleuth.eval import load_results
from sleuth.eval.aggregate import paired_bootstrap_difference
from sleuth.index import Index
from sleuth.policies.spec import BuiltPolicy, PolicyOptions, build_policy
from sleuth.ranking.adapted import SHIPPED, adapted_path
from sleuth.train.adapt import AdaptConfig, adapt_index

SHIPPED_ROW = "heuristic"
KEYS = ("recall_at_2", "recall_at_5", "final_answer_found")
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


def versus_shipped(rows: list[dict[str, Any]], out: Path, console: Console) -> None:
    """``delta_vs_shipped[key]``: [adapted − shipped, low, high] (paired bootstrap over the same
    questions) on each ``heuristic-adapted`` row, printed too."""
    mine, base = (load_results(out / p / "results.jsonl") for p in (ADAPTED, SHIPPED_ROW))
    for r in rows:
        if r["policy"] != ADAPTED:
            continue
        ids = [i for i in mine if i in base]  # a pooled corpus: all its datasets' questions
        r["delta_vs_shipped"] = {}
        for key in KEYS:
            pairs = [(getattr(mine[i].metrics, key), getattr(base[i].metrics, key)) for i in ids]
            pairs = [(a, b) for a, b in pairs if a is not None and b is not None]
            diff, (low, high) = paired_bootstrap_difference(*zip(*pairs, strict=True))
            r["delta_vs_shipped"][key] = [diff, low, high]
        shown = ", ".join(
            f"{k} {d:+.3f} [{lo:+.3f}, {hi:+.3f}]"
            for k, (d, lo, hi) in r["delta_vs_shipped"].items()
        )
        console.print(f"  {r['dataset']} adapted − shipped (paired, n={len(ids)}): {shown}")
