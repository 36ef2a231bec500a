"""SFT warm-up (SPEC §6, report §4.1): teacher trajectories -> filter -> fine-tune the student.

Read top to bottom: :func:`run_sft` generates teacher trajectories through the same harness
(any policy: an OpenAI-compatible endpoint, a local model, the scripted heuristic agent), keeps
those the report's rules keep (:mod:`sleuth.train.sft_filter`), renders them with the student's
chat template and fine-tunes with LoRA or fully, on CPU or GPU. Loss is the mean negative
log-likelihood of the policy's tokens only; system, user and tool tokens are context.

Teacher turns are always re-rendered (:func:`~sleuth.train.render.rerendered_turn_tokens`):
token ids a teacher recorded belong to the teacher's vocabulary, not necessarily the student's.

The run resumes: finished teacher trajectories are not re-run, and training restarts from the
last epoch checkpoint.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from pydantic import BaseModel

from sleuth.errors import ConfigError
from sleuth.harness.loop import HarnessConfig
from sleuth.harness.policy import Policy, PolicyOutput
from sleuth.harness.trajectory import Trajectory, load_trajectory
from sleuth.io import atomic_write_text
from sleuth.policies.chatml import render_ids as render_prompt_ids
from sleuth.policies.manifest import PolicyManifest, write_manifest
from sleuth.policies.spec import PolicyFactory, PolicyOptions, build_policy, parse_policy_spec
from sleuth.tasks.schema import Task
from sleuth.tools.base import Tools
from sleuth.train.checkpoint import latest_checkpoint, restore_training_state, save_checkpoint
from sleuth.train.model import (
    StudentConfig,
    build_optimizer,
    clip_and_step,
    load_student,
    load_tokenizer,
    save_student,
)
from sleuth.train.render import fit_to_length, rerendered_turn_tokens
from sleuth.train.rollout import RolloutJob, collect_rollouts
from sleuth.train.runlog import log_step, plot_log, truncate_log
from sleuth.train.sequences import (
    TrainSequence,
    collate_sequences,
    sequence_logprobs,
    turns_to_sequences,
)
from sleuth.train.sft_filter import (
    SFTFilterConfig,
    SFTFilterReport,
    candidate_from_run,
    filter_for_sft,
)


@dataclass(frozen=True)
class SFTConfig:
    """Everything an SFT run needs besides the tasks, the tools and the teacher."""

    student: StudentConfig = field(default_factory=StudentConfig)
    """The model to fine-tune and how (LoRA or full, device, dtype)."""
    out_dir: str = "runs/sft"
    """Teacher trajectories, checkpoints, the log, the report and the final model go here."""

    # ---- optimisation
    lr: float = 1e-4
    """AdamW learning rate (1e-4 suits LoRA; use ~1e-5 for full fine-tuning)."""
    epochs: int = 2
    """Passes over the kept sequences."""
    batch_size: int = 8
    """Sequences per optimiser step."""
    micro_batch_size: int = 1
    """Sequences per forward pass; gradients accumulate up to ``batch_size``."""
    max_seq_len: int = 4096
    """Longer sequences are cut to their first ``max_seq_len`` tokens (later targets lost)."""
    weight_decay: float = 0.0
    grad_clip: float | None = 1.0
    """Clip the gradient norm to this (None: no clipping)."""
    loss_probe: int | None = 64
    """``loss_before``/``loss_after`` are the NLL of this many kept sequences, evenly spaced (None:
    all of them); each probe is one forward pass over them, which on a CPU costs a third of an
    epoch when it covers everything."""
    seed: int = 0
    """Seeds teacher sampling, the filter's draws and the batch order."""

    # ---- teacher data
    rollouts_per_task: int = 1
    """Teacher rollouts per task (several let the filter pick one high-recall rollout)."""
    rollout_workers: int = 4
    """Teacher rollouts run at once (threads)."""
    harness: HarnessConfig = field(default_factory=HarnessConfig)
    """Budget and turn limits of the teacher's runs."""
    filter: SFTFilterConfig = field(default_factory=SFTFilterConfig)
    """The report's keep/drop rules."""

    def __post_init__(self) -> None:
        if self.batch_size < 1 or self.micro_batch_size < 1:
            raise ConfigError("batch_size and micro_batch_size must be at least 1")
        if self.batch_size % self.micro_batch_size:
            raise ConfigError(
                f"batch_size ({self.batch_size}) must be a multiple of micro_batch_size "
                f"({self.micro_batch_size})"
            )
        if self.epochs < 1 or self.rollouts_per_task < 1:
            raise ConfigError("epochs and rollouts_per_task must be at least 1")
        if self.max_seq_len < 2:
            raise ConfigError(f"max_seq_len ({self.max_seq_len}) must be at least 2")
        if self.loss_probe is not None and self.loss_probe < 1:
            raise ConfigError(f"loss_probe ({self.loss_probe}) must be at least 1, or None: all")


