"""CISPO reinforcement learning (SPEC §6; report §4.2), read top to bottom.

Each step:

1. **Schedule.** The step's epoch sets F_β's β (annealed 4 -> 2 across epochs) and the curriculum
   its highest hop level (phases of rising difficulty).
2. **Rollouts.** ``queries_per_step`` tasks are drawn from those allowed, and each is run
   ``rollouts_per_query`` (G) times through the harness, concurrently, by a sampling policy that
   records token ids and behaviour log-probs (the rollout engine: local transformers now, a vLLM
   server for scale; :mod:`sleuth.train.rollout`).
3. **Reward and advantages.** Every trajectory is scored with :func:`sleuth.reward.compute_reward`
   at this step's β; advantages are normalised within each group of G, and groups whose rewards
   are equal within ``zero_variance_tol`` are dropped (they carry no signal).
4. **Update.** The trajectories become sequences on their sampled ids
   (:mod:`sleuth.train.render`); they are shuffled and split into ``substeps`` minibatches, one
   optimiser step each, with :func:`sleuth.train.cispo_loss`. Micro-batches accumulate with
   ``token_sum`` on pre-scaled advantages, so the chosen aggregation holds over the minibatch.
5. **Log and checkpoint.** Every reward term, metric and training statistic goes to
   ``metrics.jsonl`` (one line per step; plots in ``metrics.png``), each rollout to
   ``rollouts.jsonl``; the adapter or model, optimiser, RNG states, step and config are
   checkpointed atomically. A restarted run resumes from the last checkpoint and first drops
   log lines of steps that checkpoint does not cover, so no step is logged twice.

Sampling is deterministic given ``seed``: the tasks of step s and the seed of every rollout are
functions of (seed, s), so a resumed run redoes a lost step exactly.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import torch

from sleuth.errors import ConfigError, InputError
from sleuth.harness.budget import BudgetConfig
from sleuth.harness.loop import HarnessConfig
from sleuth.harness.trajectory import Trajectory
from sleuth.metrics import Metrics, aggregate, compute_metrics
from sleuth.policies.spec import LOCAL_ENGINES
from sleuth.reward import RewardConfig, RewardTerms, compute_reward
from sleuth.tasks.schema import Task
from sleuth.tools.base import Tools
from sleuth.train.advantages import (
    BETA_END,
    BETA_START,
    ZERO_VARIANCE_TOL,
    beta_schedule,
    curriculum_max_hops,
    group_advantages,
    is_constant_group,
)
from sleuth.train.checkpoint import latest_checkpoint, restore_training_state, save_checkpoint
from sleuth.train.cispo import CISPO_W_MAX, CISPO_W_MIN, Aggregation, cispo_loss
from sleuth.train.distributed import DataParallel, setup_data_parallel
from sleuth.train.model import StudentConfig, build_optimizer, clip_and_step, load_student
from sleuth.train.render import clip_sequence, has_targets, recorded_turn_tokens
from sleuth.train.rollout import LocalRolloutEngine, RolloutEngine, RolloutJob, collect_rollouts
from sleuth.train.runlog import log_step, plot_log, read_log, truncate_log
from sleuth.train.sequences import (
    TrainSequence,
    collate_sequences,
    sequence_logprobs,
    turns_to_sequences,
)
from sleuth.train.sft import config_dict, pad_id

QUERIES_PER_STEP = 128  # report §4.2
ROLLOUTS_PER_QUERY = 8  # report §4.2: 8 environments per query, 1,024 trajectories per step
SUBSTEPS = 4  # report §4.2: 4 gradient substeps per step
EPOCHS = 5  # report §4.2: 5 epochs (~300 possible steps, converged near 230)
LEARNING_RATE = 1e-5  # Harness-1 (the report does not say)

EngineFactory = Callable[[Any, Any], RolloutEngine]
"""(model, tokenizer) -> the rollout engine of a run."""


@dataclass(frozen=True)
class RLConfig:
    """Every setting of a CISPO run; defaults follow the report (SPEC §6) where it gives them."""

    student: StudentConfig = field(default_factory=StudentConfig)
    """The policy being trained (base path, SFT adapter to continue, LoRA settings, device)."""
    out_dir: str = "runs/rl"
    """Log, plots, checkpoints and (optionally) trajectories go here."""

    # ---- batch shape (report §4.2)
    queries_per_step: int = QUERIES_PER_STEP
    """Tasks drawn per step."""
    rollouts_per_query: int = ROLLOUTS_PER_QUERY
    """G: rollouts per task; advantages are normalised within these."""
    substeps: int = SUBSTEPS
    """Optimiser steps per RL step; the step's sequences are split into this many minibatches."""
    micro_batch_size: int = 4
    """Sequences per forward pass (memory only; results do not depend on it)."""
    epochs: int = EPOCHS
    """Passes over the training tasks; sets the number of steps and the β schedule."""
    max_steps: int | None = None
    """Stop after this many steps (β and curriculum then spread over these steps)."""

    # ---- loss (SPEC §6, peers.md A.7)
    lr: float = LEARNING_RATE
    """AdamW learning rate."""
    weight_decay: float = 0.0
    grad_clip: float | None = 1.0
    """Gradient-norm clip per substep (None: off)."""
    w_min: float = CISPO_W_MIN
    """Absolute lower bound of the importance weight."""
    w_max: float = CISPO_W_MAX
    """Absolute upper bound of the importance weight."""
    aggregation: Aggregation = "token_mean"
    """``token_mean`` (default), ``token_sum`` or ``prompt_mean`` over each minibatch."""
    kl_coef: float = 0.0
    """KL penalty to the base model (LoRA only: the adapter is switched off for the reference)."""
    anchor: Literal["sampler", "recompute"] = "sampler"
    """Behaviour log-probs: the sampler's own (Tinker), or recomputed before the first substep
    from the weights that sampled (SkyRL's "old"). Identical up to float error for the local
    engine; they differ for a vLLM server (its numerics are then part of the ratio)."""
    normalize_std: bool = True
    """Divide group-centred rewards by the group std (GRPO); False keeps centring only."""
    zero_variance_tol: float = ZERO_VARIANCE_TOL
    """Groups whose rewards span at most this are dropped (rewards are continuous). A negative
    value keeps every group; a constant one then trains with advantage 0 (a no-op update)."""
    max_seq_len: int | None = None
    """Cut longer training sequences to their first this-many tokens (None: no limit)."""
    autocast_bf16: bool = False
    """Run the trainer's forward and backward under bfloat16 autocast (about 1.45x faster on
    2 CPU cores; log-probs keep fewer digits, which ``sampler_mismatch`` shows)."""

    # ---- reward and curriculum (report §4.3)
    reward: RewardConfig = field(default_factory=RewardConfig)
    """Reward weights; its β is replaced by the schedule each step."""
    beta_start: float = BETA_START
    beta_end: float = BETA_END
    curriculum_phases: tuple[int, ...] = (1, 2, 3)
    """Highest hop level of each equal phase of the run."""

    # ---- rollouts
    harness: HarnessConfig = field(default_factory=HarnessConfig)
    """Budget, turn and reply limits of every rollout."""
    temperature: float = 1.0
    """Sampling temperature; the trainer's log-probs are taken at it too (log π_T, as the
    ``ct2`` engine records them). ``LocalHFPolicy`` records log-probs at 1, so keep 1.0 with the
    ``transformers`` engine."""
    rollout_engine: Literal["transformers", "ct2"] = "transformers"
    """In-process sampler when no engine factory is given: ``transformers`` (shares the
    trainer's weights) or ``ct2`` (CTranslate2 on CPU, several times faster; the weights are
    converted and pushed to it before each step: :mod:`sleuth.train.engine_ct2`)."""
    rollout_compute_type: str = "float32"
    """CTranslate2 compute type of the ``ct2`` engine: ``float32`` (closest to the trainer),
    ``int8_float32`` or ``int8`` (about 1.6x faster on 2 cores; the mismatch it adds is logged
    as ``sampler_mismatch`` and absorbed by the CISPO ratio)."""
    rollout_workers: int = 8
    """Rollouts run at once (threads)."""
    save_trajectories: bool = False
    """Write every rollout's trajectory JSONL under ``out_dir/trajectories/step_N``."""

    # ---- bookkeeping
    seed: int = 0
    checkpoint_every: int = 1
    """Checkpoint every this many steps (and after the last)."""
    keep_checkpoints: int = 2
    plot_every: int = 1
    data_parallel: bool = False
    """Wrap the model with accelerate for DDP (launch with ``accelerate launch``/``torchrun``)."""

    def __post_init__(self) -> None:
        positive = {
            "queries_per_step": self.queries_per_step,
            "substeps": self.substeps,
            "micro_batch_size": self.micro_batch_size,
            "epochs": self.epochs,
            "rollout_workers": self.rollout_workers,
            "checkpoint_every": self.checkpoint_every,
        }
        for name, value in positive.items():
            if value < 1:
                raise ConfigError(f"{name} ({value}) must be at least 1")
        if self.rollouts_per_query < 2:
            raise ConfigError(
                f"rollouts_per_query ({self.rollouts_per_query}) must be at least 2: advantages "
                "compare the rollouts of one query"
            )
        if not 0.0 <= self.w_min <= self.w_max:
            raise ConfigError(f"need 0 <= w_min <= w_max, got [{self.w_min}, {self.w_max}]")
        if self.kl_coef > 0 and not self.student.lora:
            raise ConfigError("kl_coef > 0 needs LoRA (the reference is the base without adapter)")
        if self.rollout_engine not in LOCAL_ENGINES:
            raise ConfigError(
                f"rollout engine {self.rollout_engine!r} unknown; use one of {LOCAL_ENGINES}"
            )
        if self.kl_coef > 0 and self.aggregation == "prompt_mean":
            raise ConfigError("kl_coef > 0 supports token_mean or token_sum aggregation only")

    @classmethod
    def cpu_small(cls, model_path: str, out_dir: str = "runs/rl-cpu", **overrides: Any) -> RLConfig:
        """A run that fits a 2-core laptop: 4 queries x 4 rollouts, short budget and replies.

        Each value is cut from the report's for time only: a step is ~16 rollouts instead of
        1,024, contexts of 8k instead of 32k tokens, 6 turns instead of 128.
        """
        harness = HarnessConfig(
            budget=BudgetConfig(total=8192, per_call_tokens=1024, reply_reserve=512, max_turns=6),
            max_reply_tokens=160,
            max_documents=10,
        )
        settings: dict[str, Any] = {
            "student": StudentConfig(path=model_path, lora_r=16, lora_alpha=32),
            "out_dir": out_dir,
            "queries_per_step": 4,
            "rollouts_per_query": 4,
            "substeps": 2,
            "micro_batch_size": 1,
            "epochs": 2,
            "max_steps": 8,
            "lr": 5e-5,
            "harness": harness,
            "rollout_workers": 2,
            "max_seq_len": 4096,
        }
        return cls(**(settings | overrides))


