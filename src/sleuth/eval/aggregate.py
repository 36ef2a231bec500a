"""Per-query records → the summary: means overall and by hop level, domain and source.

A mean is over the queries where the value is defined (prune accuracy is undefined for a run
that pruned nothing), so each group also reports ``count`` and, for prune accuracy, how many
runs it covers (``prune_accuracy_n``). Booleans average to rates. Reward terms are flat,
slash-keyed (``reward/total``), next to the metrics. ``failed_count`` (queries whose every
rollout failed) and ``policy_errors`` (runs that ended on a policy error) are counts, so a
column of zeros from a dead endpoint never reads as a score.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

Record = dict[str, Any]
GROUPS: dict[str, Callable[[Record], str]] = {
    "by_hops": lambda r: str(r["hops"]),
    "by_domain": lambda r: str(r["domain"]),
    "by_source": lambda r: str(r["source"]),
}


def mean_defined(values: Iterable[Any]) -> float | None:
    """Mean of the values that are numbers (booleans count 0/1); None when there are none."""
    numbers = [float(v) for v in values if isinstance(v, int | float)]
    return sum(numbers) / len(numbers) if numbers else None


def aggregate_records(records: Sequence[Record]) -> dict[str, float | int | None]:
    """``count``, the failure counts, the mean of every metric, ``prune_accuracy_n`` and every
    ``reward/<term>``."""
    out: dict[str, float | int | None] = {
        "count": len(records),
        "failed_count": sum(r["error"] is not None for r in records),
        "policy_errors": sum(s == "policy_error" for r in records for s in r["stop_reasons"]),
    }
    if not records:
        return out
    for key in records[0]["metrics"]:
        out[key] = mean_defined(r["metrics"].get(key) for r in records)
    out["prune_accuracy_n"] = sum(r["metrics"].get("prune_accuracy") is not None for r in records)
    for key in records[0]["reward"]:
        out[f"reward/{key}"] = mean_defined(r["reward"].get(key) for r in records)
    return out


def summarize(records: Sequence[Record], run: dict[str, Any]) -> dict[str, Any]:
    """The content of ``summary.json``: ``run`` settings, overall and per-group aggregates."""
    summary: dict[str, Any] = {**run, "overall": aggregate_records(records)}
    for name, key in GROUPS.items():
        groups: dict[str, list[Record]] = {}
        for record in records:
            groups.setdefault(key(record), []).append(record)
        summary[name] = {g: aggregate_records(groups[g]) for g in sorted(groups, key=_natural)}
    return summary


def _natural(label: str) -> tuple[int, int | str]:
    """Numbers first in numeric order ("2" < "10"), then text."""
    return (0, int(label)) if label.isdigit() else (1, label)
