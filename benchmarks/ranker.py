"""Train the shipped ranker, and measure it across datasets it never saw.

Sources: the training side (:mod:`sleuth.tasks.split`) of the staged HotpotQA, MuSiQue and 2Wiki
samples, each asked of its own pooled corpus (the HippoRAG protocol), plus the offline
generator's synthetic tasks over the 2Wiki corpus. No held-out question is ever run while
training; the model file lists every question id it saw.

``--ship`` trains on all sources and writes ``src/sleuth/data/ranker/ranker.json``.
``--rotations`` trains on two datasets (+ synthetic) and evaluates on the third's held-out side,
single-pass against the agent with that ranker, R@5 with 95% bootstrap intervals.

    python benchmarks/ranker.py --out /tmp/sleuth-quality --ship --rotations
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from rich.console import Console

from sleuth.eval.aggregate import bootstrap_interval
from sleuth.harness.loop import Harness
from sleuth.policies.baselines import single_pass_script
from sleuth.policies.heuristic import HeuristicAgent
from sleuth.policies.scripted import ScriptedPolicy
from sleuth.ranking.model import RankerModel
from sleuth.ranking.selector import Selector
from sleuth.tasks import Task
from sleuth.tasks.split import split_tasks
from sleuth.tools.toolbox import Toolbox
from sleuth.train.ranker import RankerTrainConfig, train_ranker
from sleuth.train.recipes.data import generated_tasks

sys.path.insert(0, str(Path(__file__).resolve().parent))
from quality import DATASETS, load_corpus, open_index  # noqa: E402

SHIPPED = Path(__file__).resolve().parents[1] / "src" / "sleuth" / "data" / "ranker" / "ranker.json"
console = Console(width=140)


def sources(out: Path, embedder: str) -> dict[str, tuple[Toolbox, list[Task], list[Task]]]:
    """Per dataset: tools over its pooled index, its training side, its held-out side."""
    found = {}
    for name in DATASETS:
        corpus = load_corpus(name)
        index = open_index(out / "index" / f"{name}-{embedder}", corpus.docs, embedder)
        train, heldout = split_tasks(corpus.tasks[name])
        found[name] = (Toolbox(index), train, heldout)
    return found


def recall_at_5(tools: Toolbox, make_policy, tasks: list[Task]) -> list[float]:
    values = []
    with tempfile.TemporaryDirectory() as tmp:
        for task in tasks:
            run = Harness(tools, make_policy()).run(task.query, Path(tmp) / "run.jsonl")
            docs = [d.doc_id for d in run.answer.documents] if run.answer else []
            top = list(dict.fromkeys(docs))[:5]
            gold = set(task.gold_doc_ids)
            values.append(len(gold & set(top)) / len(gold))
    return values


def train(
    found, names: list[str], config: RankerTrainConfig, per_dataset: int | None, synthetic: int
) -> RankerModel:
    chosen = [(found[n][0], found[n][1][:per_dataset]) for n in names]
    if "2Wiki" in names and synthetic:
        made = [t for t in generated_tasks() if t.source == "2wikimultihopqa"]
        chosen.append((found["2Wiki"][0], made[:synthetic]))
    started = time.perf_counter()
    model = train_ranker(chosen, config)
    console.print(
        f"trained on {names} + synthetic: {model.trained_on} ({time.perf_counter() - started:.0f} s)"
    )
    return model


def rotation(found, held: str, args: argparse.Namespace, config: RankerTrainConfig) -> dict:
    names = [n for n in found if n != held]
    model = train(found, names, config, args.per_dataset, args.synthetic)
    limit = args.limit
    tools, _, heldout = found[held]
    heldout = heldout[:limit] if limit else heldout
    ranked = Toolbox(tools.index, ranker=model)
    selector = Selector(tools.index, model)
    base = recall_at_5(tools, lambda: ScriptedPolicy(single_pass_script), heldout)
    agent = recall_at_5(ranked, lambda: ScriptedPolicy(HeuristicAgent(selector=selector)), heldout)
    diff = np.asarray(agent) - np.asarray(base)
    return {
        "held_out": held,
        "n": len(heldout),
        "single_pass_r5": float(np.mean(base)),
        "agent_r5": float(np.mean(agent)),
        "agent_r5_ci": bootstrap_interval(agent),
        "delta": float(diff.mean()),
        "delta_ci": bootstrap_interval(diff.tolist()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("/tmp/sleuth-quality"))
    parser.add_argument("--embedder", default="minilm")
    parser.add_argument(
        "--ship", action="store_true", help="train on everything and write the shipped file"
    )
    parser.add_argument(
        "--rotations", action="store_true", help="cross-dataset held-out evaluation"
    )
    parser.add_argument("--limit", type=int, default=None, help="held-out questions per rotation")
    parser.add_argument("--refit-passes", type=int, default=1)
    parser.add_argument("--per-dataset", type=int, default=None, help="training questions each")
    parser.add_argument("--synthetic", type=int, default=60, help="synthetic training tasks")
    args = parser.parse_args()
    config = RankerTrainConfig(refit_passes=args.refit_passes)
    found = sources(args.out, args.embedder)
    if args.ship:
        model = train(found, list(found), config, args.per_dataset, args.synthetic)
        model.save(SHIPPED)
        console.print(f"wrote {SHIPPED}")
    if args.rotations:
        rows = [rotation(found, held, args, config) for held in found]
        for r in rows:
            console.print(
                f"held out {r['held_out']} (n={r['n']}): single-pass R@5 {r['single_pass_r5']:.3f} → "
                f"agent {r['agent_r5']:.3f} {r['agent_r5_ci']}; Δ {r['delta']:+.3f} {r['delta_ci']}"
            )
        (args.out / "rotations.json").write_text(json.dumps(rows, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
