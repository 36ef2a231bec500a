"""The report's PNG plots, drawn with matplotlib's object API (no pyplot, so no global state and
no display: safe in threads and on headless machines). Each function returns PNG bytes."""

from __future__ import annotations

import io
from collections.abc import Sequence

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from sleuth.eval.records import Scores

GROUP_METRICS = {
    "final_answer_found": "final answer found",
    "recall": "recall",
    "recall_at_5": "R@5",
    "f1": "F1",
    "trajectory_recall": "trajectory recall",
}


def _png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    return buffer.getvalue()


def metrics_by_group(groups: dict[str, Scores], label: str) -> bytes:
    """Grouped bars: one group per hop level (or domain), one bar per headline metric."""
    fig = Figure(figsize=(max(5.0, 1.6 * len(groups) + 2), 3.6))
    ax = fig.subplots()
    width = 0.8 / len(GROUP_METRICS)
    for i, (key, name) in enumerate(GROUP_METRICS.items()):
        values = [groups[g].get(key) or 0.0 for g in groups]
        positions = [x + (i - (len(GROUP_METRICS) - 1) / 2) * width for x in range(len(groups))]
        ax.bar(positions, values, width, label=name)
    ax.set_xticks(range(len(groups)), [f"{g}\n(n={groups[g]['count']})" for g in groups])
    ax.set_xlabel(label)
    ax.set_ylim(0, 1.05)
    ax.set_title(f"Metrics by {label}")
    ax.legend(fontsize=8, ncols=2, loc="upper right")
    ax.grid(axis="y", alpha=0.3)
    return _png(fig)


def tool_calls_per_turn(calls_by_turn: Sequence[int]) -> bytes:
    """Histogram of tool calls per turn over every turn of every run (0 = the answer turn)."""
    fig = Figure(figsize=(5.5, 3.4))
    ax = fig.subplots()
    top = max(calls_by_turn, default=0)
    ax.hist(calls_by_turn, bins=[b - 0.5 for b in range(top + 2)], rwidth=0.85)
    ax.set_xticks(range(top + 1))
    ax.set_xlabel("tool calls in the turn")
    ax.set_ylabel("turns")
    ax.set_title("Tool calls per turn")
    ax.grid(axis="y", alpha=0.3)
    return _png(fig)


def tokens_over_turns(tokens_by_run: Sequence[Sequence[int]]) -> bytes:
    """Context size sent at each turn: one faint line per run, the mean in bold."""
    fig = Figure(figsize=(5.5, 3.4))
    ax = fig.subplots()
    for tokens in tokens_by_run:
        ax.plot(range(1, len(tokens) + 1), tokens, color="grey", alpha=0.25, linewidth=0.8)
    longest = max((len(t) for t in tokens_by_run), default=0)
    means = []
    for turn in range(longest):
        values = [t[turn] for t in tokens_by_run if len(t) > turn]
        means.append(sum(values) / len(values))
    ax.plot(range(1, longest + 1), means, color="tab:blue", linewidth=2.2, label="mean")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("turn")
    ax.set_ylabel("context tokens sent")
    ax.set_title("Tokens over turns")
    if means:
        ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return _png(fig)
