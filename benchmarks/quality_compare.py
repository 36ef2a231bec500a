"""Paired deltas between two ``quality.py`` runs: the same questions under two code trees or rankers.

``quality.py`` compares policies within one run; a change to the agent or its ranker is measured
by running it twice (``--out A`` before, ``--out B`` after, e.g. one with ``PYTHONPATH`` at a
checkout of the earlier commit) and pairing the two runs' records per question here. Every
``OUT/<dataset>/<policy>/results.jsonl`` the two folders share is compared (95% paired
bootstrap, in points; positive: B is better), a pooled corpus's also per question source.

    python benchmarks/quality_compare.py /tmp/q-before /tmp/q-after --policy heuristic
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import METRICS  # noqa: E402
from sleuth.eval import load_results
from sleuth.eval.aggregate import paired_bootstrap_difference

KEYS = ("recall_at_2", "recall_at_5", "all_gold_at_5", "final_answer_found")


def compare(a: Path, b: Path, policy: str, other: str | None) -> list[str]:
    """One line per dataset the two folders share: B's ``policy`` minus A's ``other`` (default:
    the same policy), per metric with its interval."""
    lines = []
    for folder in sorted(p.parent.parent for p in b.glob(f"*/{policy}/results.jsonl")):
        dataset = folder.name
        mine = load_results(b / dataset / policy / "results.jsonl")
        theirs_path = a / dataset / (other or policy) / "results.jsonl"
        if not theirs_path.exists():
            continue
        theirs = load_results(theirs_path)
        ids = sorted(set(mine) & set(theirs))
        sources = sorted({mine[i].source for i in ids})
        groups = [(dataset, ids)] + (  # a pooled corpus's questions also per source
            [(f"{dataset}/{s}", [i for i in ids if mine[i].source == s]) for s in sources]
            if len(sources) > 1
            else []
        )
        lines += [line(name, group, mine, theirs) for name, group in groups]
    return lines


def line(name: str, ids: list[str], mine: dict, theirs: dict) -> str:
    """One table row: B's mean and B − A with its paired interval, per metric."""
    cells = []
    for key in KEYS:
        pairs = [(getattr(mine[i].metrics, key), getattr(theirs[i].metrics, key)) for i in ids]
        pairs = [(float(x), float(y)) for x, y in pairs if x is not None and y is not None]
        if not pairs:
            continue
        diff, (low, high) = paired_bootstrap_difference(*zip(*pairs, strict=True))
        mean = 100 * sum(x for x, _ in pairs) / len(pairs)
        cells.append(
            f"{METRICS[key]} {mean:.1f} ({100 * diff:+.1f} [{100 * low:+.1f}, {100 * high:+.1f}])"
        )
    return f"| {name} | {len(ids)} | " + " | ".join(cells) + " |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("a", type=Path, help="the reference run's --out folder")
    parser.add_argument("b", type=Path, help="the compared run's --out folder")
    parser.add_argument("--policy", default="heuristic")
    parser.add_argument("--against", default=None, help="A's policy (default: --policy)")
    args = parser.parse_args()
    print(f"{args.b} {args.policy} − {args.a} {args.against or args.policy} (points, 95% paired)")
    print("| dataset | n | " + " | ".join(METRICS[k] for k in KEYS) + " |")
    print("\n".join(compare(args.a, args.b, args.policy, args.against)))


if __name__ == "__main__":
    main()
