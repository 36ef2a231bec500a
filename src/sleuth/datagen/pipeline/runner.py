"""What every stage shares: settings, the run context, and the resumable loop over records."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field

from rich.progress import Progress

from sleuth.datagen.pipeline.domains import Domain
from sleuth.datagen.pipeline.llm import LLM, CacheMissError
from sleuth.datagen.pipeline.records import RecordStore, Status, TaskRecord
from sleuth.datagen.pipeline.workspace import Session, Workspace
from sleuth.errors import ConfigError

LLM_GENERATOR = "llm-pipeline"
"""``Task.generator`` of tasks made by these stages (the offline generator has its own)."""


@dataclass(frozen=True)
class DatagenConfig:
    """Settings of the LLM pipeline; defaults follow the public pipeline where it has one.
    Checked when built (a :class:`ConfigError` names the setting to fix)."""

    seed: int = 0
    """Fixes seeds, truth types and every random tool; with a recorded cache, the whole run."""
    max_turns: int = 16
    """Agent turns per explore/extend/distract loop before the forced submit (report: 10-15
    tool calls)."""
    target_hops: int = 1
    """Hops per task; extend adds hops until each record has this many (difficulty label)."""
    extract_attempts: int = 2
    """Extraction draws per supporting document while its quotes fail the string check."""
    max_distractors: int = 10
    """Distractors kept per hop (report: 10 per web task)."""
    min_distractors: int = 1
    """Fewer distractors than this for a hop fails the distract stage."""
    clue_candidates: int = 10
    """Top index hits per clue considered as distractor candidates."""
    llm_distractors: bool = True
    """Also ask an agent to propose distractors (on top of index candidates)."""
    judge_distractors: bool = True
    """Ask the LLM whether a candidate gives the answer away, after the string check passed."""
    expand_candidates: int = 20
    """Hybrid-search hits per quote examined for gold-equivalent chunks."""
    judge_equivalents: bool = True
    """Let the LLM confirm near-duplicate chunks that do not contain the quote verbatim."""
    max_attempts: int = 3
    """Runs of a stage on one record before an error becomes a failure (caps the cost of a
    record that keeps crashing)."""
    workers: int = 1
    """Records processed concurrently within a stage (LLM calls are I/O bound)."""
    progress: bool = True
    """Show a rich progress bar per stage."""

    def __post_init__(self) -> None:
        for name in (
            "max_turns",
            "target_hops",
            "extract_attempts",
            "clue_candidates",
            "expand_candidates",
            "max_attempts",
            "workers",
        ):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} ({getattr(self, name)}) must be at least 1")
        if not 0 <= self.min_distractors <= self.max_distractors:
            raise ConfigError(
                f"need 0 <= min_distractors ({self.min_distractors}) <= max_distractors "
                f"({self.max_distractors}); lower min_distractors or raise max_distractors"
            )


@dataclass
class Pipeline:
    """One run: the record store, the corpus, the model, the domain and the settings."""

    store: RecordStore
    ws: Workspace
    llm: LLM
    domain: Domain
    config: DatagenConfig = field(default_factory=DatagenConfig)
    source: str = "corpus"
    """``Task.source``: the corpus the tasks come from."""

    def rng(self, record_id: str, stage: str) -> random.Random:
        """A generator fixed by (seed, record, stage), so reruns draw the same numbers."""
        return random.Random(f"{self.config.seed}:{record_id}:{stage}")

    def session(self, record: TaskRecord, stage: str, scoped: bool = True) -> Session:
        scope = self.domain.scope_docs(self.ws.docs, record.seed.scope) if scoped else None
        return Session(self.ws, self.rng(record.id, stage), scope=scope)


Outcome = tuple[Status, str]
Process = Callable[[Pipeline, TaskRecord], Outcome]


def run_stage(
    pipeline: Pipeline, stage: str, process: Process, limit: int | None = None
) -> Counter[str]:
    """Apply ``process`` to every record ready for ``stage`` and save each one when done.

    A record's status is set from the outcome; an exception marks it ``error`` (retried on the
    next run, up to ``max_attempts`` runs) and the stage goes on. A cache miss in replay mode and
    an interrupt (Ctrl-C) stop the stage; the records finished before are already saved.

    Returns:
        Count of records per resulting status.
    """
    records = pipeline.store.ready(stage)[:limit]
    counts: Counter[str] = Counter()

    def one(record: TaskRecord) -> Status:
        done = record.attempts.get(stage, 0)
        if done >= pipeline.config.max_attempts:
            last = record.stages[stage].reason
            status, reason = Status.FAILED, f"error_limit: {done} attempts, last: {last}"
        else:
            record.attempts[stage] = done + 1
            status, reason = _attempt(pipeline, process, record)
        record.mark(stage, status, reason)
        pipeline.store.save(record)
        return status

    with _bar(pipeline.config.progress, stage, len(records)) as advance:
        if pipeline.config.workers <= 1:
            for record in records:
                counts[one(record)] += 1
                advance()
        else:
            with ThreadPoolExecutor(pipeline.config.workers) as pool:
                for status in pool.map(one, records):
                    counts[status] += 1
                    advance()
    return counts


def _attempt(pipeline: Pipeline, process: Process, record: TaskRecord) -> Outcome:
    try:
        return process(pipeline, record)
    except CacheMissError:
        raise
    except Exception as e:  # any accident is recorded and retried on the next run
        return Status.ERROR, f"{type(e).__name__}: {e}"


@contextmanager
def _bar(enabled: bool, stage: str, total: int) -> Iterator[Callable[[], None]]:
    """A rich progress bar for one stage (a no-op when progress is off)."""
    if not enabled:
        yield lambda: None
        return
    with Progress() as progress:
        task = progress.add_task(f"datagen {stage}", total=total)
        yield lambda: progress.advance(task)
