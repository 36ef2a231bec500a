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

The selection head is linear (logistic regression) or gradient-boosted trees (``learner="gbdt"``:
LambdaRank, one group per question, :mod:`sleuth.ranking.trees`); the search head is linear.

Only the tasks passed in are used, and their ids are stored in the model, so an evaluation can
check that it never scores a question the ranker trained on.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from sleuth.corpus.models import doc_id_of
from sleuth.errors import InputError
from sleuth.harness.loop import Harness
from sleuth.policies.heuristic import trail
from sleuth.policies.scripted import ScriptedPolicy
from sleuth.policies.spec import PolicyOptions, build_policy
from sleuth.policies.transcript import observations
from sleuth.ranking.features import (
    SEARCH_COLUMNS,
    SELECTION_COLUMNS,
    Search,
    SeenDoc,
    search_features,
)
from sleuth.ranking.model import LEARNERS, LinearHead, RankerModel, fit_head
from sleuth.ranking.selector import document_title, seen_features
from sleuth.ranking.trees import TreeHead, fit_trees
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
    learner: str = "linear"
    """The selection head: ``linear`` (logistic regression; ``sleuth adapt``'s, which measured it
    ahead of the trees when trained on one corpus's generated tasks) or ``gbdt`` (LambdaRank trees:
    the shipped ranker's, trained on 270 QA questions; ahead of linear on the HotpotQA and 2Wiki
    dev rows). Both in docs/RESULTS.md."""

    def __post_init__(self) -> None:
        if self.learner not in LEARNERS:
            raise InputError(f"learner {self.learner!r} is not one of {', '.join(LEARNERS)}")
        if not self.regularization > 0:
            raise InputError(f"regularization ({self.regularization}) must be positive")
        if self.refit_passes < 0:
            raise InputError(f"refit_passes ({self.refit_passes}) must be 0 or more")


@dataclass
class Examples:
    """Feature rows and gold labels, one block per group (a search call, or a question); for
    selection examples also each group's trail (question, seen documents, searches), from which a
    benchmark recomputes features without rerunning the agent."""

    features: list[np.ndarray]
    labels: list[np.ndarray]
    trails: list[tuple[str, list[SeenDoc], list[Search]]] = field(default_factory=list)

    def add(self, x: np.ndarray, gold: Sequence[bool]) -> None:
        if len(x):
            self.features.append(x)
            self.labels.append(np.asarray(gold, dtype=np.int64))

    def stacked(self) -> tuple[np.ndarray, np.ndarray]:
        return np.concatenate(self.features), np.concatenate(self.labels)

    def groups(self) -> list[int]:
        return [len(y) for y in self.labels]


def fit_selection(
    examples: Examples,
    config: RankerTrainConfig,
    columns: Sequence[str] = SELECTION_COLUMNS,
) -> LinearHead | TreeHead:
    """The selection head on ``columns`` (picked by name) of the examples, by ``config.learner``."""
    x, y = examples.stacked()
    x = x[:, [SELECTION_COLUMNS.index(c) for c in columns]]
    if config.learner == "gbdt":
        return fit_trees(x, y, examples.groups(), columns)
    return fit_head(x, y, columns, config.regularization)


Source = tuple[Toolbox, Sequence[Task]]
"""Tasks and the tools over the corpus they are asked of (one pooled index per dataset)."""


def train_ranker(
    sources: Sequence[Source],
    config: RankerTrainConfig | None = None,
    progress: Progress | None = None,
) -> RankerModel:
    """Fit both heads on every source's tasks (tasks without gold documents are skipped)."""
    config = config or RankerTrainConfig()
    sources = [(tb, [t for t in tasks if t.gold_doc_ids]) for tb, tasks in sources]
    tasks = [t for _, ts in sources for t in ts]
    if not tasks:
        raise InputError("no training task has gold documents")
    if len({t.id for t in tasks}) != len(tasks):
        raise InputError("training task ids must be unique")
    search, selection = collect_examples(sources, None, "pass 1", progress)
    model = RankerModel(
        search=fit_head(*search.stacked(), SEARCH_COLUMNS, config.regularization),
        selection=fit_selection(selection, config),
    )
    for n in range(config.refit_passes):
        _, selection = collect_examples(sources, model, f"pass {n + 2}", progress)
        model = model.model_copy(update={"selection": fit_selection(selection, config)})
    counts = {"tasks": len(tasks), "search_examples": int(sum(len(y) for y in search.labels))}
    counts["selection_examples"] = int(sum(len(y) for y in selection.labels))
    return model.model_copy(
        update={
            "trained_on": {"config": config.__dict__, **counts},
            "question_ids": sorted(t.id for t in tasks),
        }
    )


def collect_examples(
    sources: Sequence[Source], model: RankerModel | None, label: str, progress: Progress | None
) -> tuple[Examples, Examples]:
    """Search and selection examples from every source's tasks (skipping tasks without gold);
    the agent reranks its searches when ``model`` is given."""
    sources = [(tb, [t for t in tasks if t.gold_doc_ids]) for tb, tasks in sources]
    search, selection = Examples([], []), Examples([], [])
    total, done = sum(len(ts) for _, ts in sources), 0
    for toolbox, tasks in sources:
        tools = toolbox.with_ranker(None)
        for task in tasks:
            _collect(tools, task, model, search, selection)
            done += 1
            if progress:
                progress(label, done, total)
    return search, selection


def _collect(
    toolbox: Toolbox,
    task: Task,
    model: RankerModel | None,
    search: Examples,
    selection: Examples,
) -> None:
    """Run the agent on one task and add what it searched and saw, labelled by gold."""
    gold = set(task.gold_doc_ids)
    # No pruning while collecting: every document a run meets becomes an example.
    options = PolicyOptions(agent={"prune_below": 0.0}, ranker=model)
    built = build_policy("heuristic" if model else "heuristic-plain", options)
    tools, factory = built.for_tools(toolbox)
    policy = factory(0)
    assert isinstance(policy, ScriptedPolicy)  # the heuristic agent: it keeps its requests
    with tempfile.TemporaryDirectory() as tmp:
        Harness(tools, policy).run(task.query, Path(tmp) / "run.jsonl")
    seen = observations(policy.requests[-1])
    docs, searches = trail(seen, lambda doc: document_title(toolbox.index, doc))
    for s in searches:
        cands = toolbox.candidates(s.query)
        x = search_features(s.query, cands, toolbox.config.rrf_k)
        search.add(x, [doc_id_of(c.chunk_id) in gold for c in cands])
    x = seen_features(toolbox.index, task.query, docs, searches)
    selection.add(x, [d.doc_id in gold for d in docs])
    if len(x):
        selection.trails.append((task.query, docs, searches))
