"""Quality report of a generation run: what each stage rejected and why, and checks on the output.

The report is a pydantic model (saved as JSON) with a Markdown rendering. Stage tallies count
candidates, not tasks: a run that tried 900 candidates to keep 250 tasks says so.

Leakage numbers come from fields a generator attaches to each task (the offline generator does):
``bm25_top1_gold`` (a gold document is the top BM25 hit for the full query), ``bm25_answer_rank``
(rank of the answer's own document) and ``bm25_gold_ranks`` (rank of each gold document, None
below the depth searched). Tasks without them count as unknown, not as clean.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel, Field, computed_field

from sleuth.datagen.evidence import answer_in_text, reason_code
from sleuth.tasks import Task

K = TypeVar("K", int, str)


class StageReport(BaseModel):
    """How many candidates a stage saw, passed, and the failure codes of the rest."""

    name: str
    attempted: int
    passed: int
    reasons: dict[str, int] = Field(default_factory=dict)
    """Failure code → number of candidates failing with it (one candidate may have several)."""

    @computed_field  # type: ignore[prop-decorator]  # pydantic's documented spelling
    @property
    def pass_rate(self) -> float:
        return self.passed / self.attempted if self.attempted else 0.0


@dataclass
class StageTally:
    """Mutable counter a generator fills while it runs; :meth:`report` freezes it."""

    name: str
    attempted: int = 0
    passed: int = 0
    reasons: Counter[str] = field(default_factory=Counter)

    def record(self, reasons: Sequence[str]) -> bool:
        """Count one candidate; ``reasons`` empty means it passed. Returns whether it passed."""
        self.attempted += 1
        if not reasons:
            self.passed += 1
        self.reasons.update({reason_code(r) for r in reasons})
        return not reasons

    def report(self) -> StageReport:
        reasons = dict(sorted(self.reasons.items(), key=lambda kv: (-kv[1], kv[0])))
        return StageReport(
            name=self.name, attempted=self.attempted, passed=self.passed, reasons=reasons
        )


class SliceStats(BaseModel):
    """Retrieval difficulty of a group of tasks (all, one hop count, one template)."""

    tasks: int
    leakage_rate: float | None
    """Share whose top BM25 hit for the full query is a gold document: too easy, flagged."""
    answer_leakage_rate: float | None
    """Share whose answer's own document is the top hit. A bridge whose first hop is found at
    once is as designed; one whose answer is found at once skipped its hop."""
    one_search_rate: float | None
    """Share whose every gold document is among the top BM25 hits: one search finds them all."""


class QualityReport(BaseModel):
    """The numbers a reviewer checks before trusting a generated task set."""

    generator: str
    source: str
    seed: int
    tasks: int
    stages: list[StageReport]
    hop_histogram: dict[int, int]
    overall: SliceStats
    by_hops: dict[int, SliceStats]
    by_template: dict[str, SliceStats]
    answer_in_distractor_rate: float
    """Share of distractor documents that contain the answer or an alias; must be 0."""
    distractors_per_task: float
    distractors_rejected: int = 0
    """Distractor candidates dropped because they contain the answer or an alias."""
    shortfall: str | None = None
    """Why fewer tasks than asked were made and what to change; None when all were made."""


def build_report(
    tasks: Sequence[Task],
    stages: Sequence[StageTally],
    documents: Mapping[str, str],
    *,
    generator: str,
    source: str,
    seed: int,
    distractors_rejected: int = 0,
) -> QualityReport:
    """Summarise a run; answer-in-distractor is recomputed from ``documents`` (id → text)."""
    pairs = [(t, d) for t in tasks for d in t.distractor_doc_ids]
    dirty = sum(answer_in_text(t.answer, t.answer_aliases, documents.get(d, "")) for t, d in pairs)
    return QualityReport(
        generator=generator,
        source=source,
        seed=seed,
        tasks=len(tasks),
        stages=[s.report() for s in stages],
        hop_histogram=dict(sorted(Counter(t.hops for t in tasks).items())),
        overall=slice_stats(tasks),
        by_hops=_slices(tasks, lambda t: t.hops),
        by_template=_slices(tasks, lambda t: str(_extra(t, "template"))),
        answer_in_distractor_rate=dirty / len(pairs) if pairs else 0.0,
        distractors_per_task=len(pairs) / len(tasks) if tasks else 0.0,
        distractors_rejected=distractors_rejected,
    )


def slice_stats(tasks: Sequence[Task]) -> SliceStats:
    """Leakage numbers of ``tasks``, from the BM25 fields their generator attached."""
    top1 = [f for f in (_extra(t, "bm25_top1_gold") for t in tasks) if f is not None]
    answer = [_extra(t, "bm25_answer_rank") for t in tasks if _has(t, "bm25_answer_rank")]
    ranks = [r for r in (_extra(t, "bm25_gold_ranks") for t in tasks) if isinstance(r, list)]
    return SliceStats(
        tasks=len(tasks),
        leakage_rate=_mean([bool(f) for f in top1]),
        answer_leakage_rate=_mean([r == 1 for r in answer]),
        one_search_rate=_mean([None not in r for r in ranks]),
    )


def _slices(tasks: Sequence[Task], key: Callable[[Task], K]) -> dict[K, SliceStats]:
    groups: dict[K, list[Task]] = {}
    for task in tasks:
        groups.setdefault(key(task), []).append(task)
    return {k: slice_stats(groups[k]) for k in sorted(groups)}


def render_markdown(report: QualityReport) -> str:
    """The report as Markdown: a summary, the stage table and the leakage table by slice."""
    lines = [
        f"## Quality report: {report.generator} on {report.source} (seed {report.seed})",
        "",
        f"- tasks: {report.tasks}; hops: "
        + ", ".join(f"{n} with {h}" for h, n in report.hop_histogram.items()),
        f"- leakage (a gold document is the top BM25 hit for the full query): "
        f"{_percent(report.overall.leakage_rate)}",
        f"- answer in distractor: {report.answer_in_distractor_rate:.1%}"
        f" ({report.distractors_per_task:.2f} distractors per task;"
        f" {report.distractors_rejected} candidates rejected for containing the answer)",
        *([f"- shortfall: {report.shortfall}"] if report.shortfall else []),
        "",
        "| stage | attempted | passed | pass rate | failure reasons |",
        "|---|---:|---:|---:|---|",
    ]
    for s in report.stages:
        reasons = ", ".join(f"{code} {n}" for code, n in s.reasons.items()) or "-"
        lines.append(f"| {s.name} | {s.attempted} | {s.passed} | {s.pass_rate:.1%} | {reasons} |")
    lines += [
        "",
        "| tasks | count | gold doc top-1 (leakage) | answer doc top-1 | all gold in top hits |",
        "|---|---:|---:|---:|---:|",
        _slice_row("all", report.overall),
    ]
    lines += [_slice_row(f"{h} hop(s)", s) for h, s in report.by_hops.items()]
    lines += [_slice_row(t, s) for t, s in report.by_template.items()]
    return "\n".join(lines) + "\n"


def _slice_row(name: str, s: SliceStats) -> str:
    rates = (s.leakage_rate, s.answer_leakage_rate, s.one_search_rate)
    return f"| {name} | {s.tasks} | " + " | ".join(map(_percent, rates)) + " |"


def _percent(rate: float | None) -> str:
    return "n/a" if rate is None else f"{rate:.1%}"


def _extra(task: Task, name: str) -> Any:
    return (task.model_extra or {}).get(name)


def _has(task: Task, name: str) -> bool:
    return name in (task.model_extra or {})


def _mean(flags: Sequence[bool]) -> float | None:
    return sum(flags) / len(flags) if flags else None
