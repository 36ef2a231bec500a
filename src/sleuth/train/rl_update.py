"""The CISPO update of one RL step: minibatches, advantage scaling, optimiser substeps.

Axes: B the sequences of a micro-batch, T their tokens.

The step's items are shuffled and split into ``substeps`` minibatches, one optimiser step each,
with :func:`sleuth.train.cispo.cispo_loss`. Micro-batches accumulate with ``token_sum`` on
pre-scaled advantages (:func:`advantage_scales`), so the chosen aggregation holds over the
minibatch however it is cut.
"""

from __future__ import annotations

import random
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import torch

from sleuth.train.cispo import cispo_loss
from sleuth.train.distributed import DataParallel
from sleuth.train.model import clip_and_step
from sleuth.train.rl_types import RLConfig, TrainItem
from sleuth.train.sequences import (
    SequenceBatch,
    TrainSequence,
    collate_sequences,
    sequence_logprobs,
)


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


def _forward(
    model: Any, items: Sequence[TrainItem], pad: int, config: RLConfig
) -> tuple[SequenceBatch, torch.Tensor, torch.Tensor, torch.Tensor]:
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


def _gap(
    logprobs_BT: torch.Tensor, behaviour_BT: torch.Tensor, mask_BT: torch.Tensor
) -> Counter[str]:
    """Sum of |log π_train − log π_sample| over target tokens, and their count: the
    sampler/trainer mismatch (engine numerics, quantisation) that the CISPO ratio absorbs."""
    gap_BT = torch.where(mask_BT, (logprobs_BT.detach() - behaviour_BT).abs(), 0.0)
    return Counter({"sum": float(gap_BT.sum()), "n": float(mask_BT.sum())})


@torch.no_grad()
def recompute_behaviour(
    model: Any, items: Sequence[TrainItem], pad: int, config: RLConfig
) -> tuple[list[TrainItem], Counter[str]]:
    """Replace sampler log-probs with the current weights' (the ``recompute`` anchor); also
    returns the gap between the two (:func:`_gap`)."""
    out: list[TrainItem] = []
    gap: Counter[str] = Counter()
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
    gap: Counter[str] = Counter()
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
