"""The training log: one flat JSON object per step (slash-keyed metrics), and its plots.

Lines are appended with fsync as each step ends. A step logged after the last checkpoint is run
again on resume, so :func:`truncate_log` first drops every line of a step not yet checkpointed;
the log never holds a step twice.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sleuth.io import append_jsonl, atomic_write_text, read_jsonl

STEP_KEY = "step"
DEFAULT_PLOT_KEYS = (
    "reward/total",
    "reward/f_beta",
    "reward/trajectory_recall",
    "metrics/final_answer_found",
    "metrics/recall",
    "metrics/turns",
    "train/loss",
    "train/entropy",
    "train/ratio_max",
    "train/clip_frac_pos",
    "groups/kept",
    "time/step_s",
)


def log_step(path: str | Path, record: dict[str, Any]) -> None:
    """Append one step's record (must hold ``step``)."""
    if STEP_KEY not in record:
        raise ValueError("a log record needs its step")
    append_jsonl(path, record)


def read_log(path: str | Path) -> list[dict[str, Any]]:
    path = Path(path)
    return list(read_jsonl(path)) if path.exists() else []


def truncate_log(path: str | Path, before_step: int) -> int:
    """Keep only records of steps ``< before_step``; return how many were dropped."""
    path = Path(path)
    if not path.exists():
        return 0
    records = read_log(path)
    kept = [r for r in records if int(r.get(STEP_KEY, -1)) < before_step]
    if len(kept) != len(records):
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in kept)
        atomic_write_text(path, text)
    return len(records) - len(kept)


def plot_log(
    log_path: str | Path, png_path: str | Path, keys: Sequence[str] = DEFAULT_PLOT_KEYS
) -> Path | None:
    """One small panel per key against the step; keys never logged are skipped. None if empty."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = read_log(log_path)
    present = [k for k in keys if any(_finite(r.get(k)) for r in records)]
    if not present:
        return None
    cols = 3
    rows = math.ceil(len(present) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 2.6 * rows), squeeze=False)
    for ax, key in zip(axes.flat, present, strict=False):
        points = [(r[STEP_KEY], r[key]) for r in records if _finite(r.get(key))]
        ax.plot([p[0] for p in points], [p[1] for p in points], marker=".")
        ax.set_title(key, fontsize=9)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(present) :]:
        ax.axis("off")
    fig.tight_layout()
    png_path = Path(png_path)
    png_path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png_path, dpi=90)
    plt.close(fig)
    return png_path


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)
