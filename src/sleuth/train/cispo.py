"""The CISPO policy loss (MiniMax-M1, arXiv 2506.13585; ScaleRL, arXiv 2510.13786).

Per policy token the loss is REINFORCE weighted by a detached, clamped importance ratio::

    loss_t = -sg(clamp(exp(logp_t - logp_behaviour_t), w_min, w_max)) * A_t * logp_t

Unlike PPO's clip, a token whose ratio leaves the bounds keeps a gradient: its weight is frozen at
the bound instead of being zeroed, so rare "fork" tokens keep learning. Inside the bounds the
gradient equals ``A * grad(ratio)``, the plain importance-sampled policy gradient.

``w_min`` and ``w_max`` are **absolute** bounds on the ratio, not deltas from 1 (verl, SkyRL and
slime take deltas; TRL's ``epsilon_high`` is absolute only for ``cispo``). The defaults [0, 5]
follow ScaleRL, SkyRL and Harness-1: no floor, a cap of 5.

Axes: ``B`` sequences in the batch, ``T`` token positions, ``V`` vocabulary.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

from sleuth.train.constants import CISPO_W_MAX, CISPO_W_MIN

Aggregation = Literal["token_mean", "token_sum", "prompt_mean"]
AGGREGATIONS: tuple[str, ...] = ("token_mean", "token_sum", "prompt_mean")


def cispo_loss(
    logprobs: Tensor,
    behaviour_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    w_min: float = CISPO_W_MIN,
    w_max: float = CISPO_W_MAX,
    aggregation: Aggregation = "token_mean",
    *,
    group_ids: Tensor | None = None,
    ref_logprobs: Tensor | None = None,
    kl_coef: float = 0.0,
    entropy: Tensor | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """CISPO loss over a batch of token sequences, with training statistics.

    Args:
        logprobs: (B, T) log-probs of the taken tokens under the policy being trained (with grad).
        behaviour_logprobs: (B, T) log-probs of the same tokens under the policy that sampled them
            (the sampler's own, or recomputed from the weights that sampled; the caller picks the
            anchor). Never differentiated.
        advantages: (B,), (B, 1) for one advantage per sequence, or (B, T) per token.
        mask: (B, T), 1 on policy tokens that carry loss, 0 elsewhere. Values of the other tensors
            at mask-0 positions are ignored, even NaN or inf.
        w_min: absolute lower bound of the importance weight (not a delta from 1).
        w_max: absolute upper bound of the importance weight (not a delta from 1).
        aggregation: ``token_mean`` divides the token sum by the number of mask-1 tokens in the
            batch (DAPO, M1); ``token_sum`` does not divide (Tinker); ``prompt_mean`` takes the
            token mean within each prompt group, then the mean over groups (ScaleRL). When one
            optimiser step accumulates several calls, use ``token_sum`` and divide by the step's
            token count, or small micro-batches weigh as much as large ones.
        group_ids: (B,) prompt-group id of each sequence; required by ``prompt_mean``.
        ref_logprobs: (B, T) log-probs under a reference policy, for the optional KL penalty.
        kl_coef: weight of the KL penalty; 0 (the default, as in M1) disables it. The penalty is
            the k3 estimator of KL(policy || reference) per token, ``exp(d) - d - 1`` with
            ``d = ref - logp``: non-negative, unbiased for samples from the policy, low variance.
        entropy: (B, T) per-token entropies (see :func:`token_entropy`), only logged.

    Returns:
        ``(loss, stats)``: the scalar loss to minimise, and python floats ``n_tokens``,
        ``ratio_mean``, ``ratio_max`` (raw ratio before clamping), ``clip_frac_pos`` and
        ``clip_frac_neg`` (share of tokens whose ratio exceeds ``w_max``, split by the sign of the
        advantage), ``clip_frac_low`` (share below ``w_min``), ``kl`` when the penalty is on and
        ``entropy`` when entropies are given. Shares and means are over mask-1 tokens; with no
        such token they are 0.

    Raises:
        ValueError: on mismatched shapes, bad bounds, an unknown aggregation, or a missing
            ``group_ids`` / ``ref_logprobs``.

    Example::

        loss, stats = cispo_loss(logp_BT, old_logp_BT, adv_B, mask_BT)
        loss.backward()
    """
    _check_args(
        logprobs, behaviour_logprobs, mask, w_min, w_max, aggregation, kl_coef, ref_logprobs
    )
    mask_BT = mask.bool()
    adv_BT = _broadcast_advantages(advantages, logprobs.shape)

    # torch.where, not multiplication: 0 * NaN is NaN, and masked positions may hold anything.
    logp_BT = torch.where(mask_BT, logprobs, 0.0)
    old_BT = torch.where(mask_BT, behaviour_logprobs.detach(), 0.0)
    adv_BT = torch.where(mask_BT, adv_BT.detach(), 0.0)

    # the ratio in float32 even for bf16 log-probs, so exp() does not round the weights
    ratio_BT = torch.exp(logp_BT.detach().float() - old_BT.float())  # 1 on mask-0 positions
    weight_BT = ratio_BT.clamp(w_min, w_max)
    loss_BT = -weight_BT * adv_BT * logp_BT

    kl_BT = None
    if kl_coef > 0.0 and ref_logprobs is not None:  # _check_args: kl_coef > 0 needs ref
        kl_BT = _k3_kl(logp_BT, torch.where(mask_BT, ref_logprobs.detach(), 0.0))
        loss_BT = loss_BT + kl_coef * kl_BT

    loss = _aggregate(torch.where(mask_BT, loss_BT, 0.0), mask_BT, aggregation, group_ids)
    stats = _stats(ratio_BT, adv_BT, mask_BT, w_min, w_max, kl_BT, entropy)
    return loss, stats


def token_entropy(logits: Tensor) -> Tensor:
    """Entropy (nats) of the softmax over the last axis, e.g. (B, T, V) -> (B, T).

    Computed in float32, since bf16 log-softmax over a large vocabulary is too coarse to log.
    Logits of -inf (banned tokens) contribute 0 rather than NaN.
    """
    logp = torch.log_softmax(logits.float(), dim=-1)
    p = logp.exp()
    return -(p * torch.where(p > 0, logp, 0.0)).sum(dim=-1)


def _check_args(
    logprobs: Tensor,
    behaviour_logprobs: Tensor,
    mask: Tensor,
    w_min: float,
    w_max: float,
    aggregation: str,
    kl_coef: float,
    ref_logprobs: Tensor | None,
) -> None:
    if logprobs.dim() != 2:
        raise ValueError(f"logprobs must be (batch, tokens), got shape {tuple(logprobs.shape)}")
    others = {"behaviour_logprobs": behaviour_logprobs, "mask": mask, "ref_logprobs": ref_logprobs}
    for name, t in others.items():
        if t is not None and t.shape != logprobs.shape:
            raise ValueError(
                f"{name} has shape {tuple(t.shape)}, logprobs {tuple(logprobs.shape)}; match them"
            )
    if not 0.0 <= w_min <= w_max:
        raise ValueError(f"need 0 <= w_min <= w_max (absolute bounds), got [{w_min}, {w_max}]")
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"unknown aggregation {aggregation!r}; choose one of {AGGREGATIONS}")
    if kl_coef < 0.0:
        raise ValueError(f"kl_coef must be >= 0, got {kl_coef}")
    if kl_coef > 0.0 and ref_logprobs is None:
        raise ValueError("kl_coef > 0 needs ref_logprobs: pass the reference policy's log-probs")


def _broadcast_advantages(advantages: Tensor, shape_BT: torch.Size) -> Tensor:
    """Per-sequence (B,) or (B, 1) advantages -> (B, T); per-token (B, T) pass through."""
    adv = advantages.unsqueeze(-1) if advantages.dim() == 1 else advantages
    if adv.dim() != 2 or adv.shape[0] != shape_BT[0] or adv.shape[1] not in (1, shape_BT[1]):
        raise ValueError(
            f"advantages of shape {tuple(advantages.shape)} do not broadcast to {tuple(shape_BT)};"
            " pass (batch,), (batch, 1) or (batch, tokens)"
        )
    return adv.expand(shape_BT)


def _k3_kl(logp_BT: Tensor, ref_BT: Tensor) -> Tensor:
    """k3 estimator of KL(policy || ref) per sampled token (Schulman, "Approximating KL")."""
    d_BT = ref_BT - logp_BT
    return torch.exp(d_BT) - d_BT - 1.0


def _aggregate(
    loss_BT: Tensor, mask_BT: Tensor, aggregation: str, group_ids: Tensor | None
) -> Tensor:
    """Reduce masked per-token losses (zero at mask-0 positions) to a scalar."""
    if aggregation == "token_sum":
        return loss_BT.sum()
    if aggregation == "token_mean":
        return loss_BT.sum() / mask_BT.sum().clamp(min=1)
    if group_ids is None or group_ids.shape != loss_BT.shape[:1]:
        raise ValueError("prompt_mean needs group_ids of shape (batch,): the prompt of each row")
    _, group_B = torch.unique(group_ids, return_inverse=True)
    n_groups = int(group_B.max()) + 1 if group_B.numel() else 0
    sum_P = loss_BT.new_zeros(n_groups).index_add(0, group_B, loss_BT.sum(dim=1))
    count_P = loss_BT.new_zeros(n_groups).index_add(0, group_B, mask_BT.sum(dim=1).to(sum_P))
    has_tokens_P = count_P > 0
    if not bool(has_tokens_P.any()):
        return loss_BT.sum()  # zero, but still attached to the graph
    return (sum_P[has_tokens_P] / count_P[has_tokens_P]).mean()


def _stats(
    ratio_BT: Tensor,
    adv_BT: Tensor,
    mask_BT: Tensor,
    w_min: float,
    w_max: float,
    kl_BT: Tensor | None,
    entropy_BT: Tensor | None,
) -> dict[str, float]:
    n = int(mask_BT.sum())
    denom = max(n, 1)

    def share(cond_BT: Tensor) -> float:
        return float((cond_BT & mask_BT).sum()) / denom

    def masked_mean(x_BT: Tensor) -> float:
        return float(torch.where(mask_BT, x_BT.detach().float(), 0.0).sum()) / denom

    stats = {
        "n_tokens": float(n),
        "ratio_mean": masked_mean(ratio_BT),
        "ratio_max": float(ratio_BT[mask_BT].max()) if n else 0.0,
        "clip_frac_pos": share((ratio_BT > w_max) & (adv_BT > 0)),
        "clip_frac_neg": share((ratio_BT > w_max) & (adv_BT < 0)),
        "clip_frac_low": share(ratio_BT < w_min),
    }
    if kl_BT is not None:
        stats["kl"] = masked_mean(kl_BT)
    if entropy_BT is not None:
        stats["entropy"] = masked_mean(entropy_BT)
    return stats
