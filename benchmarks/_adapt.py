"""``quality.py --adapt N``: each dataset's index adapted by ``sleuth adapt`` (N tasks generated
over its corpus, never its hand-written questions) and the policies that tell the shipped ranker
from the adapted one."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from rich.console import Console

from sleuth.errors import InputError
from sleuth.eval import load_results
from sleuth.eval.aggregate import paired_bootstrap_difference
from sleuth.index import Index
from sleuth.policies.spec import BuiltPolicy, PolicyOptions, build_policy
from sleuth.ranking.adapted import SHIPPED, adapted_path
from sleuth.ranking.textstage import read_info
from sleuth.train.adapt import AdaptConfig, adapt_index

SHIPPED_ROW = "heuristic"
KEYS = ("recall_at_2", "recall_at_5", "final_answer_found")
TEXT = "heuristic-text"
"""The default agent with a learned text stage on its final list."""
ADAPTED = "heuristic-adapted"
"""The default agent with the ranker ``sleuth adapt`` stored in the index."""


def built_policy(policy: str, index: Index, text_stage: Path | None = None) -> BuiltPolicy:
    """``heuristic`` with the shipped ranker even on an adapted index; ``heuristic-adapted`` with
    the index's own (``sleuth adapt``); ``heuristic-text`` with ``text_stage``."""
    if policy == ADAPTED:
        return build_policy("heuristic", PolicyOptions(ranker=str(adapted_path(index.path))))
    stage = str(text_stage) if text_stage else None
    return build_policy(policy, PolicyOptions(ranker=SHIPPED, text_stage=stage))


def stage_ids(policies: list[str], text_stage: Path | None) -> set[str]:
    """The questions ``heuristic-text``'s stage trained on (checked: the row needs a stage).

    Raises:
        InputError: ``heuristic-text`` asked for without a stage, or an invalid stage folder.
    """
    if text_stage is None:
        if TEXT in policies:
            raise InputError(f"{TEXT} needs --text-stage DIR (benchmarks/text_stage.py)")
        return set()
    return set(read_info(text_stage).question_ids)


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
    """``delta_vs_shipped[key]``: [row − shipped, low, high] (paired bootstrap over the same
    questions) on each ``heuristic-adapted`` and ``heuristic-text`` row, printed too."""
    for policy in (ADAPTED, TEXT):
        if not (out / policy / "results.jsonl").is_file():
            continue
        mine, base = (load_results(out / p / "results.jsonl") for p in (policy, SHIPPED_ROW))
        for r in rows:
            if r["policy"] == policy:
                _versus(r, mine, base, console)


def _versus(
    r: dict[str, Any], mine: dict[str, Any], base: dict[str, Any], console: Console
) -> None:
    ids = [i for i in mine if i in base]  # a pooled corpus: all its datasets' questions
    r["delta_vs_shipped"] = {}
    for key in KEYS:
        pairs = [(mine[i]["metrics"][key], base[i]["metrics"][key]) for i in ids]
        pairs = [(a, b) for a, b in pairs if a is not None and b is not None]
        diff, (low, high) = paired_bootstrap_difference(*zip(*pairs, strict=True))
        r["delta_vs_shipped"][key] = [diff, low, high]
    shown = ", ".join(
        f"{k} {d:+.3f} [{lo:+.3f}, {hi:+.3f}]" for k, (d, lo, hi) in r["delta_vs_shipped"].items()
    )
    console.print(f"  {r['dataset']} {r['policy']} − shipped (paired, n={len(ids)}): {shown}")
