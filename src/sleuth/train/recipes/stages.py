"""The recipe's stages: held-out evaluations, teacher runs + SFT filter + SFT, and CISPO.

Each stage resumes: an evaluation reuses its finished records, SFT is skipped once its report
exists (and resumes its teacher runs and epochs before that), RL continues from its last
checkpoint. Every trained model gets the recipe's manifest (:func:`recipe_manifest`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sleuth.errors import InputError
from sleuth.eval import EvalConfig, run_eval
from sleuth.eval.aggregate import bootstrap_interval
from sleuth.eval.runner import RESULTS, load_results
from sleuth.harness.loop import HarnessConfig
from sleuth.policies.manifest import PolicyManifest, write_manifest
from sleuth.policies.spec import BuiltPolicy, PolicyOptions, build_policy
from sleuth.reward import RewardConfig
from sleuth.tasks import Task
from sleuth.tools.toolbox import Toolbox
from sleuth.train.checkpoint import latest_checkpoint
from sleuth.train.model import StudentConfig
from sleuth.train.recipes.config import RecipeConfig
from sleuth.train.rl import run_rl
from sleuth.train.rl_types import RLConfig
from sleuth.train.sft import SFTConfig, build_teacher, run_sft

METRICS = ("recall_at_5", "final_answer_found", "reward")
"""The metrics of the table and of the paired RL - SFT differences."""
TASK_SOURCE = "staged HotpotQA, MuSiQue, 2Wiki samples (training side) + synthetic"


def evaluate(
    name: str,
    policy: str | BuiltPolicy,
    tasks: list[Task],
    tools: Toolbox,
    harness: HarnessConfig,
    out: Path,
) -> dict[str, Any]:
    """One policy on the held-out tasks (resumes); per-metric mean and 95% bootstrap interval,
    and the per-question values of :data:`METRICS` (for paired differences)."""
    folder = out / f"eval-{name}"
    run_eval(
        tasks,
        policy,
        tools,
        folder,
        EvalConfig(concurrency=8, harness_config=harness, progress=False),
    )
    records = load_results(folder / RESULTS)
    rows = [records[t.id] for t in tasks]
    values = {
        "recall_at_5": [r.metrics.recall_at_5 for r in rows],
        "final_answer_found": [float(bool(r.metrics.final_answer_found)) for r in rows],
        "reward": [r.reward.total for r in rows],
        "trajectory_recall": [r.metrics.trajectory_recall for r in rows],
        "malformed": [float(bool(r.metrics.malformed)) for r in rows],
    }
    result: dict[str, Any] = {"n": len(rows)}
    for key, column in values.items():
        result[key] = float(np.mean(column))
        result[f"{key}_ci"] = list(bootstrap_interval(column))
    for metric in METRICS:
        result[f"{metric}_by_question"] = values[metric]
    return result


def student(model: Path, adapter: Path | None, final_list: str = "model") -> BuiltPolicy:
    """The student as ``sleuth eval --policy local:MODEL --adapter A`` builds it: greedy, ct2;
    ``final_list="selector"``: the learned selector orders what the student's searches found."""
    options = PolicyOptions(
        adapter=str(adapter) if adapter else None,
        engine="ct2",
        temperature=0.0,
        final_list=final_list,
    )
    return build_policy(f"local:{model}", options)


def teacher(config: RecipeConfig) -> BuiltPolicy:
    """The heuristic agent the student is distilled from, as the held-out table runs it."""
    return build_policy(
        "heuristic", PolicyOptions(agent={"final_docs": config.final_docs, **config.teacher()})
    )


def recipe_manifest(
    config: RecipeConfig,
    model: Path,
    pools: dict[str, list[Task]],
    phase: str,
    command: str,
) -> PolicyManifest:
    """What a recipe's model trained under and on; the selector writes its final list (measured:
    it orders what the student found better than the student does)."""
    trained = pools["sft"] + (pools["rl"] if phase == "rl" else [])
    return PolicyManifest.of_training(
        config.harness(),
        search_max_chunks=config.chunks_per_search,
        ranker=True,
        base_model=str(model),
        task_ids=[t.id for t in trained],
        phase=phase,
        final_list="selector",
        trained_with=command,
        task_source=TASK_SOURCE,
        held_out_task_ids=sorted(t.id for t in pools["heldout"]),
        preset=json.loads(json.dumps(asdict(config))),
    )


def _student_config(model: Path, config: RecipeConfig, adapter: Path | None) -> StudentConfig:
    return StudentConfig(
        path=str(model),
        adapter=str(adapter) if adapter else None,
        lora_r=config.lora_r,
        lora_alpha=config.lora_alpha,
        device=config.device,
        dtype=config.dtype,
    )


