"""Per-query records → the summary: means overall and by hop level, domain and source.

A mean is over the queries where the value is defined (prune accuracy is undefined for a run
that pruned nothing), so each group also reports ``count`` and, for prune accuracy, how many
runs it covers (``prune_accuracy_n``). Booleans average to rates. Reward terms are flat,
slash-keyed (``reward/total``), next to the metrics. ``failed_count`` (queries whose every
rollout failed) and ``policy_errors`` (runs that ended on a policy error) are counts, so a
column of zeros from a dead endpoint never reads as a score.

Uncertainty: :func:`bootstrap_interval` (percentile bootstrap over questions) and
:func:`paired_bootstrap_difference` (the same questions resampled for both policies, so the
interval of a difference is not inflated by question difficulty).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from sleuth.eval.records import EvalSummary, QueryRecord, RunInfo, Scores

BOOTSTRAP_SAMPLES = 2000
Interval = tuple[float, float]
GROUPS: dict[str, Callable[[QueryRecord], str]] = {
    "by_hops": lambda r: str(r.hops),
    "by_domain": lambda r: r.domain,
    "by_source": lambda r: r.source,
}


def mean_defined(values: Iterable[Any]) -> float | None:
    """Mean of the values that are numbers (booleans count 0/1); None when there are none."""
    numbers = [float(v) for v in values if isinstance(v, int | float)]
    return sum(numbers) / len(numbers) if numbers else None


def aggregate_records(records: Sequence[QueryRecord]) -> Scores:
    """``count``, the failure counts, the mean of every metric, ``prune_accuracy_n`` and every
    ``reward/<term>``."""
    out: Scores = {
        "count": len(records),
        "failed_count": sum(r.error is not None for r in records),
        "policy_errors": sum(s == "policy_error" for r in records for s in r.stop_reasons),
    }
    if not records:
        return out
    metrics = [r.metrics.model_dump() for r in records]
    for key in metrics[0]:
        out[key] = mean_defined(m.get(key) for m in metrics)
    out["prune_accuracy_n"] = sum(r.metrics.prune_accuracy is not None for r in records)
    rewards = [r.reward.model_dump() for r in records]
    for key in rewards[0]:
        out[f"reward/{key}"] = mean_defined(t.get(key) for t in rewards)
    return out


def summarize(records: Sequence[QueryRecord], run: RunInfo) -> EvalSummary:
    """The content of ``summary.json``: ``run`` settings, overall and per-group aggregates."""
    summary: dict[str, Any] = {**run.model_dump(), "overall": aggregate_records(records)}
    for name, key in GROUPS.items():
        groups: dict[str, list[QueryRecord]] = {}
        for record in records:
            groups.setdefault(key(record), []).append(record)
        summary[name] = {g: aggregate_records(groups[g]) for g in sorted(groups, key=_natural)}
    return EvalSummary.model_validate(summary)


def _natural(label: str) -> tuple[int, int | str]:
    """Numbers first in numeric order ("2" < "10"), then text."""
    return (0, int(label)) if label.isdigit() else (1, label)


def bootstrap_interval(
    values: Sequence[float], level: float = 0.95, samples: int = BOOTSTRAP_SAMPLES, seed: int = 0
) -> Interval:
    """Percentile bootstrap interval of the mean of ``values`` (resampled with replacement).

    Raises:
        ValueError: ``values`` is empty.
    """
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        raise ValueError("bootstrap of no values")
    rows = np.random.default_rng(seed).integers(0, data.size, size=(samples, data.size))
    means = data[rows].mean(axis=1)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


def paired_bootstrap_difference(
    a: Sequence[float], b: Sequence[float], level: float = 0.95, **options: Any
) -> tuple[float, Interval]:
    """Mean of ``a - b`` over paired items and its bootstrap interval (``a[i]``, ``b[i]``: item i).

    Raises:
        ValueError: the sequences differ in length or are empty.
    """
    if len(a) != len(b):
        raise ValueError(f"paired values differ in length ({len(a)} vs {len(b)})")
    diff = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    interval = bootstrap_interval(diff, level, **options)  # raises on no items
    return float(diff.mean()), interval
