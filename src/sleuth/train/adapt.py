"""``sleuth adapt``: the learned selector fitted to one index's corpus, stored in the index.

1. The LLM-free generator (:func:`~sleuth.datagen.offline.generator.generate_offline`) makes
   verified tasks over the index's own documents (link tasks where documents have titles that
   name each other, one-hop fact tasks and two-hop relay tasks from any corpus).
2. They are split by question id (:func:`~sleuth.tasks.split.split_tasks`): the ranker trains on
   one side only (:func:`~sleuth.train.ranker.train_ranker`, with the shipped ranker's
   regularization and a linear selection head unless ``learner`` says otherwise: the shipped
   head is trees, but trained on generated tasks the linear head adapts better,
   docs/RESULTS.md). The shipped ranker's own training questions (MuSiQue/HotpotQA/2Wiki
   training sides) are not in the package, so they cannot be blended in; the adapted ranker
   learns from this corpus's generated tasks alone.
3. Single-pass, the shipped ranker and the adapted one run on the held-out side; the adapted
   ranker is stored as ``DIR/ranker.json`` (:mod:`sleuth.ranking.adapted`), which every search
   of the index then uses, only when its held-out Recall@5 is at least the shipped one's (or
   ``force``): a corpus where generated tasks teach the wrong lesson keeps the shipped ranker.

Resumable: the tasks, the trained candidate and each held-out run are kept under ``DIR/adapt/``,
keyed by the index's generation and the settings, so a rerun after an interruption redoes only
what is missing; ``ranker.json`` is replaced atomically.
"""

from __future__ import annotations

import dataclasses
import hashlib
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from sleuth.corpus.models import Document
from sleuth.errors import InputError
from sleuth.eval.aggregate import bootstrap_interval, mean_defined, paired_bootstrap_difference
from sleuth.harness.run import run_query
from sleuth.harness.trajectory import load_trajectory
from sleuth.index.store import Index
from sleuth.io import append_jsonl, atomic_write_text, folder_lock, read_jsonl
from sleuth.metrics import compute_metrics
from sleuth.policies.spec import BuiltPolicy, PolicyOptions, build_policy
from sleuth.ranking.adapted import SHIPPED, adapted_path
from sleuth.ranking.model import LEARNERS, RankerModel, load_ranker
from sleuth.tasks.schema import Task, load_tasks, save_tasks
from sleuth.tasks.split import split_tasks
from sleuth.tools.toolbox import Toolbox
from sleuth.train.ranker import RankerTrainConfig, train_ranker

Progress = Callable[[str, int, int], None]
"""(phase, done, total)."""
WORK = "adapt"
"""The resumable work folder inside the index."""
POLICIES = ("single-pass", "shipped", "adapted")
"""The held-out comparison's rows."""
METRIC_KEYS = ("recall_at_2", "recall_at_5", "final_answer_found")
ADAPT_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class AdaptConfig:
    """Settings of ``sleuth adapt``."""

    tasks: int = 200
    """Tasks to generate; half train the ranker, half are held out to measure it."""
    seed: int = 0
    """Fixes the generated tasks."""
    force: bool = False
    """Store the adapted ranker even when it does worse than the shipped one on held-out tasks."""
    learner: str | None = None
    """The adapted selection head's learner, ``linear`` or ``gbdt``; None: ``RankerTrainConfig``'s
    (linear). Not the shipped head's (trees): trained on one corpus's generated tasks, the trees
    lost R@2 to the shipped ranker on the Enron dev set and the linear head did not
    (docs/RESULTS.md, "Adapting the selector to a corpus")."""

    tasks_needed: ClassVar[int] = 4
    """Fewest tasks that leave both sides of the split non-empty, as a rule."""

    def __post_init__(self) -> None:
        if self.tasks < self.tasks_needed:
            raise InputError(
                f"--tasks ({self.tasks}) must be at least {self.tasks_needed} (half are held out)"
            )
        if self.learner is not None and self.learner not in LEARNERS:
            raise InputError(f"--learner {self.learner!r} is not one of {', '.join(LEARNERS)}")

    def settings(self) -> RankerTrainConfig:
        """The learner settings the adapted ranker is trained with: the shipped ranker's
        regularization and refit passes, and ``learner``."""
        shipped = shipped_settings()
        return (
            shipped if self.learner is None else dataclasses.replace(shipped, learner=self.learner)
        )


