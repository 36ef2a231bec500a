"""The recipe's report: the held-out table, paired RL - SFT gains, RL's group statistics and
the learning curve's plot."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sleuth.eval.aggregate import paired_bootstrap_difference
from sleuth.train.recipes.stages import METRICS, RecipeRun
from sleuth.train.runlog import read_log

LABELS = {"recall_at_5": "R@5", "final_answer_found": "found", "reward": "reward"}


def table(rows: dict[str, dict[str, Any]], baseline: str = "single-pass") -> str:
    """Markdown: one row per policy, each metric with its 95% interval, and R@5 minus the
    baseline's with a paired bootstrap interval (same questions)."""
    headers = [
        "policy",
        "n",
        *(f"{LABELS[m]} [95% CI]" for m in METRICS),
        f"ΔR@5 vs {baseline} [95% CI]",
        "traj. recall",
        "malformed",
    ]
    base = rows[baseline]["recall_at_5_by_question"]
    lines = ["| " + " | ".join(headers) + " |", "|---" * len(headers) + "|"]
    for name, r in rows.items():
        cells = [name, str(r["n"])]
        cells += [f"{r[m]:.3f} [{r[m + '_ci'][0]:.3f}, {r[m + '_ci'][1]:.3f}]" for m in METRICS]
        delta, (low, high) = paired_bootstrap_difference(r["recall_at_5_by_question"], base)
        cells.append("–" if name == baseline else f"{delta:+.3f} [{low:+.3f}, {high:+.3f}]")
        cells += [f"{r['trajectory_recall']:.3f}", f"{r['malformed']:.3f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def paired_gains(
    rows: dict[str, dict[str, Any]], pairs: Sequence[tuple[str, str]]
) -> dict[str, dict[str, Any]]:
    """Each metric of ``after`` minus ``before`` on the same questions, with a paired bootstrap
    95% interval: RL beats SFT beyond the interval when the whole interval is above 0."""
    gains: dict[str, dict[str, Any]] = {}
    for after, before in pairs:
        if after not in rows or before not in rows:
            continue
        gains[f"{after} - {before}"] = {}
        for metric in METRICS:
            delta, interval = paired_bootstrap_difference(
                rows[after][f"{metric}_by_question"], rows[before][f"{metric}_by_question"]
            )
            gains[f"{after} - {before}"][metric] = {"delta": delta, "ci": list(interval)}
    return gains


def gain_lines(gains: dict[str, dict[str, Any]]) -> list[str]:
    return [
        f"{name} (paired, same questions): "
        + ", ".join(
            f"{LABELS[m]} {g[m]['delta']:+.3f} [{g[m]['ci'][0]:+.3f}, {g[m]['ci'][1]:+.3f}]"
            for m in METRICS
        )
        for name, g in gains.items()
    ]


def group_stats(log: list[dict[str, Any]]) -> str:
    """The measured reasons behind a curve: reward spread, dropped groups, clipping, drift."""
    if not log:
        return "no RL step ran"

    def mean(key: str) -> float:
        found = [r[key] for r in log if isinstance(r.get(key), int | float)]
        return float(np.mean(found)) if found else float("nan")

    kept = sum(r.get("groups/kept", 0) for r in log)
    total = sum(r.get("groups/total", 0) for r in log)
    return (
        f"RL: {len(log)} steps, {mean('time/step_s'):.0f} s/step (sync {mean('time/sync_s'):.1f} s), "
        f"{kept}/{total} groups with a reward spread, mean sampler mismatch "
        f"{mean('train/sampler_mismatch'):.4f}, ratio > w_max on "
        f"{mean('train/clip_frac_pos') + mean('train/clip_frac_neg'):.4f} of tokens, "
        f"< w_min on {mean('train/clip_frac_low'):.4f}, reward spread in a group (std) "
        f"{mean('reward/group_std'):.3f}"
    )


