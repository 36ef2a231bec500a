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

import numpy as np

from sleuth.errors import SleuthError
from sleuth.tasks.split import split_tasks
from sleuth.train.recipes.data import generated_tasks
from sleuth.train.text_stage import Group, TextStageTrainConfig, train_text_stage, training_groups

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _datasets import DATASETS, load_corpus  # noqa: E402


def groups_and_ids(config: TextStageTrainConfig, synthetic: int) -> tuple[list[Group], list[str]]:
    """Every training-side group of the three samples (+ ``synthetic`` generated tasks)."""
    groups: list[Group] = []
    ids: list[str] = []
    for name, (reader, folder, source) in DATASETS.items():
        docs, tasks = reader(folder)
        train = split_tasks(tasks)[0]
        if name == "2Wiki":  # generated over its training-side paragraphs only
            train += [t for t in generated_tasks() if t.source == source][:synthetic]
        made = training_groups(train, docs, config)
        print(f"{name}: {len(train)} training-side tasks -> {len(made)} groups", flush=True)
        groups += made
        ids += [t.id for t in train]
    return groups, ids


def heldout_accuracy(folder: Path, per_dataset: int) -> dict[str, dict[str, float]]:
    """Share of held-out groups (gold + hard negatives, built as in training) whose gold passage
    the stage scores first, next to MiniLM's cosine on the same groups (a check of the stage
    alone; the agent's figures come from ``quality.py``)."""
    from sleuth.embed import make_embedder
    from sleuth.ranking.textstage import load_text_stage

    stage, embedder = load_text_stage(folder), make_embedder("minilm-onnx-int8")
    config = TextStageTrainConfig(negatives=3)
    out = {}
    for name, (reader, folder_, _) in DATASETS.items():
        docs, tasks = reader(folder_)
        groups = training_groups(split_tasks(tasks)[1][:per_dataset], docs, config)
        hits = {"stage": 0, "cosine": 0}
        for g in groups:
            passages = [g.positive, *g.negatives]
            hits["stage"] += int(stage.score(g.question, passages).argmax() == 0)
            vectors = embedder.embed_documents(passages)
            hits["cosine"] += int((vectors @ embedder.embed_query(g.question)).argmax() == 0)
        out[name] = {k: v / max(1, len(groups)) for k, v in hits.items()} | {"groups": len(groups)}
        print(name, out[name], flush=True)
    return out


def latency(folder: Path, index_path: Path, dataset: str, questions: int) -> None:
    """Seconds per question, interleaved: one ``search_corpus`` (what single-pass costs) and the
    stage reading its ten best documents (what ``heuristic-text`` adds to the default agent)."""
    import time

    from sleuth.api.index import Index
    from sleuth.ranking.textstage import load_text_stage, passage_text

    stage, index = load_text_stage(folder), Index.open(index_path)
    tasks = [t for ts in load_corpus(dataset).tasks.values() for t in ts][:questions]
    search_s, stage_s = [], []
    first = index.search(tasks[0].query).chunks  # one untimed round loads the embedder
    stage.score(tasks[0].query, [h.text for h in first])
    for task in tasks:
        started = time.perf_counter()
        hits = index.search(task.query).chunks
        search_s.append(time.perf_counter() - started)
        docs = list(dict.fromkeys(h.doc_id for h in hits))[:10]
        texts = [
            passage_text(index.document_chunks(d)[0].title, index.document_chunks(d)[0].text)
            for d in docs
        ]
        started = time.perf_counter()
        stage.score(task.query, texts)
        stage_s.append(time.perf_counter() - started)
    for name, values in (("search_corpus", search_s), ("text stage (10 documents)", stage_s)):
        print(f"{name}: p50 {np.median(values):.3f} s, mean {np.mean(values):.3f} s")
    ratio = np.median(stage_s) / np.median(search_s)
    print(f"stage / search (p50): {ratio:.1f}x over {len(tasks)} questions")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="the stage folder to write")
    parser.add_argument("--steps", type=int, default=TextStageTrainConfig.steps)
    parser.add_argument("--max-tokens", type=int, default=TextStageTrainConfig.max_tokens)
    parser.add_argument("--synthetic", type=int, default=60)
    parser.add_argument("--weight", type=float, default=TextStageTrainConfig.weight)
    parser.add_argument("--check", type=int, default=0, help="only: held-out group accuracy")
    parser.add_argument("--latency", type=int, default=0, help="only: seconds per question")
    parser.add_argument("--index", type=Path, help="for --latency: an index of --dataset")
    parser.add_argument("--dataset", default="enron", help="for --latency: its questions")
    args = parser.parse_args(argv)
    if args.latency:
        latency(args.out, args.index, args.dataset, args.latency)
        return 0
    if args.check:
        heldout_accuracy(args.out, args.check)
        return 0
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