class SFTReport(BaseModel):
    """What an SFT run did: the filter's counts, the data, the losses and where the model is."""

    filter: SFTFilterReport
    sequences: int
    truncated_sequences: int
    dropped_sequences: int
    target_tokens: int
    steps: int
    loss_before: float | None
    loss_after: float | None
    wall_time_s: float
    model_dir: str


# ---------------------------------------------------------------- teacher data


class StudentBudget:
    """A teacher that counts tokens with the student's tokenizer and chat template.

    The harness sizes requests, tool results and the budget messages by the policy's own counts;
    counted as the student, the teacher's runs fit the budget the student trains and runs under.
    """

    def __init__(self, teacher: Policy, tokenizer: Any):
        self.teacher = teacher
        self.tokenizer = tokenizer
        self.name = str(getattr(teacher, "name", type(teacher).__name__))

    def count_tokens(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> int:
        return len(render_prompt_ids(self.tokenizer, messages, tools))

    def generate(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], max_tokens: int
    ) -> PolicyOutput:
        return self.teacher.generate(messages, tools, max_tokens)


def build_teacher(spec: str, tools: Tools, **options: Any) -> tuple[Tools, PolicyFactory]:
    """The tools the teacher searches and seed -> teacher policy, from a policy spec as
    ``sleuth train sft --teacher`` takes it.

    Any spec of :mod:`sleuth.policies.spec` (``heuristic``, whose knobs are ``options``, bound to
    ``tools`` with its ranker; ``openai:MODEL@URL``; ``local:PATH``, loaded once and sampled at
    temperature 1 with one seeded sampler per run). Built now, so a bad spec fails before any
    rollout thread starts. The student must later search the returned tools, so that it sees
    what its teacher saw. The heuristic teacher's justifications name the rank only, unless
    ``quote_evidence=True`` is given: quoted sentences would teach answers longer than a
    student's reply cap.
    """
    parsed = parse_policy_spec(spec)
    sampled = 1.0 if parsed.kind == "local" else None
    agent = {"quote_evidence": False, **options}
    return build_policy(parsed, PolicyOptions(agent=agent, temperature=sampled)).for_tools(tools)


def teacher_jobs(
    tasks: Sequence[Task], rollouts_per_task: int, folder: Path, seed: int
) -> list[RolloutJob]:
    """One job per (task, rollout), each writing its trajectory to a stable file name."""
    jobs: list[RolloutJob] = []
    for t_index, task in enumerate(tasks):
        key = hashlib.sha1(task.id.encode()).hexdigest()[:12]
        for k in range(rollouts_per_task):
            path = folder / f"{key}_{k}.jsonl"
            jobs.append(RolloutJob(task, seed + t_index * rollouts_per_task + k, path))
    return jobs


def _finished(path: Path | None) -> Trajectory | None:
    if path is None or not path.exists():
        return None
    trajectory = load_trajectory(path)
    return trajectory if trajectory.stop_reason is not None else None


def generate_teacher_trajectories(
    make_teacher: PolicyFactory,
    tools: Tools,
    tasks: Sequence[Task],
    config: SFTConfig,
) -> list[tuple[Task, Trajectory]]:
    """Run the teacher on every task ``rollouts_per_task`` times; finished runs are reused."""
    jobs = teacher_jobs(
        tasks, config.rollouts_per_task, Path(config.out_dir) / "teacher", config.seed
    )
    done = {job.trajectory_path: _finished(job.trajectory_path) for job in jobs}
    todo = [job for job in jobs if done[job.trajectory_path] is None]
    fresh = collect_rollouts(make_teacher, tools, config.harness, todo, config.rollout_workers)
    done.update((job.trajectory_path, t) for job, t in zip(todo, fresh, strict=True))
    return [(job.task, done[job.trajectory_path]) for job in jobs]  # type: ignore[misc]


# ---------------------------------------------------------------- sequences


def sft_sequences(trajectories: Sequence[Trajectory], tokenizer: Any) -> list[TrainSequence]:
    """Every kept trajectory re-rendered with the student's template, cut at prunes."""
    return [
        seq
        for t in trajectories
        for seq in turns_to_sequences(rerendered_turn_tokens(t, tokenizer))
    ]


# ---------------------------------------------------------------- loss and training


def pad_id(tokenizer: Any) -> int:
    for value in (tokenizer.pad_token_id, tokenizer.eos_token_id):
        if value is not None:
            return int(value)
    return 0


