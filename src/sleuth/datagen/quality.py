"""Quality report of a generation run: what each stage rejected and why, and checks on the output.

The report is a pydantic model (saved as JSON) with a Markdown rendering. Stage tallies count
candidates, not tasks: a run that tried 900 candidates to keep 250 tasks says so.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel, Field, computed_field

from sleuth.datagen.verify import answer_in_text, reason_code
from sleuth.tasks import Task


class StageReport(BaseModel):
    """How many candidates a stage saw, passed, and the failure codes of the rest."""

    name: str
    attempted: int
    passed: int
    reasons: dict[str, int] = Field(default_factory=dict)
    """Failure code → number of candidates failing with it (one candidate may have several)."""

    @computed_field
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


class QualityReport(BaseModel):
    """The numbers a reviewer checks before trusting a generated task set."""

    generator: str
    source: str
    seed: int
    tasks: int
    stages: list[StageReport]
    hop_histogram: dict[int, int]
    template_histogram: dict[str, int]
    leakage_rate: float | None
    """Share of tasks whose top BM25 hit for the full query is a gold document (too easy);
    None when no task carries the ``bm25_top1_gold`` flag."""
    leakage_by_hops: dict[int, float]
    one_search_rate: float | None
    """Share of tasks whose every gold document is in the top BM25 hits (``bm25_gold_ranks``)
    for the full query: one search finds them all. None when no task carries the ranks."""
    answer_in_distractor_rate: float
    """Share of distractor documents that contain the answer or an alias; must be 0."""
    distractors_per_task: float
    distractors_rejected: int = 0
    """Distractor candidates dropped because they contain the answer or an alias."""


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
    leak_flags = [_extra(t, "bm25_top1_gold") for t in tasks]
    flagged = [(t.hops, bool(f)) for t, f in zip(tasks, leak_flags, strict=True) if f is not None]
    ranked = [r for r in (_extra(t, "bm25_gold_ranks") for t in tasks) if isinstance(r, list)]
    pairs = [(t, d) for t in tasks for d in t.distractor_doc_ids]
    leaked = sum(
        answer_in_text(t.answer, t.answer_aliases, documents.get(d, "")) for t, d in pairs
    )
    return QualityReport(
        generator=generator,
        source=source,
        seed=seed,
        tasks=len(tasks),
        stages=[s.report() for s in stages],
        hop_histogram=dict(sorted(Counter(t.hops for t in tasks).items())),
        template_histogram=dict(sorted(Counter(_extra(t, "template") or "-" for t in tasks).items())),
        leakage_rate=_mean([f for _, f in flagged]) if flagged else None,
        leakage_by_hops={
            hops: _mean([f for h, f in flagged if h == hops])
            for hops in sorted({h for h, _ in flagged})
        },
        one_search_rate=_mean([None not in r for r in ranked]) if ranked else None,
        answer_in_distractor_rate=leaked / len(pairs) if pairs else 0.0,
        distractors_per_task=len(pairs) / len(tasks) if tasks else 0.0,
        distractors_rejected=distractors_rejected,
    )


def render_markdown(report: QualityReport) -> str:
    """The report as Markdown: a summary list, a stage table and the histograms."""
    leakage = "n/a" if report.leakage_rate is None else f"{report.leakage_rate:.1%}"
    one_search = "n/a" if report.one_search_rate is None else f"{report.one_search_rate:.1%}"
    by_hops = ", ".join(f"{h} hop(s): {r:.1%}" for h, r in report.leakage_by_hops.items())
    lines = [
        f"## Quality report: {report.generator} on {report.source} (seed {report.seed})",
        "",
        f"- tasks: {report.tasks}",
        f"- leakage (gold doc is the top BM25 hit for the query): {leakage}"
        + (f" ({by_hops})" if by_hops else ""),
        f"- every gold document in the top BM25 hits for the query: {one_search}",
        f"- answer in distractor: {report.answer_in_distractor_rate:.1%}",
        f"- distractors per task: {report.distractors_per_task:.2f}"
        f" ({report.distractors_rejected} candidates rejected for containing the answer)",
        "",
        "| stage | attempted | passed | pass rate | failure reasons |",
        "|---|---:|---:|---:|---|",
    ]
    for s in report.stages:
        reasons = ", ".join(f"{code} {n}" for code, n in s.reasons.items()) or "-"
        lines.append(f"| {s.name} | {s.attempted} | {s.passed} | {s.pass_rate:.1%} | {reasons} |")
    lines += ["", "| hops | tasks |", "|---:|---:|"]
    lines += [f"| {h} | {n} |" for h, n in report.hop_histogram.items()]
    lines += ["", "| template | tasks |", "|---|---:|"]
    lines += [f"| {t} | {n} |" for t, n in report.template_histogram.items()]
    return "\n".join(lines) + "\n"


def _extra(task: Task, name: str) -> object:
    return (task.model_extra or {}).get(name)


def _mean(flags: Sequence[bool]) -> float:
    return sum(flags) / len(flags) if flags else 0.0
