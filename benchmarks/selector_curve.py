"""Does the selector want more training data? A learning curve of the selection head.

Reads the caches ``ranker_ablation.py`` left in ``--out`` (the pass-2 selection examples of its
training questions, one group per question, and the shipped agent's runs on the dev rows), fits
the LambdaRank trees on random subsets of the training questions (``--fractions``, ``--seeds``
subsets each) and reorders what the agent saw on every dev question: if the dev metrics still
rise from half the questions to all of them, more training questions pay. ``--added RANKER``: the
cache holds that ranker's questions plus generated ones (``ranker_ablation.py --generated``);
trees on its questions alone, plus the chain tasks, plus every generated task, paired per dev
question against the first.

    nice -n 10 python benchmarks/ranker_ablation.py --out DIR --rows MuSiQue,HotpotQA,2Wiki \\
        --limit 100 --train-ids src/sleuth/data/ranker/ranker.json
    python benchmarks/selector_curve.py --out DIR --train train-ids-60.pkl
    python benchmarks/selector_curve.py --out DIR --train train-ids-60-generated.pkl \
        --added src/sleuth/data/ranker/ranker.json
"""

from __future__ import annotations

import argparse
import pickle
import random
import sys
from pathlib import Path

import numpy as np
from rich.console import Console

from sleuth.eval.aggregate import bootstrap_interval
from sleuth.ranking.model import load_ranker
from sleuth.train.ranker import Examples, RankerTrainConfig, fit_selection

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ranker_ablation import METRICS, line, metrics, reorder, summarise  # noqa: E402

console = Console(width=160)


def subset(examples: Examples, share: float, seed: int) -> Examples:
    """``share`` of the groups (questions), picked at random by ``seed``."""
    n = len(examples.labels)
    keep = sorted(random.Random(seed).sample(range(n), max(2, round(share * n))))
    return Examples([examples.features[i] for i in keep], [examples.labels[i] for i in keep])


def pick(examples: Examples, order: list[str], keep: set[str]) -> Examples:
    """The groups of the questions in ``keep`` (``order``: the question of each group)."""
    assert len(order) == len(examples.labels), "one group per question"
    idx = [i for i, q in enumerate(order) if q in keep]
    return Examples([examples.features[i] for i in idx], [examples.labels[i] for i in idx])


def added(data: dict, dev: dict, ranker: Path) -> None:
    """Trees on the ranker's questions, + chain tasks, + all generated: paired on dev rows."""
    base = set(load_ranker(ranker).question_ids)
    new = [q for q in data["order"] if q not in base]
    sets = {
        "base": base,
        "+chains": base | {q for q in new if q.startswith("offline-chain-")},
        "+generated": base | set(new),
    }
    config = RankerTrainConfig(learner="gbdt")
    heads = {
        n: fit_selection(pick(data["selection"], data["order"], k), config) for n, k in sets.items()
    }
    console.print({n: len(k & set(data["order"])) for n, k in sets.items()})
    for row, items in sorted(dev.items()):
        per_q = {n: [metrics(reorder(h, it), it["gold"]) for it in items] for n, h in heads.items()}
        for r in summarise(per_q, {n: "base" for n in heads if n != "base"}):
            console.print(line(f"{row} {r['variant']}", r))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="ranker_ablation.py's --out")
    parser.add_argument("--train", default="train-ids-60.pkl", help="its training cache")
    parser.add_argument("--fractions", default="0.25,0.5,1")
    parser.add_argument("--seeds", type=int, default=3, help="random subsets per fraction")
    parser.add_argument("--added", type=Path, help="compare this ranker's questions + generated")
    args = parser.parse_args()
    data = pickle.loads((args.out / args.train).read_bytes())
    selection: Examples = data["selection"]
    dev = {
        p.stem[4:].rsplit("-", 1)[0]: pickle.loads(p.read_bytes())
        for p in args.out.glob("dev-*.pkl")
    }
    if args.added:
        added(data, dev, args.added)
        return
    config = RankerTrainConfig(learner="gbdt")
    console.print(f"{len(selection.labels)} training questions; dev rows {sorted(dev)}")
    for share in (float(f) for f in args.fractions.split(",")):
        seeds = 1 if share >= 1 else args.seeds
        heads = [fit_selection(subset(selection, share, s), config) for s in range(seeds)]
        for row, items in sorted(dev.items()):
            per_head = [[metrics(reorder(h, it), it["gold"]) for it in items] for h in heads]
            cells = []
            for key, label in METRICS.items():
                # mean over the subsets of each question's value, then an interval over questions
                values = np.mean([[q[key] for q in run] for run in per_head], axis=0)
                low, high = bootstrap_interval(list(values))
                cells.append(
                    f"{label} {100 * values.mean():.1f} [{100 * low:.0f}, {100 * high:.0f}]"
                )
            console.print(f"{share:5.0%} x{seeds} {row:9s} n={len(items):3d}  " + "  ".join(cells))


if __name__ == "__main__":
    main()
