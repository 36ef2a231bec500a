"""The nouns of a CISPO run (SPEC §6; report §4.2): its settings and what one step passes along.

``RLConfig`` holds every setting, with the report's values as named constants beside it;
``StepPlan`` is what the schedule fixes for a step, ``Rollout`` one scored trajectory of a group,
``TrainItem`` one training sequence with its advantage. The loop is :mod:`sleuth.train.rl`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from sleuth.errors import ConfigError
from sleuth.harness.budget import BudgetConfig
from sleuth.harness.loop import HarnessConfig
from sleuth.harness.trajectory import Trajectory
from sleuth.metrics import Metrics
from sleuth.policies.sampling import Sampling
from sleuth.policies.spec import LOCAL_ENGINES
from sleuth.reward import RewardConfig, RewardTerms
from sleuth.tasks.schema import Task
from sleuth.train.advantages import BETA_END, BETA_START, ZERO_VARIANCE_TOL
from sleuth.train.cispo import Aggregation
from sleuth.train.constants import CISPO_W_MAX, CISPO_W_MIN
from sleuth.train.model import StudentConfig
from sleuth.train.sequences import TrainSequence

QUERIES_PER_STEP = 128  # report §4.2
ROLLOUTS_PER_QUERY = 8  # report §4.2: 8 environments per query, 1,024 trajectories per step
SUBSTEPS = 4  # report §4.2: 4 gradient substeps per step
EPOCHS = 5  # report §4.2: 5 epochs (~300 possible steps, converged near 230)
LEARNING_RATE = 1e-5  # Harness-1 (the report does not say)


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
    temperature: float = Sampling.temperature
    """Sampling temperature; the trainer's log-probs are taken at it too (log π_T, as the
    ``ct2`` engine records them). ``LocalHFPolicy`` records log-probs at 1, so keep 1.0 with the
    ``transformers`` engine."""
    rollout_engine: Literal["transformers", "ct2"] = "transformers"
    """In-process sampler when no engine factory is given: ``transformers`` (shares the
    trainer's weights) or ``ct2`` (CTranslate2 on CPU, several times faster; the weights are
    converted and pushed to it before each step: :mod:`sleuth.policies.ct2`)."""
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
            # 8k, not 32k: a small model's context; 6 turns, not 128: minutes per rollout
            budget=BudgetConfig(total=8192, per_call_tokens=1024, reply_reserve=512, max_turns=6),
            max_reply_tokens=160,  # a list with one-line justifications
            max_documents=10,  # R@5 and R@10 read from it; 30 is more than a small model lists
        )
        settings: dict[str, Any] = {
            # LoRA r 16, alpha 32: the recipe's cpu-small student (sleuth.train.recipes.config)
            "student": StudentConfig(path=model_path, lora_r=16, lora_alpha=32),
            "out_dir": out_dir,
            "queries_per_step": 4,  # 4 x 4 rollouts: a step in minutes on 2 cores, not hours
            "rollouts_per_query": 4,  # half the report's G: time
            "substeps": 2,  # 16 rollouts make two minibatches
            "micro_batch_size": 1,  # fastest on 2 cores (memory only)
            "epochs": 2,  # β 4 for the first half of the steps, 2 after
            "max_steps": 8,  # time: a first look at the curve
            "lr": 5e-5,  # few, small steps move 1e-5 too little (the recipe measured 5e-5: drift 0.063)
            "harness": harness,
            "rollout_workers": 2,  # 2 cores
            "max_seq_len": 4096,  # half of T: the update's time and memory on a CPU
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