class PolicyScore(BaseModel):
    """One held-out row: means, 95% bootstrap intervals and the paired difference to
    single-pass (``[diff, low, high]``) of each metric."""

    mean: dict[str, float | None]
    interval: dict[str, list[float]] = Field(default_factory=dict)
    delta: dict[str, list[float]] = Field(default_factory=dict)


class AdaptReport(BaseModel):
    """What ``sleuth adapt`` did: ``DIR/adapt/report.json`` and the adapted ranker's provenance."""

    schema_version: int = ADAPT_SCHEMA_VERSION
    index: str
    generated: int
    tasks_file: str
    """The generated tasks (``DIR/adapt/tasks-*.jsonl``); :func:`~sleuth.tasks.split.split_tasks`
    gives the two sides."""
    train_tasks: int
    heldout_tasks: int
    shortfall: str | None = None
    learner: str = "linear"
    """The adapted selection head's learner (reports before it was recorded: linear)."""
    heldout: dict[str, PolicyScore]
    installed: bool
    ranker: str | None
    """The stored ranker file, None when the shipped ranker stays."""
    trained_on: str = (
        "tasks generated over this index's corpus only (LLM-free generator), training side of a "
        "split by question id; no hand-written question"
    )


def adapt_index(
    index: Index, config: AdaptConfig | None = None, progress: Progress | None = None
) -> AdaptReport:
    """Generate tasks over ``index``, train the ranker on half, measure it on the other half
    against single-pass and the shipped ranker, and store it in the index when it is no worse.

    Raises:
        InputError: the corpus gives too few tasks, or they hold no gold/non-gold contrast.
        BusyError: another process is writing the index.
    """
    config = config or AdaptConfig()
    with folder_lock(index.path, "this index"):
        work = index.path / WORK
        key = f"g{index.manifest.generation}-n{config.tasks}-s{config.seed}"
        _drop_stale(work, key)
        tasks_file = work / f"tasks-{key}.jsonl"
        tasks, shortfall = _tasks(index, tasks_file, config)
        train, heldout = split_tasks(tasks)
        if not train or not heldout:
            raise InputError(f"the {len(tasks)} generated tasks all fell on one side of the split")
        toolbox = Toolbox(index)
        settings = config.settings()
        model = _candidate(
            toolbox, train, settings, work / f"ranker-{key}-{settings.learner}.json", progress
        )
        heldout_file = work / f"heldout-{key}.jsonl"
        records = _heldout_records(
            toolbox, heldout, model, heldout_file, settings.learner, progress
        )
        scores = _scores(records, heldout)
        better = _r5(scores["adapted"]) >= _r5(scores["shipped"])
        installed = better or config.force
        report = AdaptReport(
            index=str(index.path),
            generated=len(tasks),
            tasks_file=str(tasks_file),
            train_tasks=len(train),
            heldout_tasks=len(heldout),
            shortfall=shortfall,
            learner=settings.learner,
            heldout=scores,
            installed=installed,
            ranker=str(adapted_path(index.path)) if installed else None,
        )
        if installed:
            trained_on = {**model.trained_on, "adapted": report.model_dump(mode="json")}
            model.model_copy(update={"trained_on": trained_on}).save(adapted_path(index.path))
        atomic_write_text(work / "report.json", report.model_dump_json(indent=1))
        return report


def _drop_stale(work: Path, key: str) -> None:
    """Work files of other settings or an older generation of the index (an ingest since); a
    candidate of another learner is kept (``ranker-KEY-LEARNER.json``)."""
    for path in work.glob("*-g*-n*-s*.*"):
        rest = path.name.split(".")[0].partition("-")[2]
        if rest != key and not rest.startswith(f"{key}-"):
            path.unlink(missing_ok=True)


def _r5(score: PolicyScore) -> float:
    return score.mean.get("recall_at_5") or 0.0


def index_documents(index: Index) -> list[Document]:
    """The index's documents rebuilt from its chunks (text, title), as the generator reads them."""
    from sleuth.datagen.docs import DocStore

    store = DocStore(index)
    return [Document(id=d, text=store.text(d), title=store.title(d) or None) for d in store.doc_ids]


def _tasks(index: Index, path: Path, config: AdaptConfig) -> tuple[list[Task], str | None]:
    """The generated tasks (read back when an earlier run made them) and why fewer were made."""
    if path.is_file():
        return load_tasks(path), None
    from sleuth.datagen.offline.generator import generate_offline

    docs = index_documents(index)
    tasks, quality = generate_offline(docs, config.tasks, seed=config.seed, source=index.path.name)
    if len(tasks) < AdaptConfig.tasks_needed:
        raise InputError(
            f"adaptation needs at least {AdaptConfig.tasks_needed} generated tasks: "
            f"{quality.shortfall or 'made none'}"
        )
    save_tasks(path, tasks)
    return tasks, quality.shortfall


