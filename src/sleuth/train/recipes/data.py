"""The recipe's data: one pooled corpus, one index, and task pools that never leak held-out ids.

The corpus pools the paragraphs of the staged HotpotQA, MuSiQue and 2Wiki samples (each a folder
under ``--data``). Questions are split by a salted hash of their id (:mod:`sleuth.tasks.split`):
the evaluation draws only held-out questions, the same number from each dataset; SFT and RL draw
only training-side ones (the three datasets plus the generator's tasks over training-side
paragraphs), SFT and RL disjoint.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from sleuth.corpus import Document
from sleuth.errors import IndexIncompleteError, InputError
from sleuth.index import Index
from sleuth.tasks import Task, load_tasks, read_2wiki, read_benchmark, read_hotpotqa, read_musique
from sleuth.tasks.split import split_tasks
from sleuth.train.recipes.config import RecipeConfig

SYNTHETIC = "synthetic"
"""The source name of the generated tasks in the recipe's pools (trained on, never evaluated)."""
GENERATED_TASKS = "data/tasks/qa_generated_tasks.jsonl"
"""Generated tasks (chains of 2-4 gold documents, bridges, comparisons) over the training-side
paragraphs of the staged samples (``benchmarks/chain_tasks.py``; ``Task.source`` names the sample
whose corpus holds them). They replace ``2wiki_offline_tasks.jsonl`` in every training use: that
file was made over the whole 2Wiki sample, held-out paragraphs included, and stays the demo's."""
STAGED: dict[str, tuple[Callable[[Any], Any], str, str]] = {
    "HotpotQA": (read_hotpotqa, "hotpotqa_distractor_dev", "hotpotqa"),
    "MuSiQue": (read_musique, "musique_ans_dev", "musique"),
    "2Wiki": (read_2wiki, "2wikimultihopqa_dev", "2wikimultihopqa"),
}
"""Dataset name -> (reader, its folder under the data folder, the ``Task.source`` it carries)."""


def generated_tasks() -> list[Task]:
    """The packaged generated QA tasks: all train (their documents are training-side only)."""
    return load_tasks(str(resources.files("sleuth").joinpath(GENERATED_TASKS)))


def load_combined(data: Path) -> tuple[list[Document], dict[str, list[Task]]]:
    """The three staged samples' paragraphs pooled, and their questions by dataset name.

    Raises:
        InputError: a dataset folder is missing under ``data``.
    """
    folders = [data / folder for _, folder, _ in STAGED.values()]
    for folder in folders:
        if not folder.is_dir():
            raise InputError(
                "missing; --data is the folder of the staged samples", source=str(folder)
            )
    docs, tasks = read_benchmark(folders)
    by_source = {source: name for name, (_, _, source) in STAGED.items()}
    return docs, {name: [t for t in tasks if by_source.get(t.source) == name] for name in STAGED}


def task_pools(
    by_source: dict[str, Sequence[Task]], config: RecipeConfig, seed: int
) -> dict[str, list[Task]]:
    """Held-out evaluation, SFT and RL task lists; only training-side ids reach SFT and RL.

    ``by_source`` maps a source name to its tasks; the synthetic source is never evaluated.
    The sizes are ``config``'s; the same arguments give the same pools, so a rerun resumes the
    same run.
    """
    pools: dict[str, list[Task]] = {"heldout": [], "sft": [], "rl": []}
    rest: list[Task] = []
    for name, tasks in sorted(by_source.items()):
        train, heldout = split_tasks(list(tasks))
        rng = random.Random(f"{seed}:{name}")
        rng.shuffle(train)
        rng.shuffle(heldout)
        if name != SYNTHETIC:
            pools["heldout"] += heldout[: config.heldout_per_dataset]
        pools["sft"] += train[: config.sft_per_source]
        rest += train[config.sft_per_source :]
    random.Random(seed).shuffle(rest)
    pools["rl"] = rest[: config.rl_pool]
    return pools


def open_index(path: Path, docs: Sequence[Document], embedder: str) -> Index:
    """The index of ``docs`` at ``path``: reused when built, resumed when interrupted.

    Raises:
        InputError: ``path`` holds an index of other documents.
    """
    try:
        index = Index.open(path)
    except (InputError, IndexIncompleteError):  # not built yet, or interrupted: (re)ingest
        Index.create(path, embedder=embedder).ingest(docs)
        index = Index.open(path)
    if set(index.documents) != {d.id for d in docs}:
        raise InputError("holds an index of other documents; use another --index", source=str(path))
    return index
