"""``quality.py --adapt N``: each dataset's index adapted by ``sleuth adapt`` (N tasks generated
over its corpus, never its hand-written questions) and the policies that tell the shipped ranker
from the adapted one. ``--adapt-learners linear,gbdt`` adapts once per learner (the generated
tasks and the single-pass and shipped held-out runs are shared) and adds one
``heuristic-adapted-LEARNER`` row each, its ranker kept as ``OUT/adapt-DATASET-LEARNER.json``."""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from sleuth.errors import InputError
from sleuth.eval import load_results
from sleuth.eval.aggregate import paired_bootstrap_difference
from sleuth.eval.records import QueryRecord
from sleuth.index import Index
from sleuth.policies.spec import BuiltPolicy, PolicyOptions, build_policy
from sleuth.ranking.adapted import SHIPPED, adapted_path
from sleuth.ranking.model import LEARNERS
from sleuth.ranking.textstage import read_info
from sleuth.train.adapt import AdaptConfig, AdaptReport, adapt_index

SHIPPED_ROW = "heuristic"
KEYS = ("recall_at_2", "recall_at_5", "final_answer_found")
TEXT = "heuristic-text"
"""The default agent with a learned text stage on its final list."""
ADAPTED = "heuristic-adapted"
"""The default agent with the ranker ``sleuth adapt`` stored in the index."""


def add_adapt_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--adapt", type=int, default=None, help="sleuth adapt --tasks N first")
    parser.add_argument("--adapt-learners", default=None, help="e.g. linear,gbdt (one row each)")
    parser.add_argument("--adapt-seed", type=int, default=None, help="sleuth adapt --seed")
    parser.add_argument("--text-stage", type=Path, default=None, help="for heuristic-text")


def check_adapt_arguments(args: argparse.Namespace) -> None:
    """Check the adapt options and add the adapted rows to ``args.policies``.

    Raises:
        InputError: too few tasks, or an unknown learner.
    """
    if args.adapt is None:
        return
    if args.adapt < AdaptConfig.tasks_needed:
        raise InputError(f"--adapt ({args.adapt}) must be at least {AdaptConfig.tasks_needed}")
    if args.adapt_learners is not None:
        names = [n.strip() for n in args.adapt_learners.split(",") if n.strip()]
        unknown = [n for n in names if n not in LEARNERS]
        if unknown or not names:
            shown = unknown or repr(args.adapt_learners)
            raise InputError(f"unknown learner {shown}; choose from {', '.join(LEARNERS)}")
        args.adapt_learners = names
    adapted = adapted_rows(args.adapt_learners)
    args.policies = [p for p in args.policies if p not in adapted] + adapted


def adapted_rows(learners: list[str] | None) -> list[str]:
    """The adapted policies' row names: one per learner, or the default's."""
    return [f"{ADAPTED}-{n}" for n in learners] if learners else [ADAPTED]


def built_policy(
    policy: str, index: Index, out: Path, text_stage: Path | None = None
) -> BuiltPolicy:
    """``heuristic`` with the shipped ranker even on an adapted index; ``heuristic-adapted`` with
    the index's own (``sleuth adapt``), ``heuristic-adapted-LEARNER`` with that learner's;
    ``heuristic-text`` with ``text_stage``."""
    if policy == ADAPTED:
        return build_policy("heuristic", PolicyOptions(ranker=str(adapted_path(index.path))))
    if policy.startswith(f"{ADAPTED}-"):
        kept = out / f"adapt-{index.path.name}-{policy.removeprefix(f'{ADAPTED}-')}.json"
        return build_policy("heuristic", PolicyOptions(ranker=str(kept)))
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


def adapt_rows(name: str, index: Index, args: argparse.Namespace, console: Console) -> None:
    """``sleuth adapt`` on the dataset's index, per learner (stored even if it loses: the row
    measures it); its held-out generated-task figures go to ``OUT/adapt-<dataset>[-LEARNER].json``."""
    out, seed = args.out, {} if args.adapt_seed is None else {"seed": args.adapt_seed}
    for learner in args.adapt_learners or [None]:
        started = time.perf_counter()
        config = AdaptConfig(tasks=args.adapt, force=True, learner=learner, **seed)
        report = adapt_index(index, config)
        took = time.perf_counter() - started
        out.mkdir(parents=True, exist_ok=True)
        suffix = f"-{learner}" if learner else ""
        (out / f"adapt-{name}{suffix}.json").write_text(report.model_dump_json(indent=1))
        if learner:
            shutil.copyfile(
                adapted_path(index.path), out / f"adapt-{index.path.name}-{learner}.json"
            )
        _print_report(name, report, took, console)


def _print_report(name: str, report: AdaptReport, took: float, console: Console) -> None:
    console.print(
        f"{name}: adapted ({report.learner}) on {report.train_tasks} generated tasks ({took:.0f} s)"
    )
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
    questions) on each ``heuristic-adapted*`` and ``heuristic-text`` row, printed too."""
    base = load_results(out / SHIPPED_ROW / "results.jsonl")
    for r in rows:
        if r["policy"].startswith(ADAPTED) or r["policy"] == TEXT:
            _versus(r, load_results(out / r["policy"] / "results.jsonl"), base, console)


def _versus(
    r: dict[str, Any], mine: dict[str, QueryRecord], base: dict[str, QueryRecord], console: Console
) -> None:
    ids = [i for i in mine if i in base]  # a pooled corpus: all its datasets' questions
    r["delta_vs_shipped"] = {}
    for key in KEYS:
        pairs = [(getattr(mine[i].metrics, key), getattr(base[i].metrics, key)) for i in ids]
        pairs = [(a, b) for a, b in pairs if a is not None and b is not None]
        diff, (low, high) = paired_bootstrap_difference(*zip(*pairs, strict=True))
        r["delta_vs_shipped"][key] = [diff, low, high]
    shown = ", ".join(
        f"{k} {d:+.3f} [{lo:+.3f}, {hi:+.3f}]" for k, (d, lo, hi) in r["delta_vs_shipped"].items()
    )
    console.print(f"  {r['dataset']} {r['policy']} − shipped (paired, n={len(ids)}): {shown}")