def nll_sum(
    model: torch.nn.Module, sequences: Sequence[TrainSequence], pad: int, device: str
) -> tuple[torch.Tensor, int]:
    """Summed negative log-likelihood of the target tokens, and how many there are."""
    batch = collate_sequences(sequences, pad_id=pad)
    logprobs_BT, _ = sequence_logprobs(
        model, batch.input_ids.to(device), batch.attention_mask.to(device)
    )
    mask_BT = batch.loss_mask.to(device)
    mask_BT[:, 0] = False  # no context at position 0
    return -torch.where(mask_BT, logprobs_BT, 0.0).sum(), int(mask_BT.sum())


@torch.no_grad()
def mean_nll(
    model: torch.nn.Module,
    sequences: Sequence[TrainSequence],
    pad: int,
    device: str,
    micro_batch_size: int = 1,
) -> float | None:
    """Mean NLL per target token over ``sequences``; None when there is no target."""
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    for i in range(0, len(sequences), micro_batch_size):
        loss, n = nll_sum(model, sequences[i : i + micro_batch_size], pad, device)
        total, count = total + float(loss), count + n
    model.train(was_training)
    return total / count if count else None


def _batches(sequences: Sequence[TrainSequence], size: int, seed: int) -> list[list[TrainSequence]]:
    order = list(sequences)
    random.Random(seed).shuffle(order)
    return [order[i : i + size] for i in range(0, len(order), size)]


def sft_step(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    batch: Sequence[TrainSequence],
    config: SFTConfig,
    pad: int,
) -> dict[str, float]:
    """One optimiser step: token-mean NLL over the batch, accumulated over micro-batches."""
    device = config.student.device
    n_targets = sum(sum(s.loss_mask[1:]) for s in batch)
    total = 0.0
    for i in range(0, len(batch), config.micro_batch_size):
        loss_sum, _ = nll_sum(model, batch[i : i + config.micro_batch_size], pad, device)
        loss = loss_sum / max(n_targets, 1)  # token mean over the whole batch
        loss.backward()  # type: ignore[no-untyped-call]  # torch leaves it unannotated
        total += float(loss_sum.detach())
    grad_norm = clip_and_step(model, optimizer, config.grad_clip)
    return {"loss": total / max(n_targets, 1), "grad_norm": grad_norm, "tokens": float(n_targets)}


def train_sft(
    model: torch.nn.Module,
    tokenizer: Any,
    sequences: Sequence[TrainSequence],
    config: SFTConfig,
    extra_state: dict[str, Any] | None = None,
) -> int:
    """Fine-tune on ``sequences`` for ``config.epochs``, checkpointing after every epoch.

    Resumes from the last epoch checkpoint under ``out_dir`` (the model passed in must already
    hold its weights: ``load_student(..., resume_from=checkpoint.model_dir)``); returns the
    optimiser steps of the whole run. ``extra_state`` is stored in every checkpoint.
    """
    out = Path(config.out_dir)
    log_path = out / "sft_log.jsonl"
    optimizer = build_optimizer(model, config.lr, config.weight_decay)
    start_epoch, step = 0, 0
    checkpoint = latest_checkpoint(out / "checkpoints")
    if checkpoint is not None:
        restore_training_state(checkpoint, optimizer)
        start_epoch, step = checkpoint.step, int(checkpoint.state["global_step"])
    truncate_log(log_path, step)
    pad = pad_id(tokenizer)
    model.train()
    for epoch in range(start_epoch, config.epochs):
        for batch in _batches(sequences, config.batch_size, config.seed + epoch):
            started = time.perf_counter()
            stats = sft_step(model, optimizer, batch, config, pad)
            record = {"step": step, "epoch": epoch, **{f"sft/{k}": v for k, v in stats.items()}}
            log_step(log_path, record | {"time/step_s": time.perf_counter() - started})
            step += 1
        state = {**(extra_state or {}), "global_step": step, "config": config_dict(config)}
        save_checkpoint(out / "checkpoints", epoch + 1, model, tokenizer, optimizer, state)
    plot_log(log_path, out / "sft_log.png", keys=("sft/loss", "sft/grad_norm", "time/step_s"))
    return step


# ---------------------------------------------------------------- the whole run


