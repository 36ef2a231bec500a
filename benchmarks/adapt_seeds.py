"""Adapted rankers of several ``quality.py --adapt N --adapt-learners ... --adapt-seed S`` runs,
pooled: each question's metric averaged over the runs (one per seed: other generated tasks, so
another adapted ranker), then paired 95% bootstrap intervals over the questions. One seed's dev
rows move by a question or two; the pooled rows say which learner adapts better on average. The held-out generated tasks of every run
(``INDEX/adapt/heldout-*.jsonl``) are pooled too: each run's own tasks, side by side.

    python benchmarks/adapt_seeds.py /tmp/q-s0 /tmp/q-s1 /tmp/q-s2 --dataset enron
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import METRICS  # noqa: E402
from sleuth.eval import load_results
from sleuth.eval.aggregate import bootstrap_interval, paired_bootstrap_difference
from sleuth.io import read_jsonl

KEYS = ("recall_at_2", "recall_at_5", "all_gold_at_5", "final_answer_found")
PAIRS = (
    ("heuristic-adapted-gbdt", "heuristic-adapted-linear"),
    ("heuristic-adapted-linear", "heuristic"),
    ("heuristic-adapted-gbdt", "heuristic"),
    ("heuristic-adapted-linear", "single-pass"),
    ("heuristic-adapted-gbdt", "single-pass"),
)


def pooled(folders: list[Path], dataset: str, policy: str) -> dict[str, dict[str, float]]:
    """Metric → question id → its mean over the runs (questions every run has)."""
    runs = [load_results(f / dataset / policy / "results.jsonl") for f in folders]
    ids = sorted(set.intersection(*(set(r) for r in runs)))
    out: dict[str, dict[str, float]] = {}
    for key in KEYS:
        values = {i: [getattr(r[i].metrics, key) for r in runs] for i in ids}
        out[key] = {i: sum(v) / len(v) for i, v in values.items() if None not in v}
    return out


GENERATED = ("adapted-gbdt", "adapted-linear", "shipped", "single-pass")


def generated(folders: list[Path]) -> dict[str, dict[str, list[float]]]:
    """Held-out generated tasks of every run: row → metric → values, in one task order."""
    by_task: dict[tuple[str, str], dict[str, dict[str, float]]] = {}
    for n, folder in enumerate(folders):
        for path in folder.glob("index/*/adapt/heldout-*.jsonl"):
            for r in read_jsonl(path):
                row = "shipped" if r["policy"].startswith("shipped") else r["policy"]
                by_task.setdefault((f"{n}", r["task_id"]), {})[row] = r["metrics"]
    tasks = [t for t, rows in sorted(by_task.items()) if set(GENERATED) <= set(rows)]
    return {
        row: {k: [float(by_task[t][row][k]) for t in tasks] for k in GENERATED_KEYS}
        for row in GENERATED
    }


GENERATED_KEYS = ("recall_at_2", "recall_at_5", "final_answer_found")


def print_generated(folders: list[Path]) -> None:
    rows = generated(folders)
    n = len(rows["single-pass"]["recall_at_5"])
    print(f"held-out generated tasks, {len(folders)} runs pooled: {n} tasks (fractions)")
    for row in GENERATED:
        means = [sum(v) / len(v) for v in rows[row].values()]
        print(f"| {row} | " + " / ".join(f"{m:.3f}" for m in means) + " |")
    for mine, base in (("adapted-gbdt", "adapted-linear"), ("adapted-linear", "shipped")):
        cells = []
        for k in GENERATED_KEYS:
            diff, (low, high) = paired_bootstrap_difference(rows[mine][k], rows[base][k])
            cells.append(f"{METRICS[k]} {diff:+.3f} [{low:+.3f}, {high:+.3f}]")
        print(f"| {mine} − {base} | " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folders", type=Path, nargs="+", help="quality.py --out folders")
    parser.add_argument("--dataset", required=True)
    args = parser.parse_args()
    policies = sorted({p for pair in PAIRS for p in pair})
    rows = {p: pooled(args.folders, args.dataset, p) for p in policies}
    print(f"{args.dataset}, {len(args.folders)} runs pooled (points, 95% bootstrap)")
    for p in policies:
        cells = []
        for k in KEYS:
            v = list(rows[p][k].values())
            low, high = bootstrap_interval(v)
            cells.append(
                f"{METRICS[k]} {100 * sum(v) / len(v):.1f} [{100 * low:.1f}, {100 * high:.1f}]"
            )
        print(f"| {p} | {len(v)} | " + " | ".join(cells) + " |")
    for mine, base in PAIRS:
        cells = []
        for k in KEYS:
            ids = sorted(set(rows[mine][k]) & set(rows[base][k]))
            a, b = [rows[mine][k][i] for i in ids], [rows[base][k][i] for i in ids]
            diff, (low, high) = paired_bootstrap_difference(a, b)
            cells.append(f"{METRICS[k]} {100 * diff:+.1f} [{100 * low:+.1f}, {100 * high:+.1f}]")
        print(f"| {mine} − {base} | " + " | ".join(cells) + " |")
    print_generated(args.folders)


if __name__ == "__main__":
    main()
