"""The LLM task pipeline end to end: open a run, run one stage or all, export tasks and a report.

A run directory holds ``records/`` (one JSON per task record), ``transcripts/`` (agent
conversations), ``ledger.json`` (tokens and cost per stage), and after :func:`run_pipeline`
``tasks.jsonl`` plus ``quality.json`` / ``quality.md``. The LLM cache may live anywhere (a shared
cache lets a second run replay the first).

Example::

    pipeline = open_pipeline("runs/web", "indexes/wiki", LLMConfig("qwen3", base_url=URL,
                             cache_dir=Path("runs/llm-cache")), domain="web")
    summary = run_pipeline(pipeline, n=50)
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from pydantic import BaseModel

from sleuth.datagen.pipeline.distract import distract
from sleuth.datagen.pipeline.domains import get_domain
from sleuth.datagen.pipeline.expand import expand
from sleuth.datagen.pipeline.explore import explore, seed_records
from sleuth.datagen.pipeline.extend import extend
from sleuth.datagen.pipeline.extract import verify
from sleuth.datagen.pipeline.llm import ChatLLM, LLMConfig
from sleuth.datagen.pipeline.records import STAGES, RecordStore, Status
from sleuth.datagen.pipeline.runner import (
    LLM_GENERATOR,
    DatagenConfig,
    Pipeline,
    Process,
    run_stage,
)
from sleuth.datagen.pipeline.workspace import Workspace
from sleuth.datagen.quality import QualityReport, StageTally, build_report, render_markdown
from sleuth.errors import InputError
from sleuth.index import Index
from sleuth.io import atomic_write_text
from sleuth.tasks import Task, save_tasks

PROCESSES: dict[str, Process] = {
    "explore": explore,
    "verify": verify,
    "distract": distract,
    "extend": extend,
    "expand": expand,
}


class PipelineSummary(BaseModel):
    """What :func:`run_pipeline` did: statuses per stage and where the outputs are."""

    stages: dict[str, dict[str, int]]
    tasks: int
    tasks_path: str
    report_path: str


def open_pipeline(
    run_dir: str | Path,
    index_dir: str | Path,
    llm_config: LLMConfig,
    *,
    domain: str = "web",
    config: DatagenConfig | None = None,
    source: str | None = None,
) -> Pipeline:
    """Open (or start) a run over an existing index; ``source`` defaults to the index folder name.

    Raises:
        InputError: the index is missing or unreadable, or the domain is unknown.
    """
    index = Index.open(index_dir)
    return Pipeline(
        store=RecordStore(run_dir),
        ws=Workspace.open(index),
        llm=ChatLLM(llm_config, Path(run_dir)),
        domain=get_domain(domain),
        config=config or DatagenConfig(),
        source=source or Path(index_dir).name,
    )


def run_named_stage(
    pipeline: Pipeline, stage: str, *, n: int | None = None, limit: int | None = None
) -> Counter[str]:
    """One stage over the records ready for it (``explore`` first seeds ``n`` records).

    Returns:
        Count of records per resulting status.
    """
    if stage not in PROCESSES:
        raise InputError(f"unknown stage {stage!r}; choose one of {', '.join(PROCESSES)}")
    if stage == "explore" and n:
        seed_records(pipeline, n)
    return run_stage(pipeline, stage, PROCESSES[stage], limit)


def run_pipeline(pipeline: Pipeline, n: int, out: str | Path | None = None) -> PipelineSummary:
    """Seed ``n`` records, run every stage in order, export passed tasks and the quality report.

    Rerunning resumes: finished records are skipped, errored ones retried.
    """
    seed_records(pipeline, n)
    stages = {s: dict(run_stage(pipeline, s, PROCESSES[s])) for s in STAGES}
    tasks_path = Path(out) if out else pipeline.store.root / "tasks.jsonl"
    tasks = export_tasks(pipeline.store, tasks_path)
    report_path = write_datagen_report(pipeline, tasks)
    return PipelineSummary(
        stages=stages, tasks=len(tasks), tasks_path=str(tasks_path), report_path=str(report_path)
    )


def export_tasks(store: RecordStore, path: str | Path) -> list[Task]:
    """Write the tasks of every record whose last stage passed, as JSONL (atomically)."""
    tasks = [r.task for r in store if r.status(STAGES[-1]) == Status.PASSED and r.task]
    save_tasks(path, tasks)
    return tasks


def pipeline_report(pipeline: Pipeline, tasks: list[Task]) -> QualityReport:
    """Pass rates and failure reasons per stage, leakage, answer-in-distractor, hop histogram."""
    tallies = {s: StageTally(s) for s in STAGES}
    rejected = 0
    for record in pipeline.store:
        rejected += sum(
            1 for h in record.hops for r in h.rejected_distractors.values() if "contains" in r
        )
        for stage in STAGES:
            state = record.stages[stage]
            if state.status != Status.PENDING:
                tallies[stage].record(_reasons(state.status, state.reason))
    distractors = {d for t in tasks for d in t.distractor_doc_ids}
    return build_report(
        tasks,
        list(tallies.values()),
        {d: pipeline.ws.docs.text(d) for d in distractors},
        generator=LLM_GENERATOR,
        source=pipeline.source,
        seed=pipeline.config.seed,
        distractors_rejected=rejected,
    )


def write_datagen_report(pipeline: Pipeline, tasks: list[Task]) -> Path:
    """``quality.json`` and ``quality.md`` in the run directory; returns the Markdown path."""
    report = pipeline_report(pipeline, tasks)
    root = pipeline.store.root
    atomic_write_text(root / "quality.json", report.model_dump_json(indent=2))
    atomic_write_text(root / "quality.md", render_markdown(report))
    return root / "quality.md"


def _reasons(status: Status, reason: str) -> list[str]:
    if status == Status.PASSED:
        return []
    if status == Status.ERROR:
        return [f"error: {reason}"]
    return [part for part in reason.split("; ") if part] or ["failed"]