def shipped_settings() -> RankerTrainConfig:
    """The settings the shipped ranker was trained with (those this version knows), but the
    default learner (``AdaptConfig.learner`` says why): the shipped file's kind of head is in
    ``trained_on["learner"]``, outside its ``config``, and is not read here."""
    stored = load_ranker(None).trained_on.get("config", {})
    known = {f.name for f in dataclasses.fields(RankerTrainConfig)} - {"learner"}
    return RankerTrainConfig(**{k: v for k, v in stored.items() if k in known})


def _candidate(
    toolbox: Toolbox,
    train: Sequence[Task],
    settings: RankerTrainConfig,
    path: Path,
    progress: Progress | None,
) -> RankerModel:
    """The ranker trained on ``train`` (read back when an earlier run trained it)."""
    if path.is_file():
        return load_ranker(path)
    model = train_ranker([(toolbox, list(train))], settings, progress)
    model.save(path)
    return model


def _built(policy: str, model: RankerModel) -> BuiltPolicy:
    if policy == "single-pass":
        return build_policy("single-pass")
    ranker: str | RankerModel = SHIPPED if policy == "shipped" else model
    return build_policy("heuristic", PolicyOptions(ranker=ranker))


def _heldout_records(
    toolbox: Toolbox,
    heldout: Sequence[Task],
    model: RankerModel,
    path: Path,
    learner: str,
    progress: Progress | None,
) -> dict[tuple[str, str], dict[str, Any]]:
    """(policy, task id) → metrics of each held-out run; runs already in ``path`` are kept.

    Rows are stored as ``adapted-LEARNER`` and ``shipped-FINGERPRINT``: candidates of both
    learners share the single-pass and shipped runs, and a shipped ranker that changed since
    (a new version of the package) is run again rather than compared from a stale run."""
    stored = {
        "single-pass": "single-pass",
        "shipped": f"shipped-{ranker_fingerprint(load_ranker(None))}",
        "adapted": f"adapted-{learner}",
    }
    done = (
        {(r["policy"], r["task_id"]): r["metrics"] for r in read_jsonl(path)}
        if path.is_file()
        else {}
    )
    total = len(POLICIES) * len(heldout)
    count = sum(1 for p in POLICIES for t in heldout if (stored[p], t.id) in done)
    with tempfile.TemporaryDirectory() as tmp:
        for policy in POLICIES:
            tools, factory = _built(policy, model).for_tools(toolbox)
            for task in heldout:
                if (stored[policy], task.id) in done:
                    continue
                trajectory = Path(tmp) / f"{policy}.jsonl"
                run_query(tools, task.query, policy=factory(0), trajectory=trajectory)
                metrics = compute_metrics(load_trajectory(trajectory).summary(), task)
                kept = {k: getattr(metrics, k) for k in METRIC_KEYS}
                append_jsonl(path, {"policy": stored[policy], "task_id": task.id, "metrics": kept})
                done[(stored[policy], task.id)] = kept
                count += 1
                if progress:
                    progress(f"held-out {policy}", count, total)
    return {(p, t.id): done[(stored[p], t.id)] for p in POLICIES for t in heldout}


def ranker_fingerprint(model: RankerModel) -> str:
    """A short hash of the model's contents: the key its held-out runs are kept under."""
    return hashlib.sha256(model.model_dump_json().encode("utf-8")).hexdigest()[:12]


def _scores(
    records: dict[tuple[str, str], dict[str, Any]], heldout: Sequence[Task]
) -> dict[str, PolicyScore]:
    """Each policy's means and intervals over the held-out tasks, and its paired difference to
    single-pass."""
    values = {
        p: {k: [float(records[(p, t.id)][k]) for t in heldout] for k in METRIC_KEYS}
        for p in POLICIES
    }
    scores = {}
    for policy, by_key in values.items():
        score = PolicyScore(mean={k: mean_defined(v) for k, v in by_key.items()})
        score.interval = {k: list(bootstrap_interval(v)) for k, v in by_key.items()}
        if policy != "single-pass":
            for k, v in by_key.items():
                diff, (low, high) = paired_bootstrap_difference(v, values["single-pass"][k])
                score.delta[k] = [diff, low, high]
        scores[policy] = score
    return scores
