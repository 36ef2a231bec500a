"""Generated chain tasks for the selector, over training-side paragraphs only.

For each staged sample (HotpotQA, MuSiQue, 2Wiki) the corpus is the paragraphs (gold and
distractors) of its training-side questions (:mod:`sleuth.tasks.split`) that no held-out
question uses: a hidden test corpus is made of held-out questions' pools, so generating over those
paragraphs would leak. Over it the LLM-free generator makes ``chain`` tasks
(:func:`sleuth.datagen.generate_chains`): 3 and 4 gold documents first, then 2, each gold document
naming the next, the answer in the last; then up to ``--offline`` two-hop ``bridge`` and
``comparison`` tasks (:func:`sleuth.datagen.generate_offline`) and ``--single`` one-hop ``single``
tasks (they replace the 2Wiki offline file's singles, which were made over the whole sample).
Deterministic for a seed; writes the packaged file that ``sleuth.train.recipes.data.generated_tasks``
reads.

    python benchmarks/chain_tasks.py [--n 400] [--offline 60] [--single 10] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from sleuth.corpus import Document
from sleuth.datagen import OfflineConfig, generate_chains, generate_offline
from sleuth.tasks import Task, save_tasks
from sleuth.tasks.split import split_tasks

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _datasets import DATASETS, load_corpus  # noqa: E402

PACKAGED = Path(__file__).resolve().parents[1] / "src/sleuth/data/tasks/qa_generated_tasks.jsonl"


def training_side_documents(name: str) -> list[Document]:
    """The sample's paragraphs that training-side questions use and held-out ones do not."""
    corpus = load_corpus(name)
    train, heldout = split_tasks(corpus.tasks[name])

    def used(tasks: list[Task]) -> set[str]:
        return {d for t in tasks for d in (*t.gold_doc_ids, *t.distractor_doc_ids)}

    keep = used(train) - used(heldout)
    return [d for d in corpus.docs if d.id in keep]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=400, help="most tasks per sample and hop set")
    parser.add_argument("--offline", type=int, default=60, help="bridge/comparison per sample")
    parser.add_argument("--single", type=int, default=10, help="one-hop single per sample")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=PACKAGED)
    args = parser.parse_args()
    made: dict[str, Task] = {}
    for name, (_, _, source) in DATASETS.items():
        docs = training_side_documents(name)
        for hops in ((3, 4), (2,)):
            tasks, report = generate_chains(docs, args.n, args.seed, hops=hops, source=source)
            made |= {t.id: t for t in tasks if t.id not in made}
            print(f"{name}: {len(docs)} documents, hops {hops}: {len(tasks)} tasks")
        config = OfflineConfig(mix=(0, 2, 1), facts=False)
        tasks, _ = generate_offline(docs, args.offline, args.seed, source=source, config=config)
        made |= {t.id: t for t in tasks if t.id not in made}
        print(f"{name}: {len(tasks)} bridge/comparison tasks")
        config = OfflineConfig(mix=(1, 0, 0), facts=False)
        tasks, _ = generate_offline(docs, args.single, args.seed, source=source, config=config)
        made |= {t.id: t for t in tasks if t.id not in made}
        print(f"{name}: {len(tasks)} single tasks")
    save_tasks(args.out, list(made.values()))
    kinds = Counter(f"{t.model_extra['template']} {t.hops}" for t in made.values() if t.model_extra)
    print(f"{len(made)} tasks {dict(sorted(kinds.items()))} -> {args.out}")


if __name__ == "__main__":
    main()
