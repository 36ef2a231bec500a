"""Train the learned text stage (``sleuth.ranking.textstage``) on training-side questions.

Tasks: the training side (``sleuth.tasks.split``) of the staged HotpotQA, MuSiQue and 2Wiki
samples, each with hard negatives from its own pooled paragraphs, plus the training side of the
offline generator's packaged tasks (made over the 2Wiki sample). The held-out side, and the
hand-written Enron / patent questions, are never read. Then measure it with ``quality.py``:

    nice -n 10 python benchmarks/text_stage.py --out /tmp/text-stage
    python benchmarks/quality.py --datasets MuSiQue,enron,patents \\
        --policies single-pass,heuristic,heuristic-text --text-stage /tmp/text-stage
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from sleuth.errors import SleuthError
from sleuth.tasks.split import split_tasks
from sleuth.train.recipes.data import synthetic_tasks
from sleuth.train.text_stage import Group, TextStageTrainConfig, train_text_stage, training_groups

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _datasets import DATASETS  # noqa: E402


def groups_and_ids(config: TextStageTrainConfig, synthetic: int) -> tuple[list[Group], list[str]]:
    """Every training-side group of the three samples (+ ``synthetic`` generated tasks)."""
    groups: list[Group] = []
    ids: list[str] = []
    for name, (reader, folder, _) in DATASETS.items():
        docs, tasks = reader(folder)
        train = split_tasks(tasks)[0]
        if name == "2Wiki":
            train += synthetic_tasks()[:synthetic]
        made = training_groups(train, docs, config)
        print(f"{name}: {len(train)} training-side tasks -> {len(made)} groups", flush=True)
        groups += made
        ids += [t.id for t in train]
    return groups, ids


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="the stage folder to write")
    parser.add_argument("--steps", type=int, default=TextStageTrainConfig.steps)
    parser.add_argument("--max-tokens", type=int, default=TextStageTrainConfig.max_tokens)
    parser.add_argument("--synthetic", type=int, default=60)
    parser.add_argument("--weight", type=float, default=TextStageTrainConfig.weight)
    args = parser.parse_args(argv)
    try:
        config = TextStageTrainConfig(
            steps=args.steps, max_tokens=args.max_tokens, weight=args.weight
        )
        started = time.perf_counter()
        groups, ids = groups_and_ids(config, args.synthetic)
        print(f"{len(groups)} groups from {len(ids)} tasks ({time.perf_counter() - started:.0f} s)")
        stats = train_text_stage(
            groups,
            args.out,
            config,
            question_ids=ids,
            trained_on={"datasets": list(DATASETS), "synthetic": args.synthetic},
            log=lambda line: print(line, flush=True),
        )
    except SleuthError as e:
        print(f"error: {str(e).splitlines()[0]}", file=sys.stderr)
        return 2
    summary = {k: v for k, v in stats.items() if k != "losses"}
    print(json.dumps(summary | {"first10": stats["losses"][:10], "last10": stats["losses"][-10:]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