def plot(curve: list[dict[str, Any]], log: list[dict[str, Any]], path: Path) -> None:
    """Held-out metrics (with intervals) and the training batches' reward against RL step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(METRICS), figsize=(5 * len(METRICS), 3.6))
    for ax, metric in zip(axes, METRICS, strict=True):
        steps = [p["step"] for p in curve]
        values = [p[metric] for p in curve]
        err = [
            [p[metric] - p[metric + "_ci"][0] for p in curve],
            [p[metric + "_ci"][1] - p[metric] for p in curve],
        ]
        ax.errorbar(steps, values, yerr=err, marker="o", capsize=4, label="held-out")
        train_key = {
            "reward": "reward/total",
            "final_answer_found": "metrics/final_answer_found",
        }.get(metric)
        if train_key and any(train_key in r for r in log):
            ax.plot(
                [r["step"] + 1 for r in log if train_key in r],
                [r[train_key] for r in log if train_key in r],
                alpha=0.5,
                label="training batch",
            )
        ax.set_title(LABELS[metric])
        ax.set_xlabel("RL step (0 = after SFT)")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def summarize(
    run: RecipeRun,
    rows: dict[str, dict[str, Any]],
    curve: list[dict[str, Any]],
    log: list[dict[str, Any]],
    drift: dict[int, float],
    sft_report: dict[str, Any],
    speed: dict[str, float],
) -> tuple[str, dict[str, Any]]:
    """The run's markdown (table and notes) and its JSON record (``learning_curve.json``)."""
    config, heldout = run.config, run.pools["heldout"]
    last_rl = [k for k in rows if k.startswith("rl (")]
    gains = paired_gains(
        rows,
        [(k, "sft") for k in last_rl]
        + [(k.replace("rl (", "rl+selector ("), "sft+selector") for k in last_rl],
    )
    notes = [
        f"held-out questions: {len(heldout)} ({config.heldout_per_dataset} each of HotpotQA, "
        "MuSiQue, 2Wiki; combined pooled corpus); greedy decoding; 95% bootstrap intervals over "
        "questions",
        f"SFT: {sft_report['filter']['kept']} of {sft_report['filter']['total']} teacher runs "
        f"kept, {sft_report['sequences']} sequences, {sft_report['steps']} optimiser steps, loss "
        f"{sft_report['loss_before']} -> {sft_report['loss_after']}",
        "rollout speed (SFT student, temperature 1, same first prompts): "
        + ", ".join(f"{k} {v:.1f} tok/s" for k, v in speed.items() if k != "speedup")
        + f" ({speed['speedup']:.2f}x)",
        *gain_lines(gains),
        group_stats(log or read_log(run.out / "rl" / "metrics.jsonl")),
        "RL weight drift (‖ΔW_rl − ΔW_sft‖ / ‖ΔW_sft‖ of the LoRA update) by step: "
        + ", ".join(f"{step} {d:.3f}" for step, d in drift.items()),
        "KL(π_RL ‖ π_SFT) per reply token, on the RL student's own held-out replies, by step: "
        + ", ".join(
            f"{p['step']} {p['kl_to_sft']:.4f}" for p in curve[1:] if p.get("kl_to_sft") is not None
        ),
        "time (min): " + ", ".join(f"{k} {v / 60:.1f}" for k, v in run.timings.items()),
    ]
    text = table(rows) + "\n\n" + "\n".join(f"- {n}" for n in notes) + "\n"
    result = {
        "command": run.command,
        "heldout_n": len(heldout),
        "rl_steps": {
            "planned": config.rl_steps,
            "done": curve[-1]["step"] if len(curve) > 1 else 0,
        },
        "rollout_speedup": speed["speedup"],
        "rollout_tokens_per_s": {k: v for k, v in speed.items() if k != "speedup"},
        "sft_report": sft_report,
        "curve": curve,
        "rl_drift_by_step": drift,
        "rl_vs_sft": gains,
        **{key.split(" ")[0]: row for key, row in rows.items()},
    }
    return text, result