@dataclass(frozen=True)
class StepPlan:
    """What the schedule fixes for one step."""

    step: int
    epoch: int
    beta: float
    max_hops: int


@dataclass(frozen=True)
class Rollout:
    """One scored trajectory of a group."""

    task: Task
    group: int
    trajectory: Trajectory
    reward: RewardTerms
    metrics: Metrics


@dataclass(frozen=True)
class TrainItem:
    """One training sequence with the advantage of its rollout and its group."""

    sequence: TrainSequence
    advantage: float
    group: int


# ---------------------------------------------------------------- schedule and sampling


def total_steps(config: RLConfig, n_tasks: int) -> int:
    per_epoch = max(math.ceil(n_tasks / config.queries_per_step), 1)
    natural = config.epochs * per_epoch
    return min(natural, config.max_steps) if config.max_steps is not None else natural


def plan_step(step: int, n_steps: int, config: RLConfig) -> StepPlan:
    """β and the hop ceiling of a step; epochs are equal shares of the run."""
    epoch = min(step * config.epochs // n_steps, config.epochs - 1)
    beta = beta_schedule(epoch, config.epochs, config.beta_start, config.beta_end)
    max_hops = curriculum_max_hops(step, n_steps, config.curriculum_phases)
    return StepPlan(step, epoch, beta, max_hops)


def sample_tasks(tasks: Sequence[Task], plan: StepPlan, count: int, seed: int) -> list[Task]:
    """``count`` tasks of at most ``plan.max_hops`` hops (the easiest level when none qualify).

    Each step draws afresh, fixed by (seed, step); within a step a task repeats only when the
    pool holds fewer than ``count``."""
    pool = [t for t in tasks if t.hops <= plan.max_hops]
    if not pool:
        easiest = min(t.hops for t in tasks)
        pool = [t for t in tasks if t.hops == easiest]
    rng = random.Random(f"{seed}:tasks:{plan.step}")
    drawn: list[Task] = []
    while len(drawn) < count:
        drawn += rng.sample(pool, len(pool))
    return drawn[:count]


def rollout_seed(seed: int, step: int, index: int) -> int:
    """A distinct, reproducible sampler seed for rollout ``index`` of ``step``."""
    return random.Random(f"{seed}:rollout:{step}:{index}").getrandbits(31)


# ---------------------------------------------------------------- rollouts and reward


def collect_groups(
    engine: RolloutEngine,
    tools: Tools,
    tasks_P: Sequence[Task],
    plan: StepPlan,
    config: RLConfig,
) -> list[list[Trajectory]]:
    """G trajectories per task, all run concurrently; grouped by task."""
    G = config.rollouts_per_query
    folder = Path(config.out_dir) / "trajectories" / f"step_{plan.step:06d}"
    jobs = [
        RolloutJob(
            task,
            rollout_seed(config.seed, plan.step, p * G + g),
            folder / f"{p:04d}_{g:02d}.jsonl" if config.save_trajectories else None,
        )
        for p, task in enumerate(tasks_P)
        for g in range(G)
    ]
    trajectories = collect_rollouts(
        engine.policy, tools, config.harness, jobs, config.rollout_workers
    )
    return [trajectories[p * G : (p + 1) * G] for p in range(len(tasks_P))]


def score_groups(
    groups_P: Sequence[Sequence[Trajectory]], tasks_P: Sequence[Task], reward: RewardConfig
) -> list[list[Rollout]]:
    """Reward terms and metrics of every trajectory, at the reward config's β."""
    scored_P = []
    for p, (group, task) in enumerate(zip(groups_P, tasks_P, strict=True)):
        scored = []
        for trajectory in group:
            summary = trajectory.summary()
            terms = compute_reward(summary, task, reward)
            metrics = compute_metrics(summary, task, beta=reward.beta)
            scored.append(Rollout(task, p, trajectory, terms, metrics))
        scored_P.append(scored)
    return scored_P


def group_items(
    scored_P: Sequence[Sequence[Rollout]], config: RLConfig
) -> tuple[list[TrainItem], list[list[float | None]], int]:
    """Training items of the groups that vary, with each rollout's advantage (None: dropped).

    Returns:
        ``(items, advantages_P_G, n_truncated)``.
    """
    items: list[TrainItem] = []
    advantages_P: list[list[float | None]] = []
    truncated = 0
    for p, group in enumerate(scored_P):
        rewards_G = [r.reward.total for r in group]
        if is_constant_group(rewards_G, config.zero_variance_tol):
            advantages_P.append([None] * len(group))
            continue
        advantages_G = group_advantages(rewards_G, normalize_std=config.normalize_std)
        advantages_P.append(list(advantages_G))
        for rollout, advantage in zip(group, advantages_G, strict=True):
            for seq in turns_to_sequences(recorded_turn_tokens(rollout.trajectory)):
                if config.max_seq_len is not None and len(seq.input_ids) > config.max_seq_len:
                    truncated += 1
                    seq = clip_sequence(seq, config.max_seq_len)
                if has_targets(seq):
                    items.append(TrainItem(seq, advantage, p))
    return items, advantages_P, truncated


# ---------------------------------------------------------------- the CISPO update


def minibatches(items: Sequence[TrainItem], k: int, seed: int) -> list[list[TrainItem]]:
    """Shuffle and split into ``k`` near-equal minibatches (fewer when there are fewer items)."""
    order = list(items)
    random.Random(seed).shuffle(order)
    k = min(k, len(order))
    size, extra = divmod(len(order), k) if k else (0, 0)
    out, start = [], 0
    for i in range(k):
        end = start + size + (i < extra)
        out.append(order[start:end])
        start = end
    return out


def advantage_scales(items: Sequence[TrainItem], aggregation: str) -> list[float]:
    """Per-item factors that turn a ``token_sum`` over the minibatch into ``aggregation``.

    The loss is linear in the advantage, so scaling it reproduces a normaliser exactly however
    the minibatch is cut into micro-batches: ``token_mean`` divides by the minibatch's target
    tokens, ``prompt_mean`` by the group's tokens times the number of groups.
    """
    tokens = [_targets(it.sequence) for it in items]
    if aggregation == "token_sum":
        return [1.0] * len(items)
    if aggregation == "token_mean":
        return [1.0 / max(sum(tokens), 1)] * len(items)
    per_group: Counter[int] = Counter()
    for it, n in zip(items, tokens, strict=True):
        per_group[it.group] += n
    n_groups = len(per_group)
    return [1.0 / (n_groups * max(per_group[it.group], 1)) for it in items]


def _targets(sequence: TrainSequence) -> int:
    return sum(sequence.loss_mask[1:])


def _forward(model: Any, items: Sequence[TrainItem], pad: int, config: RLConfig):
    device = config.student.device
    batch = collate_sequences([it.sequence for it in items], pad_id=pad)
    autocast = torch.autocast(
        device.split(":")[0], dtype=torch.bfloat16, enabled=config.autocast_bf16
    )
    with autocast:
        logprobs_BT, entropy_BT = sequence_logprobs(
            model, batch.input_ids.to(device), batch.attention_mask.to(device), config.temperature
        )
    mask_BT = batch.loss_mask.to(device)
    mask_BT[:, 0] = False
    return batch, logprobs_BT, entropy_BT, mask_BT


def _gap(logprobs_BT: torch.Tensor, behaviour_BT: torch.Tensor, mask_BT: torch.Tensor) -> Counter:
    """Sum of |log π_train − log π_sample| over target tokens, and their count: the
    sampler/trainer mismatch (engine numerics, quantisation) that the CISPO ratio absorbs."""
    gap_BT = torch.where(mask_BT, (logprobs_BT.detach() - behaviour_BT).abs(), 0.0)
    return Counter({"sum": float(gap_BT.sum()), "n": float(mask_BT.sum())})


@torch.no_grad()
def recompute_behaviour(
    model: Any, items: Sequence[TrainItem], pad: int, config: RLConfig
) -> tuple[list[TrainItem], Counter]:
    """Replace sampler log-probs with the current weights' (the ``recompute`` anchor); also
    returns the gap between the two (:func:`_gap`)."""
    out: list[TrainItem] = []
    gap: Counter = Counter()
    device, micro = config.student.device, config.micro_batch_size
    for i in range(0, len(items), micro):
        chunk = items[i : i + micro]
        batch, logprobs_BT, _, mask_BT = _forward(model, chunk, pad, config)
        gap += _gap(logprobs_BT, batch.behaviour_logprobs.to(device), mask_BT)
        for b, it in enumerate(chunk):
            n = len(it.sequence.input_ids)
            new = torch.where(mask_BT[b, :n], logprobs_BT[b, :n], 0.0).tolist()
            out.append(replace(it, sequence=replace(it.sequence, behaviour_logprobs=tuple(new))))
    return out, gap


def _reference_logprobs(model: Any, batch: Any, device: str, temperature: float) -> torch.Tensor:
    with torch.no_grad(), model.disable_adapter():
        ref_BT, _ = sequence_logprobs(
            model, batch.input_ids.to(device), batch.attention_mask.to(device), temperature
        )
    return ref_BT


def cispo_update(
    model: Any,
    optimizer: torch.optim.Optimizer,
    items: Sequence[TrainItem],
    config: RLConfig,
    pad: int,
    seed: int,
    dp: DataParallel | None = None,
) -> dict[str, float]:
    """``config.substeps`` optimiser steps of CISPO over ``items``; token-weighted statistics.

    ``sampler_mismatch`` is the mean |log π_train − log π_sample| on sampled tokens under the
    weights that sampled: over every item when recomputing the anchor, else over the first
    substep's minibatch (before any optimiser step; a random share of the step's tokens).
    """
    dp = dp or DataParallel()
    device, temperature = config.student.device, config.temperature
    gap: Counter = Counter()
    if config.anchor == "recompute":
        items, gap = recompute_behaviour(model, items, pad, config)
    totals: dict[str, float] = {}
    first: dict[str, float] = {}
    norms: list[float] = []
    model.train()
    for k, minibatch in enumerate(minibatches(items, config.substeps, seed)):
        scales = advantage_scales(minibatch, config.aggregation)
        kl_scale = scales[0]  # uniform unless prompt_mean, which RLConfig bars with KL
        sub: dict[str, float] = {}
        for i in range(0, len(minibatch), config.micro_batch_size):
            micro = minibatch[i : i + config.micro_batch_size]
            batch, logprobs_BT, entropy_BT, mask_BT = _forward(model, micro, pad, config)
            behaviour_BT = batch.behaviour_logprobs.to(device)
            if k == 0 and config.anchor == "sampler":
                gap += _gap(logprobs_BT, behaviour_BT, mask_BT)
            micro_scales = scales[i : i + len(micro)]
            adv_B = torch.tensor(
                [it.advantage * s for it, s in zip(micro, micro_scales, strict=True)],
                device=device,
            )
            ref_BT = None
            if config.kl_coef > 0:
                ref_BT = _reference_logprobs(dp.unwrap(model), batch, device, temperature)
            loss, stats = cispo_loss(
                logprobs_BT,
                behaviour_BT,
                adv_B,
                mask_BT,
                config.w_min,
                config.w_max,
                "token_sum",
                ref_logprobs=ref_BT,
                kl_coef=config.kl_coef * kl_scale,
                entropy=entropy_BT,
            )
            dp.backward(loss)
            _accumulate(sub, stats | {"loss": float(loss.detach())})
        norms.append(clip_and_step(model, optimizer, config.grad_clip))
        _accumulate(totals, sub)
        if k == 0:
            first = _means(sub, substeps=1)
    out = _means(totals, substeps=len(norms))
    out["ratio_mean_substep0"] = first.get("ratio_mean", 0.0)
    out["ratio_max_substep0"] = first.get("ratio_max", 0.0)
    out["grad_norm"] = statistics.fmean(norms) if norms else 0.0
    out["sampler_mismatch"] = gap["sum"] / max(gap["n"], 1.0)
    out["optimizer_steps"] = float(len(norms))
    return out


_SUMMED = ("n_tokens", "loss")


def _accumulate(acc: dict[str, float], stats: dict[str, float]) -> None:
    """Fold micro-batch (or substep) statistics into ``acc``: counts and losses add up, the
    ratio maximum stays a maximum, every other statistic is summed weighted by its tokens.
    ``stats`` may itself be an accumulator (keys ``sum:...``)."""
    n = stats["n_tokens"]
    for key, value in stats.items():
        if key in _SUMMED or key.startswith("sum:"):
            acc[key] = acc.get(key, 0.0) + value
        elif key == "ratio_max":
            acc[key] = max(acc.get(key, 0.0), value)
        else:
            acc[f"sum:{key}"] = acc.get(f"sum:{key}", 0.0) + value * n


def _means(acc: dict[str, float], substeps: int) -> dict[str, float]:
    """Token-weighted means; ``loss`` is the mean over substeps of each minibatch's loss."""
    n = max(acc.get("n_tokens", 0.0), 1.0)
    out = {k[4:]: v / n for k, v in acc.items() if k.startswith("sum:")}
    out["ratio_max"] = acc.get("ratio_max", 0.0)
    out["n_tokens"] = acc.get("n_tokens", 0.0)
    out["loss"] = acc.get("loss", 0.0) / max(substeps, 1)
    return out


# ---------------------------------------------------------------- logging


def step_record(
    plan: StepPlan,
    scored_P: Sequence[Sequence[Rollout]],
    advantages_P: Sequence[Sequence[float | None]],
    train: dict[str, float],
    n_items: int,
    truncated: int,
    timings: dict[str, float],
) -> dict[str, Any]:
    """The flat, slash-keyed log line of one step."""
    rollouts = [r for group in scored_P for r in group]
    record: dict[str, Any] = {
        "step": plan.step,
        "epoch": plan.epoch,
        "beta": plan.beta,
        "max_hops": plan.max_hops,
        "rollouts": len(rollouts),
    }
    for term in RewardTerms.model_fields:
        values = [float(getattr(r.reward, term)) for r in rollouts]
        record[f"reward/{term}"] = statistics.fmean(values) if values else 0.0
    spreads = [statistics.pstdev([r.reward.total for r in g]) for g in scored_P if g]
    record["reward/group_std"] = statistics.fmean(spreads) if spreads else 0.0
    for key, value in aggregate([r.metrics for r in rollouts]).items():
        if key != "count" and value is not None:
            record[f"metrics/{key}"] = value
    stops = Counter(str(r.trajectory.stop_reason) for r in rollouts)
    record.update({f"stop/{reason}": n / len(rollouts) for reason, n in stops.items()})
    kept = sum(any(a is not None for a in advantages_G) for advantages_G in advantages_P)
    record["groups/total"] = len(scored_P)
    record["groups/kept"] = kept
    record["groups/dropped_constant"] = len(scored_P) - kept
    record["train/sequences"] = n_items
    record["train/truncated"] = truncated
    record.update({f"train/{k}": v for k, v in train.items()})
    sampled = sum(_sampled_tokens(r.trajectory) for r in rollouts)
    record["throughput/sampled_tokens"] = sampled
    record["throughput/sampled_tokens_per_s"] = sampled / max(timings["rollout_s"], 1e-9)
    record["throughput/trajectories_per_min"] = 60 * len(rollouts) / max(timings["rollout_s"], 1e-9)
    record.update({f"time/{k}": v for k, v in timings.items()})
    return record


def _sampled_tokens(trajectory: Trajectory) -> int:
    return sum(len(t.output.token_ids or []) for t in trajectory.turns if t.output is not None)


def rollout_records(
    plan: StepPlan, scored_P: Sequence[Sequence[Rollout]], advantages_P: list[list[float | None]]
) -> list[dict[str, Any]]:
    """One log line per rollout: its task, reward terms, key metrics and advantage."""
    records = []
    for group, advantages_G in zip(scored_P, advantages_P, strict=True):
        for g, (r, advantage) in enumerate(zip(group, advantages_G, strict=True)):
            records.append(
                {
                    "step": plan.step,
                    "group": r.group,
                    "rollout": g,
                    "task_id": r.task.id,
                    "hops": r.task.hops,
                    "advantage": advantage,
                    "stop_reason": str(r.trajectory.stop_reason),
                    "sampled_tokens": _sampled_tokens(r.trajectory),
                    **{f"reward/{k}": v for k, v in r.reward.model_dump().items()},
                    "recall": r.metrics.recall,
                    "trajectory_recall": r.metrics.trajectory_recall,
                    "final_answer_found": r.metrics.final_answer_found,
                    "turns": r.metrics.turns,
                    "tool_calls": r.metrics.tool_calls,
                }
            )
    return records


# ---------------------------------------------------------------- one step, the whole run


def rl_step(
    plan: StepPlan,
    model: Any,
    tokenizer: Any,
    optimizer: torch.optim.Optimizer,
    engine: RolloutEngine,
    tools: Tools,
    tasks: Sequence[Task],
    config: RLConfig,
    dp: DataParallel,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Rollouts, reward, advantages and the CISPO update of one step; returns its log lines."""
    started = time.perf_counter()
    seed = config.seed + 7919 * dp.rank  # ranks draw different tasks and samples
    tasks_P = sample_tasks(tasks, plan, config.queries_per_step, seed)
    engine.sync(dp.unwrap(model), plan.step)  # the weights after the last optimiser step
    sync_s = time.perf_counter() - started
    groups_P = collect_groups(engine, tools, tasks_P, plan, replace(config, seed=seed))
    rollout_s = time.perf_counter() - started - sync_s
    scored_P = score_groups(groups_P, tasks_P, config.reward.model_copy(update={"beta": plan.beta}))
    items, advantages_P, truncated = group_items(scored_P, config)
    train_started = time.perf_counter()
    train: dict[str, float] = {}
    if items:
        update_seed = random.Random(f"{seed}:update:{plan.step}").getrandbits(31)
        train = cispo_update(model, optimizer, items, config, pad_id(tokenizer), update_seed, dp)
    timings = {
        "sync_s": sync_s,
        "rollout_s": rollout_s,
        "train_s": time.perf_counter() - train_started,
        "step_s": time.perf_counter() - started,
    }
    record = step_record(plan, scored_P, advantages_P, train, len(items), truncated, timings)
    record["train/lr"] = optimizer.param_groups[0]["lr"]
    return record, rollout_records(plan, scored_P, advantages_P)


def default_engine(config: RLConfig) -> EngineFactory:
    """The in-process engine that ``config.rollout_engine`` names."""
    if config.rollout_engine == "ct2":
        from sleuth.train.engine_ct2 import CT2RolloutEngine

        return lambda m, t: CT2RolloutEngine(
            m, t, temperature=config.temperature, compute_type=config.rollout_compute_type
        )
    return lambda m, t: LocalRolloutEngine(m, t, temperature=config.temperature)


StepHook = Callable[[int, dict[str, Any]], None]
"""Called after a step is logged and before it is checkpointed (tests simulate crashes here)."""


def run_rl(
    config: RLConfig,
    tasks: Sequence[Task],
    tools: Tools,
    make_engine: EngineFactory | None = None,
    on_step: StepHook | None = None,
) -> list[dict[str, Any]]:
    """``sleuth train rl``: CISPO from the last checkpoint (if any) to the last step.

    Args:
        config: the run's settings.
        tasks: training tasks (their ``hops`` drive the curriculum).
        tools: the retrieval tools over the training index (a ``Toolbox``).
        make_engine: (model, tokenizer) -> rollout engine; default: ``config.rollout_engine``.
        on_step: called with (step, record) after each step is logged.

    Returns:
        The log records of the whole run (also in ``<out_dir>/metrics.jsonl``).

    Example::

        cfg = RLConfig.cpu_small(str(smollm2_gguf_path()), out_dir="runs/rl")
        run_rl(replace(cfg, student=replace(cfg.student, adapter="runs/sft/model")), tasks, tools)
    """
    if not tasks:
        raise InputError("no training tasks")
    out = Path(config.out_dir)
    metrics_path, rollouts_path = out / "metrics.jsonl", out / "rollouts.jsonl"
    torch.manual_seed(config.seed)
    random.seed(config.seed)
    checkpoint = latest_checkpoint(out / "checkpoints")
    resume = checkpoint.model_dir if checkpoint is not None else None
    model, tokenizer = load_student(config.student, resume_from=resume)
    optimizer = build_optimizer(model, config.lr, config.weight_decay)
    start = 0
    if checkpoint is not None:
        restore_training_state(checkpoint, optimizer)
        start = checkpoint.step
    model, optimizer, dp = setup_data_parallel(model, optimizer, config.data_parallel)
    if dp.is_main:
        truncate_log(metrics_path, start)
        truncate_log(rollouts_path, start)
    factory = make_engine or default_engine(config)
    engine = factory(dp.unwrap(model), tokenizer)
    n_steps = total_steps(config, len(tasks))
    for step in range(start, n_steps):
        plan = plan_step(step, n_steps, config)
        record, per_rollout = rl_step(
            plan, model, tokenizer, optimizer, engine, tools, tasks, config, dp
        )
        if dp.is_main:
            log_step(metrics_path, record)
            for line in per_rollout:
                log_step(rollouts_path, line)
        if on_step is not None:
            on_step(step, record)
        last = step + 1 == n_steps
        if dp.is_main and ((step + 1) % config.checkpoint_every == 0 or last):
            state = {"config": config_dict(config), "n_steps": n_steps}
            save_checkpoint(
                out / "checkpoints",
                step + 1,
                dp.unwrap(model),
                tokenizer,
                optimizer,
                state,
                config.keep_checkpoints,
            )
        if dp.is_main and ((step + 1) % config.plot_every == 0 or last):
            plot_log(metrics_path, out / "metrics.png")
    return read_log(metrics_path)