def sft_from_trajectories(config: SFTConfig, runs: Sequence[tuple[Task, Trajectory]]) -> SFTReport:
    """Filter scored teacher runs, render them for the student and fine-tune it."""
    started = time.perf_counter()
    result = filter_for_sft([candidate_from_run(t, task) for task, t in runs], config.filter)
    out = Path(config.out_dir)
    checkpoint = latest_checkpoint(out / "checkpoints")
    resume = checkpoint.model_dir if checkpoint is not None else None
    model, tokenizer = load_student(config.student, resume_from=resume)
    sequences, truncated, dropped = fit_to_length(
        sft_sequences(result.kept, tokenizer), config.max_seq_len
    )
    pad, device = pad_id(tokenizer), config.student.device
    stride = max(1, len(sequences) // (config.loss_probe or len(sequences) or 1))
    probe = sequences[::stride][: config.loss_probe]
    if checkpoint is None:
        before = mean_nll(model, probe, pad, device, config.micro_batch_size)
    else:  # the model now holds trained weights; the first run measured the start
        before = checkpoint.state.get("loss_before")
    extra = {"loss_before": before}
    steps = train_sft(model, tokenizer, sequences, config, extra) if sequences else 0
    after = mean_nll(model, probe, pad, device, config.micro_batch_size)
    model_dir = save_student(model, tokenizer, out / "model")
    report = SFTReport(
        filter=result.report,
        sequences=len(sequences),
        truncated_sequences=truncated,
        dropped_sequences=dropped,
        target_tokens=sum(sum(s.loss_mask[1:]) for s in sequences),
        steps=steps,
        loss_before=before,
        loss_after=after,
        wall_time_s=time.perf_counter() - started,
        model_dir=str(model_dir),
    )
    atomic_write_text(out / "sft_report.json", report.model_dump_json(indent=2))
    return report


def training_manifest(
    harness: HarnessConfig,
    tools: Tools,
    student: StudentConfig,
    tasks: Sequence[Task],
    phase: str,
) -> PolicyManifest:
    """The manifest of a model trained under ``harness`` on ``tools`` (their search settings
    and whether a learned ranker ordered search), over ``student``'s base model."""
    from sleuth.tools.toolbox import Toolbox, ToolConfig

    search = tools.config if isinstance(tools, Toolbox) else ToolConfig()
    ranked = isinstance(tools, Toolbox) and tools.ranker is not None
    return PolicyManifest.of_training(
        harness,
        search_max_chunks=search.search_max_chunks,
        ranker=ranked,
        base_model=student.path,
        task_ids=[t.id for t in tasks],
        phase=phase,
    )


def run_sft(
    config: SFTConfig,
    tasks: Sequence[Task],
    tools: Tools,
    make_teacher: PolicyFactory,
    manifest: PolicyManifest | None = None,
) -> SFTReport:
    """``sleuth train sft``: teacher rollouts, the report's filter, then fine-tuning.

    Args:
        config: the run's settings.
        tasks: training tasks (SPEC §8 records).
        tools: the retrieval tools over the training index (a ``Toolbox``).
        make_teacher: seed -> the teacher policy of one rollout (``lambda seed: policy`` to
            share one thread-safe policy).
        manifest: what the model's ``sleuth_policy.json`` says (default: the teacher's harness
            and tools, the base model and the task ids: :func:`training_manifest`).

    Returns:
        The report, also written to ``<out_dir>/sft_report.json``; the model is in
        ``<out_dir>/model`` (an adapter over ``config.student.path`` under LoRA) with its
        manifest, so ``--policy local:BASE --adapter <out_dir>/model`` runs as it trained.

    Example::

        cfg = SFTConfig(student=StudentConfig(path=str(smollm2_gguf_path())), out_dir="runs/sft")
        report = run_sft(cfg, load_tasks("train.jsonl"), Toolbox(Index.open("idx")),
                         lambda seed: OpenAIChatPolicy("teacher", base_url=URL))
    """
    tokenizer = load_tokenizer(config.student)

    def counted_teacher(seed: int) -> Policy:
        return StudentBudget(make_teacher(seed), tokenizer)

    runs = generate_teacher_trajectories(counted_teacher, tools, tasks, config)
    report = sft_from_trajectories(config, runs)
    trained = manifest or training_manifest(config.harness, tools, config.student, tasks, "sft")
    write_manifest(report.model_dir, trained)
    return report


def config_dict(config: Any) -> dict[str, Any]:
    """A JSON-ready dict of a (nested) dataclass config holding pydantic models."""
    plain: dict[str, Any] = json.loads(json.dumps(asdict(config), default=_jsonable))
    return plain


def _jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return str(value)


__all__ = [
    "SFTConfig",
    "SFTReport",
    "StudentBudget",
    "config_dict",
    "generate_teacher_trajectories",
    "mean_nll",
    "run_sft",
    "sft_from_trajectories",
    "sft_sequences",
    "build_teacher",
    "train_sft",
    "training_manifest",
]
