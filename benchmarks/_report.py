"""``quality.py``'s rows as tables: metrics in %, 95% intervals, paired deltas, the anchors."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.table import Table

METRICS = {
    "recall_at_2": "R@2",
    "recall_at_5": "R@5",
    "recall_at_10": "R@10",
    "all_gold_at_5": "all gold@5",
    "final_answer_found": "found",
    "trajectory_recall": "traj. recall",
}
# the metrics given a 95% interval and a paired delta against single-pass
INTERVAL_KEYS = ("recall_at_2", "recall_at_5", "final_answer_found")
# HippoRAG 2 (arXiv 2502.14802, Table 3), pooled corpora of 1,000 questions (~6-12k passages):
# R@5 in %, per dataset. Digest: ../shared/research/anchors-2026-11-30.md §1.2.
ANCHORS_R5 = {
    "BM25": {"MuSiQue": 43.5, "2Wiki": 65.3, "HotpotQA": 74.8},
    "NV-Embed-v2 (7B)": {"MuSiQue": 69.7, "2Wiki": 76.5, "HotpotQA": 94.5},
    "HippoRAG 2": {"MuSiQue": 74.7, "2Wiki": 90.4, "HotpotQA": 96.3},
}
POOL_SEPARATOR = "/"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def _interval(ci: Sequence[float] | None) -> str:
    return "–" if ci is None else f"[{_pct(ci[0])}, {_pct(ci[1])}]"


def _delta(delta: Sequence[float] | None) -> str:
    return "–" if delta is None else f"{100 * delta[0]:+.1f} {_interval(delta[1:])}"


def anchor_r5(dataset: str) -> str:
    """HippoRAG 2's published R@5 for a row's dataset (``pooled/MuSiQue`` → 74.7), else –."""
    score = ANCHORS_R5["HippoRAG 2"].get(dataset.split(POOL_SEPARATOR)[-1])
    return "–" if score is None else f"{score:.1f}"


HEADERS = [
    "dataset",
    "policy",
    "n",
    *METRICS.values(),
    *(f"{METRICS[k]} 95% CI" for k in INTERVAL_KEYS),
    *(f"Δ{METRICS[k]} vs single-pass" for k in INTERVAL_KEYS),
    "HippoRAG 2 R@5",
    "s/q",
]


def cells(r: dict[str, Any]) -> list[str]:
    """A row's table cells: metrics in %, intervals in brackets, seconds per query."""
    seconds = "–" if r["s_per_query"] is None else f"{r['s_per_query']:.2f}"
    return [
        r["dataset"],
        r["policy"],
        str(r["n"]),
        *(_pct(r[k]) for k in METRICS),
        *(_interval(r["ci"].get(k)) for k in INTERVAL_KEYS),
        *(_delta(r["delta"].get(k)) for k in INTERVAL_KEYS),
        anchor_r5(r["dataset"]),
        seconds,
    ]


def anchor_lines() -> list[str]:
    """The published R@5 anchors as a Markdown table."""
    names = ["MuSiQue", "2Wiki", "HotpotQA"]
    lines = ["| anchor (HippoRAG 2, arXiv 2502.14802) | " + " | ".join(names) + " |"]
    lines.append("|---" * (len(names) + 1) + "|")
    for method, scores in ANCHORS_R5.items():
        lines.append(f"| {method} | " + " | ".join(f"{scores[n]:.1f}" for n in names) + " |")
    return lines


def markdown(rows: Sequence[dict[str, Any]], header: str) -> str:
    """The table (metrics in %), the anchors beside it, and the header line."""
    lines = [header, "", "| " + " | ".join(HEADERS) + " |", "|---" * len(HEADERS) + "|"]
    lines += ["| " + " | ".join(cells(r)) + " |" for r in rows]
    lines += ["", "Published R@5 anchors (pooled corpora of 1,000 questions, ~6-12k passages):", ""]
    return "\n".join(lines + anchor_lines()) + "\n"


def header_line(rows: Sequence[dict[str, Any]]) -> str:
    """How many questions were evaluated and how many were excluded as training questions."""
    plain = [r for r in rows if POOL_SEPARATOR not in r["dataset"]] or rows
    per_dataset = {r["dataset"]: (r["n"], r["excluded"]) for r in plain}
    parts = [f"{ds} {n} evaluated, {x} excluded" for ds, (n, x) in per_dataset.items()]
    return "Held-out questions only (training questions excluded): " + "; ".join(parts) + "."


def rich_table(rows: Sequence[dict[str, Any]], title: str) -> Table:
    table = Table(*HEADERS, title=title)
    for r in rows:
        table.add_row(*cells(r))
    return table
