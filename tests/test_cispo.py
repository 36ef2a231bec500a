"""CISPO loss: the gradient, the bounds, masking, aggregation and the statistics (peers.md A.7)."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from sleuth.train import (
    cispo_loss,
    collate_sequences,
    sequence_logprobs,
    token_entropy,
    turns_to_sequences,
)


def _leaf(values: list[list[float]]) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float32, requires_grad=True)


def _grad(loss: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    (g,) = torch.autograd.grad(loss, x)
    return g


def _tiny_lm(seed: int = 0) -> torch.nn.Module:
    """A randomly initialised one-layer Llama with a 32-token vocabulary (no download)."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(seed)
    config = transformers.LlamaConfig(
        vocab_size=32,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    return transformers.LlamaForCausalLM(config).eval()  # eval: no dropout, same logits twice


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 2**16), per_token=st.booleans())
def test_gradient_inside_bounds_equals_advantage_times_grad_ratio(seed: int, per_token: bool):
    gen = torch.Generator().manual_seed(seed)
    B, T = 3, 5
    logp = (-3 * torch.rand(B, T, generator=gen)).requires_grad_()
    log_ratio = torch.empty(B, T).uniform_(-1.0, 1.0, generator=gen)  # ratio in (0.37, 2.7)
    behaviour = logp.detach() - log_ratio
    adv = torch.randn((B, T) if per_token else (B,), generator=gen)
    mask = torch.ones(B, T)

    loss, _ = cispo_loss(logp, behaviour, adv, mask, w_min=0.1, w_max=5.0, aggregation="token_sum")

    # the importance-sampled objective whose gradient CISPO must reproduce inside the bounds
    adv_BT = adv if per_token else adv[:, None]
    reference = -(adv_BT * torch.exp(logp - behaviour)).sum()
    torch.testing.assert_close(_grad(loss, logp), _grad(reference, logp))


def test_gradient_outside_bounds_is_frozen_at_the_bound_not_zero():
    # ratios 0.1 (below w_min), 1 (inside) and 10 (above w_max), for both signs of the advantage
    logp = _leaf([[-1.0, -1.0, -1.0], [-1.0, -1.0, -1.0]])
    behaviour = logp.detach() - torch.log(torch.tensor([0.1, 1.0, 10.0]))
    adv = torch.tensor([1.0, -2.0])
    mask = torch.ones(2, 3)

    loss, _ = cispo_loss(logp, behaviour, adv, mask, w_min=0.5, w_max=2.0, aggregation="token_sum")

    weights = torch.tensor([0.5, 1.0, 2.0])
    expected = -adv[:, None] * weights
    torch.testing.assert_close(_grad(loss, logp), expected)
    assert torch.all(expected != 0)  # PPO's clip would zero some of these; CISPO never does


def test_ratio_is_exactly_one_when_behaviour_is_recomputed_from_current_weights():
    model = _tiny_lm()
    turns = [([1, 2, 3], [4, 5, 6], [0.0] * 3), ([1, 2, 3, 4, 5, 6, 7, 8], [9, 10], [0.0] * 2)]
    batch = collate_sequences(turns_to_sequences(turns) + turns_to_sequences(turns[1:]))
    with torch.no_grad():
        behaviour, _ = sequence_logprobs(model, batch.input_ids, batch.attention_mask)

    logp, entropy = sequence_logprobs(model, batch.input_ids, batch.attention_mask)
    adv = torch.tensor([1.0, -1.0])
    loss, stats = cispo_loss(logp, behaviour, adv, batch.loss_mask, entropy=entropy)

    assert stats["ratio_mean"] == 1.0 and stats["ratio_max"] == 1.0
    assert stats["clip_frac_pos"] == stats["clip_frac_neg"] == stats["clip_frac_low"] == 0.0
    assert 0.0 < stats["entropy"] <= math.log(32)
    # on-policy, CISPO is plain REINFORCE
    params = [p for p in model.parameters() if p.requires_grad]
    reinforce = -(torch.where(batch.loss_mask, adv[:, None] * logp, 0.0)).sum() / 7
    for g, g_ref in zip(
        torch.autograd.grad(loss, params, retain_graph=True),
        torch.autograd.grad(reinforce, params),
        strict=True,
    ):
        torch.testing.assert_close(g, g_ref)