def train_sft(
    model: Path,
    tasks: list[Task],
    tools: Toolbox,
    config: RecipeConfig,
    out: Path,
    manifest: PolicyManifest | None = None,
) -> tuple[Path, dict[str, Any]]:
    """Teacher runs on ``tasks``, the report's filter, LoRA: ``out/sft/model`` and its report.
    Skipped once ``sft_report.json`` exists; the manifest is (re)written either way."""
    folder = out / "sft"
    report_path = folder / "sft_report.json"
    if not report_path.exists():
        sft = SFTConfig(
            student=_student_config(model, config, None),
            out_dir=str(folder),
            lr=config.sft_lr,
            epochs=config.sft_epochs,
            batch_size=config.sft_batch,
            max_seq_len=config.budget,
            harness=config.harness(),
            rollout_workers=config.workers,
        )
        taught, make_teacher = build_teacher(
            "heuristic", tools, final_docs=config.final_docs, **config.teacher()
        )
        run_sft(sft, tasks, taught, make_teacher, manifest)
    if manifest is not None:
        write_manifest(folder / "model", manifest)
    return folder / "model", json.loads(report_path.read_text("utf-8"))


def rl_config(model: Path, sft_adapter: Path, config: RecipeConfig, out: Path) -> RLConfig:
    """CISPO from the SFT adapter under the recipe's harness."""
    on_cpu = config.device == "cpu"
    return RLConfig(
        student=_student_config(model, config, sft_adapter),  # CISPO continues the SFT adapter
        out_dir=str(out / "rl"),
        queries_per_step=config.queries_per_step,
        rollouts_per_query=config.rollouts_per_query,
        substeps=config.substeps,
        micro_batch_size=1 if on_cpu else 4,  # memory only; 1 is fastest on 2 cores
        epochs=2,  # β 4 for the first half of the steps, 2 after
        max_steps=config.rl_steps,
        lr=config.rl_lr,
        max_seq_len=config.budget,
        harness=config.harness(),
        reward=RewardConfig(credit_malformed_list=config.credit_malformed_list),
        rollout_engine="ct2" if on_cpu else "transformers",
        rollout_workers=config.workers,
        rollout_compute_type=config.rollout_compute_type,
        autocast_bf16=config.autocast_bf16,
        keep_checkpoints=config.rl_steps + 1,  # the curve evaluates earlier steps too
    )


def train_rl(
    model: Path,
    sft_adapter: Path,
    tasks: list[Task],
    tools: Toolbox,
    config: RecipeConfig,
    out: Path,
    manifest: PolicyManifest | None = None,
) -> list[dict[str, Any]]:
    """CISPO on ``tasks`` (resumes from ``out/rl``'s last checkpoint); its log records."""
    return run_rl(rl_config(model, sft_adapter, config, out), tasks, tools, manifest=manifest)


def curve_steps(out: Path, planned: tuple[int, ...], last: int) -> list[int]:
    """RL steps on the curve: the planned ones reached, any evaluated before (a resumed or
    reported run keeps its earlier points), and the last."""
    done = {
        int(p.name.removeprefix("eval-rl-"))
        for p in out.glob("eval-rl-*")
        if p.name.removeprefix("eval-rl-").isdigit()
    }
    return sorted({s for s in (*planned, *done) if s < last} | {last})


def rl_checkpoint(out: Path, step: int) -> Path:
    """The adapter of RL checkpoint ``step``.

    Raises:
        InputError: there is no such checkpoint (the message names the latest one).
    """
    folder = out / "rl" / "checkpoints" / f"step_{step:06d}"
    if not folder.exists():
        found = latest_checkpoint(out / "rl" / "checkpoints")
        raise InputError(f"no RL checkpoint at step {step} (latest: {found})")
    return folder / "model"


@dataclass
class RecipeRun:
    """A run's fixed inputs (where, on what, with which tools) and its phase timings."""

    config: RecipeConfig
    model: Path
    out: Path
    pools: dict[str, list[Task]]
    tools: Toolbox
    """Search with the shipped ranker as its rerank stage: what the teacher and student search."""
    plain: Toolbox
    command: str
    selector: bool = True
    """Also evaluate the student with the learned selector writing its final list."""
    echo: Callable[[str], None] = print
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def harness(self) -> HarnessConfig:
        return self.config.harness()

    def timed(self, name: str, fn: Callable[..., Any], *args: Any) -> Any:
        started = time.perf_counter()
        result = fn(*args)
        self.timings[name] = time.perf_counter() - started
        self.echo(f"[{name}] {self.timings[name] / 60:.1f} min")
        return result

    def evaluate(self, name: str, policy: Any, tools: Toolbox | None = None) -> dict[str, Any]:
        """``policy`` on the held-out questions (resumes), timed."""
        heldout, harness = self.pools["heldout"], self.harness
        args = (name, policy, heldout, tools or self.tools, harness, self.out)
        row: dict[str, Any] = self.timed(f"eval {name}", evaluate, *args)
        return row
