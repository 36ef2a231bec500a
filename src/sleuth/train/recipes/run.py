"""One recipe run, end to end, resumable: rerun the same command and finished work is reused.

1. **Data** (:mod:`~sleuth.train.recipes.data`): the pooled corpus and its index, the held-out,
   SFT and RL task pools; no held-out id reaches training or the shipped ranker's training set.
2. **Baselines** (:mod:`~sleuth.train.recipes.stages`): single-pass (plain and ranked search),
   the teacher (``heuristic``) and the untrained student on the held-out questions.
3. **SFT**: the teacher's runs on the SFT pool, the report's filter, LoRA; the student after SFT,
   alone and with the selector writing its list; rollout speed of RL's two samplers on it
   (:mod:`~sleuth.train.recipes.analysis`).
4. **CISPO** from the SFT adapter; the student at the chosen checkpoints, its weight drift and
   KL to SFT; a check that no held-out question was rolled out.
5. **Report** (:mod:`~sleuth.train.recipes.report`): ``learning_curve.md``, ``.json``, ``.png``.

Each trained model folder holds the recipe's manifest (``sleuth_policy.json``), so
``--policy local:BASE --adapter OUT/sft/model`` runs as it trained.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import sleuth.train.recipes.analysis as analysis
import sleuth.train.recipes.data as data
import sleuth.train.recipes.report as report
import sleuth.train.recipes.stages as stages
from sleuth.errors import InputError
from sleuth.io import atomic_write_text
from sleuth.ranking.model import load_ranker
from sleuth.tasks import Task
from sleuth.tasks.split import is_heldout
from sleuth.tools.toolbox import Toolbox, ToolConfig
from sleuth.train.checkpoint import latest_checkpoint
from sleuth.train.recipes.config import RecipeConfig
from sleuth.train.recipes.stages import RecipeRun
from sleuth.train.runlog import read_log

STOP_AFTER = ("sft", "rl")


def prepare(
    config: RecipeConfig,
    index: Path,
    out: Path,
    data_dir: Path,
    model: Path,
    seed: int = 0,
    **run: Any,
) -> RecipeRun:
    """Step 1: the corpus, its index, the task pools and the tools (``run``: RecipeRun's rest)."""
    docs, by_dataset = data.load_combined(data_dir)
    by_source: dict[str, Sequence[Task]] = {**by_dataset, data.SYNTHETIC: data.generated_tasks()}
    pools = data.task_pools(by_source, config, seed)
    if any(is_heldout(t.id) for t in pools["sft"] + pools["rl"]):
        raise AssertionError("a held-out question reached a training pool")
    ranker = load_ranker(None)
    if {t.id for t in pools["heldout"]} & set(ranker.question_ids):
        raise InputError("the shipped ranker trained on a held-out question; use another seed")
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    opened = data.open_index(index, docs, config.embedder)
    search = ToolConfig(search_max_chunks=config.chunks_per_search)
    result = RecipeRun(
        config=config,
        model=model,
        out=out,
        pools=pools,
        tools=Toolbox(opened, search, ranker=ranker),
        plain=Toolbox(opened, search),
        **run,
    )
    result.timings["index"] = time.perf_counter() - started
    result.echo(f"{ {k: len(v) for k, v in pools.items()} } {len(docs)} documents")
    return result


def baselines(run: RecipeRun) -> dict[str, dict[str, Any]]:
    """Step 2: one search (plain, ranked), the teacher and the untrained student."""
    return {
        "single-pass": run.evaluate("single-pass", "single-pass", run.plain),
        "single-pass-ranked": run.evaluate("single-pass-ranked", "single-pass"),
        "teacher (heuristic)": run.evaluate("teacher", stages.teacher(run.config)),
        "untrained": run.evaluate("untrained", stages.student(run.model, None)),
    }


def sft_phase(run: RecipeRun, rows: dict[str, dict[str, Any]]) -> tuple[Path, dict[str, Any]]:
    """Step 3: SFT, the student after it (and with the selector); its adapter and report."""
    manifest = stages.recipe_manifest(run.config, run.model, run.pools, "sft", run.command)
    adapter, sft_report = run.timed(
        "sft",
        stages.train_sft,
        run.model,
        run.pools["sft"],
        run.tools,
        run.config,
        run.out,
        manifest,
    )
    rows["sft"] = run.evaluate("sft", stages.student(run.model, adapter))
    if run.selector:
        rows["sft+selector"] = run.evaluate(
            "sft-selector", stages.student(run.model, adapter, "selector")
        )
    return adapter, sft_report


def rl_phase(
    run: RecipeRun, sft_adapter: Path, rows: dict[str, dict[str, Any]], report_now: bool
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[int, float]]:
    """Step 4: CISPO (or, with ``report_now``, its latest checkpoint), the curve's points
    after SFT, RL's log and its weight drift by step."""
    out, config = run.out, run.config
    if report_now:  # RL so far, without training further
        log = read_log(out / "rl" / "metrics.jsonl")
        latest = latest_checkpoint(out / "rl" / "checkpoints")
        last = latest.step if latest else 0
    else:
        manifest = stages.recipe_manifest(config, run.model, run.pools, "rl", run.command)
        args = (run.model, sft_adapter, run.pools["rl"], run.tools, config, out, manifest)
        log = run.timed("rl", stages.train_rl, *args)
        last = config.rl_steps
    rolled = {r["task_id"] for r in read_log(out / "rl" / "rollouts.jsonl")}
    if rolled & {t.id for t in run.pools["heldout"]}:
        raise AssertionError("a held-out question was rolled out in RL")
    curve = []
    for step in stages.curve_steps(out, config.eval_steps, last):
        point = run.evaluate(
            f"rl-{step}", stages.student(run.model, stages.rl_checkpoint(out, step))
        )
        curve.append({"step": step, **point})
    drift = {
        step: analysis.adapter_drift(sft_adapter, stages.rl_checkpoint(out, step))
        for step in range(1, last + 1)
    }
    checkpoints = {p["step"]: stages.rl_checkpoint(out, p["step"]) for p in curve}
    kl = analysis.kl_drift(run.model, sft_adapter, checkpoints, out)
    for point in curve:
        point["drift"] = drift[point["step"]]
        point["kl_to_sft"] = kl.get(point["step"])
    rows[f"rl (step {last})"] = curve[-1]
    if run.selector:
        selected = stages.student(run.model, stages.rl_checkpoint(out, last), "selector")
        rows[f"rl+selector (step {last})"] = run.evaluate(f"rl-{last}-selector", selected)
    return curve, log, drift


def run_recipe(
    config: RecipeConfig,
    index: Path,
    out: Path,
    data_dir: Path,
    model: Path,
    *,
    seed: int = 0,
    stop_after: str | None = None,
    report_now: bool = False,
    selector: bool = True,
    command: str = "",
    echo: Callable[[str], None] = print,
) -> tuple[str, dict[str, Any]]:
    """Run (or resume) the recipe into ``out``; the report's markdown and its JSON record.

    Raises:
        InputError: an unknown ``stop_after``, a missing data folder or an index of other
            documents; before any work.
    """
    if stop_after not in (None, *STOP_AFTER):
        raise InputError(f"unknown stop-after {stop_after!r}; use one of {STOP_AFTER}")
    echo(f"$ {command}\nrecipe: {asdict(config)}")
    run = prepare(
        config, index, out, data_dir, model, seed, command=command, selector=selector, echo=echo
    )
    rows = baselines(run)
    sft_adapter, sft_report = sft_phase(run, rows)
    speed = run.timed(
        "speed",
        analysis.rollout_speed,
        run.model,
        sft_adapter,
        run.pools["heldout"][:4],
        run.harness,
        config,
        out,
    )
    curve: list[dict[str, Any]] = [{"step": 0, **rows["sft"]}]
    log: list[dict[str, Any]] = []
    drift: dict[int, float] = {}
    if stop_after != "sft":
        points, log, drift = rl_phase(run, sft_adapter, rows, report_now)
        curve += points
    text, result = report.summarize(run, rows, curve, log, drift, sft_report, speed)
    atomic_write_text(out / "learning_curve.md", text)
    atomic_write_text(out / "learning_curve.json", json.dumps(result, indent=2))
    report.plot(curve, log, out / "learning_curve.png")
    return text, result
