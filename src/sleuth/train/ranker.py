"""``sleuth train ranker``: fit the learned ranker from task files over an index.

The data are the agent's own trajectories, run through the real harness and tools on the
training tasks, so the selector learns from the situations it will meet:

1. Run the scripted agent without a ranker (RRF order, no pruning) on every task. Every search
   it made becomes search-head data: the query's 50 fused candidates, labelled gold when their
   document is one of the task's gold documents. Every document the run saw becomes
   selection-head data, labelled the same way.
2. With both heads fitted, run the agent again (now reranking its searches with the search head,
   still without pruning) and refit the selection head on what that run saw, since the search
   head changes which documents a run meets and at which ranks.

Only the tasks passed in are used, and their ids are stored in the model, so an evaluation can
check that it never scores a question the ranker trained on.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sleuth.corpus.models import doc_id_of
from sleuth.errors import InputError
from sleuth.eval.heuristic import HeuristicAgent, trail
from sleuth.eval.transcript import observations
from sleuth.harness.loop import Harness
from sleuth.policies.scripted import ScriptedPolicy
from sleuth.ranking.features import SEARCH_COLUMNS, SELECTION_COLUMNS, search_features
from sleuth.ranking.model import RankerModel, fit_head
from sleuth.ranking.selector import Selector, document_title, seen_features
from sleuth.tasks.schema import Task
from sleuth.tools.toolbox import Toolbox

Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class RankerTrainConfig:
    """Settings of ``sleuth train ranker``."""

    regularization: float = 1.0
    """Inverse L2 strength ``C`` of the logistic regressions."""
    refit_passes: int = 1
    """Extra agent passes that refit the selection head with the search head in use."""

    def __post_init__(self) -> None:
        if not self.regularization > 0:
            raise InputError(f"regularization ({self.regularization}) must be positive")
        if self.refit_passes < 0:
            raise InputError(f"refit_passes ({self.refit_passes}) must be 0 or more")


@dataclass
class _Examples:
    features: list[np.ndarray]
    labels: list[np.ndarray]

    def add(self, x: np.ndarray, gold: Sequence[bool]) -> None:
        if len(x):
            self.features.append(x)
            self.labels.append(np.asarray(gold, dtype=np.int64))

    def stacked(self) -> tuple[np.ndarray, np.ndarray]:
        return np.concatenate(self.features), np.concatenate(self.labels)


def train_ranker(
    toolbox: Toolbox,
    tasks: Sequence[Task],
    config: RankerTrainConfig | None = None,
    progress: Progress | None = None,
) -> RankerModel:
    """Fit both heads on ``tasks`` (every task needs gold documents)."""
    config = config or RankerTrainConfig()
    tasks = [t for t in tasks if t.gold_doc_ids]
    if not tasks:
        raise InputError("no training task has gold documents")
    plain = Toolbox(toolbox.index, toolbox.config, counter=toolbox.counter)
    search, selection = _collect(plain, tasks, None, "pass 1", progress)
    model = RankerModel(
        search=fit_head(*search.stacked(), SEARCH_COLUMNS, config.regularization),
        selection=fit_head(*selection.stacked(), SELECTION_COLUMNS, config.regularization),
    )
    ranked = Toolbox(toolbox.index, toolbox.config, counter=toolbox.counter, ranker=model)
    for n in range(config.refit_passes):
        _, selection = _collect(ranked, tasks, model, f"pass {n + 2}", progress)
        refit = fit_head(*selection.stacked(), SELECTION_COLUMNS, config.regularization)
        model = model.model_copy(update={"selection": refit})
        ranked.ranker = model
    counts = {"tasks": len(tasks), "search_examples": int(sum(len(y) for y in search.labels))}
    counts["selection_examples"] = int(sum(len(y) for y in selection.labels))
    return model.model_copy(
        update={
            "trained_on": {"config": config.__dict__, **counts},
            "question_ids": sorted(t.id for t in tasks),
        }
    )


def _collect(
    toolbox: Toolbox,
    tasks: Sequence[Task],
    model: RankerModel | None,
    label: str,
    progress: Progress | None,
) -> tuple[_Examples, _Examples]:
    search, selection = _Examples([], []), _Examples([], [])
    selector = Selector(toolbox.index, model) if model else None
    with tempfile.TemporaryDirectory() as tmp:
        for i, task in enumerate(tasks):
            gold = set(task.gold_doc_ids)
            agent = HeuristicAgent(selector=selector, prune_below=0.0)
            policy = ScriptedPolicy(agent)
            Harness(toolbox, policy).run(task.query, Path(tmp) / "run.jsonl")
            seen = observations(policy.requests[-1])
            docs, searches = trail(seen, lambda doc: document_title(toolbox.index, doc))
            for s in searches:
                cands = toolbox.candidates(s.query)
                x = search_features(s.query, cands, toolbox.config.rrf_k)
                search.add(x, [doc_id_of(c.chunk_id) in gold for c in cands])
            x = seen_features(toolbox.index, task.query, docs, searches)
            selection.add(x, [d.doc_id in gold for d in docs])
            if progress:
                progress(label, i + 1, len(tasks))
    return search, selection