def test_splitting_a_trajectory_into_two_sequences_leaves_token_sum_loss_unchanged():
    model = _tiny_lm(seed=1)
    # turn 1's prompt extends turn 0's prompt + completion, so the two turns share one sequence
    turns = [
        ([1, 2, 3, 4], [5, 6, 7], [-1.0, -2.0, -0.5]),
        ([1, 2, 3, 4, 5, 6, 7, 8, 9], [10, 11], [-3.0, -0.2]),
    ]
    merged = turns_to_sequences(turns)
    split = turns_to_sequences(turns[:1]) + turns_to_sequences(turns[1:])
    assert len(merged) == 1 and len(split) == 2

    def loss_and_grads(sequences):
        model.zero_grad()
        batch = collate_sequences(sequences)
        logp, _ = sequence_logprobs(model, batch.input_ids, batch.attention_mask)
        adv = torch.full((len(sequences),), 0.7)  # one trajectory: one advantage
        loss, _ = cispo_loss(
            logp, batch.behaviour_logprobs, adv, batch.loss_mask, aggregation="token_sum"
        )
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in model.parameters()]

    loss_merged, grads_merged = loss_and_grads(merged)
    loss_split, grads_split = loss_and_grads(split)
    torch.testing.assert_close(loss_split, loss_merged)
    for g_split, g_merged in zip(grads_split, grads_merged, strict=True):
        torch.testing.assert_close(g_split, g_merged)


@pytest.mark.parametrize("aggregation", ["token_mean", "token_sum", "prompt_mean"])
def test_masked_tokens_contribute_nothing_even_nan(aggregation: str):
    gen = torch.Generator().manual_seed(0)
    logp = -torch.rand(3, 6, generator=gen)
    behaviour = logp - 0.3 * torch.randn(3, 6, generator=gen)
    adv_BT = torch.randn(3, 6, generator=gen)
    entropy = torch.rand(3, 6, generator=gen)
    mask = torch.tensor([[0, 1, 1, 1, 0, 0], [1, 1, 0, 1, 1, 0], [0, 0, 1, 1, 1, 1]])
    groups = torch.tensor([0, 0, 1])

    def run(lp, beh, adv, ent):
        lp = lp.clone().requires_grad_()
        loss, stats = cispo_loss(
            lp, beh, adv, mask, aggregation=aggregation, group_ids=groups, entropy=ent
        )
        return loss, _grad(loss, lp), stats

    off = mask == 0
    garbage = [float("nan"), float("inf"), -float("inf"), 1e30]
    fill = torch.tensor(garbage * 5)[: int(off.sum())]
    dirty = [x.clone().masked_scatter(off, fill) for x in (logp, behaviour, adv_BT, entropy)]

    loss, grad, stats = run(logp, behaviour, adv_BT, entropy)
    loss_dirty, grad_dirty, stats_dirty = run(*dirty)
    assert torch.isfinite(loss_dirty)
    torch.testing.assert_close(loss_dirty, loss)
    torch.testing.assert_close(grad_dirty, grad)
    assert torch.all(grad_dirty[off] == 0)
    assert stats_dirty == stats


def _hand_batch() -> tuple[torch.Tensor, ...]:
    # behaviour == logp, so every weight is 1 and a token's loss is -A * logp:
    # row 0 (A=1):    1, 2, 4   -> sum 7, 3 tokens
    # row 1 (A=-2):  -1, -2, -  -> sum -3, 2 tokens (last masked)
    # row 2 (A=0.5):  1, -, -   -> sum 1, 1 token
    logp = torch.tensor([[-1.0, -2.0, -4.0], [-0.5, -1.0, -3.0], [-2.0, -9.0, -9.0]])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0], [1, 0, 0]])
    adv = torch.tensor([1.0, -2.0, 0.5])
    return logp, mask, adv


@pytest.mark.parametrize(
    ("aggregation", "group_ids", "expected"),
    [
        ("token_sum", None, 7 - 3 + 1),
        ("token_mean", None, (7 - 3 + 1) / 6),
        # groups {0, 1} and {2}: (4 / 5 + 1 / 1) / 2
        ("prompt_mean", [0, 0, 1], (4 / 5 + 1.0) / 2),
        # one group per row: (7/3 - 3/2 + 1) / 3
        ("prompt_mean", [5, 3, 9], (7 / 3 - 3 / 2 + 1) / 3),
        # a single group is the token mean
        ("prompt_mean", [2, 2, 2], (7 - 3 + 1) / 6),
    ],
)
def test_aggregation_matches_hand_computed_values(aggregation, group_ids, expected):
    logp, mask, adv = _hand_batch()
    ids = None if group_ids is None else torch.tensor(group_ids)
    loss, stats = cispo_loss(logp, logp, adv, mask, aggregation=aggregation, group_ids=ids)
    assert loss.item() == pytest.approx(expected)
    assert stats["n_tokens"] == 6.0


def test_weights_are_clamped_to_absolute_bounds_in_the_loss_value():
    logp = torch.tensor([[-1.0, -1.0]])
    behaviour = torch.tensor([[-3.0, -1.5]])  # ratios e^2 = 7.39 (capped at 5) and e^0.5 = 1.65
    loss, stats = cispo_loss(logp, behaviour, torch.tensor([2.0]), torch.ones(1, 2))
    assert loss.item() == pytest.approx((5.0 * 2.0 + math.exp(0.5) * 2.0) / 2)
    assert stats["ratio_max"] == pytest.approx(math.exp(2.0))
    assert stats["clip_frac_pos"] == 0.5 and stats["clip_frac_neg"] == 0.0


