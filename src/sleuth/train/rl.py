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

This module is the loop; the run's nouns (``RLConfig``, ``StepPlan``, ``Rollout``,
``TrainItem``) are in :mod:`sleuth.train.rl_types`, steps 1-3 in :mod:`sleuth.train.rl_data`,
step 4 in :mod:`sleuth.train.rl_update` and the log lines of step 5 in :mod:`sleuth.train.rl_log`.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from sleuth.errors import InputError
from sleuth.memory import trim_heap
from sleuth.policies.manifest import PolicyManifest
from sleuth.policies.sampling import Sampling
from sleuth.tasks.schema import Task
from sleuth.tools.base import Tools
from sleuth.train.checkpoint import latest_checkpoint, restore_training_state, save_checkpoint
from sleuth.train.distributed import DataParallel, setup_data_parallel
from sleuth.train.model import build_optimizer, load_student
from sleuth.train.rl_data import (
    collect_groups,
    group_items,
    plan_step,
    sample_tasks,
    score_groups,
    total_steps,
)
from sleuth.train.rl_log import rollout_records, step_record
from sleuth.train.rl_types import RLConfig, StepPlan
from sleuth.train.rl_update import cispo_update
from sleuth.train.rollout import LocalRolloutEngine, RolloutEngine
from sleuth.train.runlog import log_step, plot_log, read_log, truncate_log
from sleuth.train.sft import config_dict, pad_id, training_manifest

EngineFactory = Callable[[Any, Any], RolloutEngine]
"""(model, tokenizer) -> the rollout engine of a run."""


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
        trim_heap()  # the update's activations are freed; give their pages back
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
        from sleuth.policies.ct2 import CT2RolloutEngine

        return lambda m, t: CT2RolloutEngine(
            m, t, Sampling(config.temperature), compute_type=config.rollout_compute_type
        )
    return lambda m, t: LocalRolloutEngine(m, t, Sampling(config.temperature))


StepHook = Callable[[int, dict[str, Any]], None]
"""Called after a step is logged and before it is checkpointed (tests simulate crashes here)."""


def run_rl(
    config: RLConfig,
    tasks: Sequence[Task],
    tools: Tools,
    make_engine: EngineFactory | None = None,
    on_step: StepHook | None = None,
    manifest: PolicyManifest | None = None,
) -> list[dict[str, Any]]:
    """``sleuth train rl``: CISPO from the last checkpoint (if any) to the last step.

    Args:
        config: the run's settings.
        tasks: training tasks (their ``hops`` drive the curriculum).
        tools: the retrieval tools over the training index (a ``Toolbox``).
        make_engine: (model, tokenizer) -> rollout engine; default: ``config.rollout_engine``.
        on_step: called with (step, record) after each step is logged.
        manifest: the ``sleuth_policy.json`` written into every checkpoint's model (default:
            the rollouts' harness and tools, the base model and the task ids).

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
    trained = manifest or training_manifest(config.harness, tools, config.student, tasks, "rl")
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
                trained,
            )
        if dp.is_main and ((step + 1) % config.plot_every == 0 or last):
            plot_log(metrics_path, out / "metrics.png")
    return read_log(metrics_path)
