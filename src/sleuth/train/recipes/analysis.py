"""How far RL moved the student from SFT, and how fast RL's two samplers decode it.

Weight drift (:func:`adapter_drift`) compares the LoRA updates; :func:`kl_drift` compares the
policies themselves on the RL student's own held-out replies. :func:`rollout_speed` times the
transformers and CTranslate2 samplers on the same prompts. Each result is cached in the run's
folder, so a resumed recipe does not recompute it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sleuth.harness.loop import HarnessConfig
from sleuth.io import atomic_write_text
from sleuth.tasks import Task
from sleuth.train.model import StudentConfig
from sleuth.train.recipes.config import RecipeConfig


def lora_delta(adapter: Path) -> dict[str, np.ndarray]:
    """Each adapted weight's update, scale · B A, keyed by its LoRA A tensor's name."""
    from safetensors.numpy import load_file

    config = json.loads((adapter / "adapter_config.json").read_text("utf-8"))
    scale = config["lora_alpha"] / config["r"]
    weights = load_file(str(adapter / "adapter_model.safetensors"))
    return {
        name: scale * (weights[name.replace("lora_A", "lora_B")] @ A).astype(np.float64)
        for name, A in weights.items()
        if "lora_A" in name
    }


def adapter_drift(sft: Path, rl: Path) -> float:
    """How far RL moved the weights, relative to how far SFT moved them from the base model:
    ‖ΔW_rl − ΔW_sft‖ / ‖ΔW_sft‖ over all adapted matrices (the RL run starts from SFT's LoRA)."""
    before, after = lora_delta(sft), lora_delta(rl)
    moved = sum(float(np.sum((after[k] - before[k]) ** 2)) for k in before)
    return float((moved / sum(float(np.sum(d**2)) for d in before.values())) ** 0.5)


def with_adapters(model_path: Path, adapters: dict[str, Path]) -> Any:
    """The base model with every adapter of ``adapters`` loaded under its name (inference)."""
    from peft import PeftModel

    from sleuth.train.model import load_student

    base, _ = load_student(StudentConfig(path=str(model_path), lora=False))
    (first, path), *rest = adapters.items()
    model = PeftModel.from_pretrained(base, str(path), adapter_name=first)
    for name, folder in rest:
        model.load_adapter(str(folder), adapter_name=name)
    return model.eval()


def policy_kl(model: Any, sequences: Sequence[Any], policy: str, reference: str) -> float:
    """Mean KL(π_policy ‖ π_reference) over the whole vocabulary, at every position where a
    reply token was written (``loss_mask``), between two adapters of ``model``: exact per
    position, so it needs no samples from either policy."""
    import torch

    total, count = 0.0, 0
    for seq in sequences:
        ids = torch.tensor([seq.input_ids])
        written = torch.tensor(seq.loss_mask[1:], dtype=torch.bool)  # logits at t predict t + 1
        logp = {}
        for name in (policy, reference):
            model.set_adapter(name)
            with torch.no_grad():
                logits = model(input_ids=ids).logits[0, :-1][written]
            logp[name] = torch.log_softmax(logits.double(), dim=-1)
        kl = (logp[policy].exp() * (logp[policy] - logp[reference])).sum(-1)
        total += float(kl.sum())
        count += int(written.sum())
    return total / count if count else float("nan")


def kl_drift(
    model_path: Path, sft: Path, checkpoints: dict[int, Path], out: Path, n: int = 8
) -> dict[int, float]:
    """KL(π_step ‖ π_SFT) per RL step, at the states the RL student visits: its replies on the
    first ``n`` held-out questions of its own evaluation (``eval-rl-STEP``). Cached in
    ``kl_drift.json``; a step without that evaluation is skipped."""
    from sleuth.harness.trajectory import load_trajectory
    from sleuth.train.render import recorded_turn_tokens
    from sleuth.train.sequences import turns_to_sequences

    path = out / "kl_drift.json"
    done = (
        {int(k): v for k, v in json.loads(path.read_text("utf-8")).items()} if path.exists() else {}
    )
    todo = {
        s: a for s, a in checkpoints.items() if s not in done and (out / f"eval-rl-{s}").exists()
    }
    if todo:
        model = with_adapters(model_path, {"sft": sft} | {f"rl{s}": a for s, a in todo.items()})
        for step in todo:
            runs = sorted((out / f"eval-rl-{step}" / "trajectories").glob("*.jsonl"))[:n]
            sequences = [
                seq
                for run in runs
                for seq in turns_to_sequences(recorded_turn_tokens(load_trajectory(run)))
            ]
            done[step] = policy_kl(model, sequences, f"rl{step}", "sft")
        atomic_write_text(path, json.dumps(done, indent=2))
    return {s: done[s] for s in checkpoints if s in done}


def rollout_speed(
    model: Path,
    adapter: Path,
    tasks: list[Task],
    harness: HarnessConfig,
    config: RecipeConfig,
    out: Path,
) -> dict[str, float]:
    """Sampled tokens/s of RL's two rollout engines on the SFT student, as RL samples (the
    LoRA-wrapped trainer model, temperature 1): transformers and CTranslate2 at the recipe's
    compute type. Each first prompt goes to both in turn, so load on the machine hits both."""
    path = out / "rollout_speed.json"
    if path.exists():
        cached: dict[str, float] = json.loads(path.read_text("utf-8"))
        return cached
    from sleuth.harness.prompt import user_message
    from sleuth.policies.ct2 import CT2RolloutEngine
    from sleuth.tools.spec import TOOL_SCHEMAS
    from sleuth.train.model import load_student
    from sleuth.train.rollout import LocalRolloutEngine, RolloutEngine

    trainer, tokenizer = load_student(
        StudentConfig(
            path=str(model),
            adapter=str(adapter),
            lora_r=config.lora_r,
            lora_alpha=config.lora_alpha,
        )
    )
    ct2 = f"ct2-{config.rollout_compute_type}"
    engines: dict[str, RolloutEngine] = {
        "transformers": LocalRolloutEngine(trainer, tokenizer),
        ct2: CT2RolloutEngine(trainer, tokenizer, compute_type=config.rollout_compute_type),
    }
    tokens = dict.fromkeys(engines, 0)
    seconds = dict.fromkeys(engines, 0.0)
    for engine in engines.values():
        engine.sync(trainer, 0)
    limit = harness.max_reply_tokens or harness.budget.reply_reserve
    for i, task in enumerate(tasks):
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": harness.system_prompt},
            {"role": "user", "content": user_message(task.query)},
        ]
        for name, engine in engines.items():
            started = time.perf_counter()
            reply = engine.policy(i).generate(messages, TOOL_SCHEMAS, limit)
            seconds[name] += time.perf_counter() - started
            tokens[name] += len(reply.token_ids or [])
    result = {name: tokens[name] / seconds[name] for name in engines}
    result["speedup"] = result[ct2] / result["transformers"]
    atomic_write_text(path, json.dumps(result, indent=2))
    return result