@pytest.mark.parametrize("shape", [(2,), (2, 1), (2, 3)])
def test_per_sequence_advantages_broadcast_like_per_token(shape):
    logp = torch.tensor([[-1.0, -2.0, -3.0], [-0.5, -1.5, -2.5]])
    per_token = torch.tensor([[1.5, 1.5, 1.5], [-1.0, -1.0, -1.0]])
    adv = per_token[:, 0].reshape(shape) if shape != (2, 3) else per_token
    loss, _ = cispo_loss(logp, logp - 0.2, adv, torch.ones(2, 3))
    expected, _ = cispo_loss(logp, logp - 0.2, per_token, torch.ones(2, 3))
    assert loss.item() == pytest.approx(expected.item())


def test_stats_split_clipping_by_sign_of_advantage():
    # ratios 10 (A>0), 10 (A<0), 10 (A=0), 1, 0.1; w_min = 0.5 so the last is below the floor
    ratios = torch.tensor([[10.0, 10.0, 10.0, 1.0, 0.1]])
    logp = torch.full((1, 5), -1.0)
    adv = torch.tensor([[1.0, -1.0, 0.0, 1.0, 1.0]])
    _, stats = cispo_loss(logp, logp - ratios.log(), adv, torch.ones(1, 5), w_min=0.5)
    assert stats == pytest.approx(
        {
            "n_tokens": 5.0,
            "ratio_mean": (10 + 10 + 10 + 1 + 0.1) / 5,
            "ratio_max": 10.0,
            "clip_frac_pos": 0.2,
            "clip_frac_neg": 0.2,
            "clip_frac_low": 0.2,
        }
    )
    assert all(isinstance(v, float) for v in stats.values())  # no entropy key unless given


def test_kl_penalty_is_off_by_default_and_k3_when_on():
    logp = _leaf([[-1.0, -2.0]])
    ref = torch.tensor([[-1.5, -2.0]])  # d = ref - logp = -0.5 and 0
    mask, adv = torch.ones(1, 2), torch.zeros(1)  # zero advantage isolates the penalty

    loss_off, stats_off = cispo_loss(logp, logp.detach(), adv, mask, ref_logprobs=ref)
    assert loss_off.item() == 0.0 and "kl" not in stats_off

    loss, stats = cispo_loss(
        logp, logp.detach(), adv, mask, aggregation="token_sum", ref_logprobs=ref, kl_coef=0.1
    )
    k3 = math.exp(-0.5) + 0.5 - 1  # exp(d) - d - 1
    assert loss.item() == pytest.approx(0.1 * k3)
    assert stats["kl"] == pytest.approx(k3 / 2)
    # d/dlogp (exp(d) - d - 1) = 1 - exp(d)
    torch.testing.assert_close(_grad(loss, logp), torch.tensor([[0.1 * (1 - math.exp(-0.5)), 0]]))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"aggregation": "seq_mean"}, "unknown aggregation"),
        ({"w_min": 6.0}, "w_min <= w_max"),
        ({"aggregation": "prompt_mean"}, "group_ids"),
        ({"kl_coef": 0.1}, "ref_logprobs"),
        ({"advantages": torch.zeros(3)}, "broadcast"),
        ({"mask": torch.ones(2, 2)}, "mask has shape"),
    ],
)
def test_bad_arguments_raise_value_error(kwargs, message):
    args = {
        "logprobs": torch.zeros(2, 3),
        "behaviour_logprobs": torch.zeros(2, 3),
        "advantages": torch.zeros(2),
        "mask": torch.ones(2, 3),
    }
    with pytest.raises(ValueError, match=message):
        cispo_loss(**(args | kwargs))


def test_empty_mask_gives_zero_loss_that_still_backpropagates():
    logp = _leaf([[-1.0, -2.0]])
    for aggregation in ("token_mean", "token_sum"):
        loss, stats = cispo_loss(
            logp, logp.detach(), torch.ones(1), torch.zeros(1, 2), aggregation=aggregation
        )
        assert loss.item() == 0.0 and stats["n_tokens"] == 0.0
        assert torch.all(_grad(loss, logp) == 0)


def test_token_entropy():
    uniform = torch.zeros(2, 7)
    torch.testing.assert_close(token_entropy(uniform), torch.full((2,), math.log(7)))
    banned = torch.tensor([[0.0, 0.0, -float("inf"), -float("inf")]])  # two allowed tokens
    torch.testing.assert_close(token_entropy(banned), torch.tensor([math.log(2)]))
    assert token_entropy(torch.tensor([[50.0, 0.0, 0.0]])).item() < 1e-18
