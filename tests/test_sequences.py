"""Rendering turns into training sequences, collating them, and per-token log-probs."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from sleuth.train import (
    TrainSequence,
    collate_sequences,
    sequence_logprobs,
    turns_to_sequences,
)


def test_turns_merge_while_each_prompt_extends_the_sequence():
    turns = [
        ([1, 2, 3], [4, 5], [-0.1, -0.2]),
        ([1, 2, 3, 4, 5, 6, 7], [8], [-0.3]),  # observation 6, 7 appended
        ([1, 2, 3, 4, 5, 6, 7, 8], [9], [-0.4]),  # nothing appended between turns
    ]
    assert turns_to_sequences(turns) == [
        TrainSequence(
            input_ids=(1, 2, 3, 4, 5, 6, 7, 8, 9),
            loss_mask=(0, 0, 0, 1, 1, 0, 0, 1, 1),
            behaviour_logprobs=(0.0, 0.0, 0.0, -0.1, -0.2, 0.0, 0.0, -0.3, -0.4),
            turn_indices=(0, 1, 2),
        )
    ]


def test_a_prune_starts_a_new_sequence_with_the_rewritten_prompt_as_context():
    turns = [
        ([1, 2, 3], [4, 5], [-0.1, -0.2]),
        ([1, 2, 3, 4, 5, 6, 7], [8], [-0.3]),
        ([1, 2, 3, 8, 9], [10], [-0.5]),  # the tool output 4..7 was pruned
        ([1, 2, 3, 8, 9, 10, 11], [12], [-0.6]),
    ]
    first, second = turns_to_sequences(turns)
    assert first.input_ids == (1, 2, 3, 4, 5, 6, 7, 8) and first.turn_indices == (0, 1)
    assert second == TrainSequence(
        input_ids=(1, 2, 3, 8, 9, 10, 11, 12),
        loss_mask=(0, 0, 0, 0, 0, 1, 0, 1),
        behaviour_logprobs=(0.0, 0.0, 0.0, 0.0, 0.0, -0.5, 0.0, -0.6),
        turn_indices=(2, 3),
    )


def test_a_template_that_re_renders_the_completion_splits_too():
    # the chat template drops the sampled end token (7) when it re-renders the assistant turn:
    # merging would train on a context the policy never saw
    turns = [([1, 2], [3, 7], [-0.1, -0.2]), ([1, 2, 3, 8], [9], [-0.3])]
    assert [s.turn_indices for s in turns_to_sequences(turns)] == [(0,), (1,)]


def test_mismatched_completion_and_logprobs_raise():
    with pytest.raises(ValueError, match="turn 1"):
        turns_to_sequences([([1], [2], [-0.1]), ([1, 2], [3, 4], [-0.1])])
    assert turns_to_sequences([]) == []


@st.composite
def trajectories(draw) -> list[tuple[list[int], list[int], list[float]]]:
    """Turns of a simulated agent: each prompt appends observations and sometimes prunes."""
    tokens = st.lists(st.integers(0, 5), max_size=4)  # a small alphabet makes prefix collisions
    context = draw(tokens)
    turns = []
    for k in range(draw(st.integers(1, 6))):
        if context and draw(st.booleans()):  # prune a slice of the earlier context
            i = draw(st.integers(0, len(context) - 1))
            j = draw(st.integers(i + 1, len(context)))
            context = context[:i] + context[j:]
        prompt = context + draw(tokens)
        completion = draw(tokens)
        logprobs = [-(k + (t + 1) / 10) for t in range(len(completion))]  # unique per token
        turns.append((prompt, completion, logprobs))
        context = prompt + completion
    return turns


@settings(max_examples=300)
@given(trajectories())
def test_every_completion_token_is_a_target_exactly_once_in_its_true_context(turns):
    sequences_S = turns_to_sequences(turns)

    # each turn lands in exactly one sequence, in order
    assert [k for s in sequences_S for k in s.turn_indices] == list(range(len(turns)))
    # the targets, in order, are exactly the sampled tokens and their log-probs
    targets = [
        (tok, lp)
        for s in sequences_S
        for tok, m, lp in zip(s.input_ids, s.loss_mask, s.behaviour_logprobs, strict=True)
        if m
    ]
    assert targets == [(tok, lp) for _, c, lps in turns for tok, lp in zip(c, lps, strict=True)]
    for s in sequences_S:
        assert len(s.input_ids) == len(s.loss_mask) == len(s.behaviour_logprobs)
        assert all(
            lp == 0.0 for m, lp in zip(s.loss_mask, s.behaviour_logprobs, strict=True) if not m
        )
        # every completion is predicted from exactly the prompt the policy was fed
        for k in s.turn_indices:
            prompt, completion, _ = turns[k]
            rendered = list(prompt) + list(completion)
            assert list(s.input_ids[: len(rendered)]) == rendered
            assert all(s.loss_mask[len(prompt) : len(rendered)])
    # a new sequence starts exactly where a prompt does not extend the previous turn
    starts = [s.turn_indices[0] for s in sequences_S]
    expected = [0] + [
        k
        for k in range(1, len(turns))
        if turns[k][0][: len(turns[k - 1][0]) + len(turns[k - 1][1])]
        != turns[k - 1][0] + turns[k - 1][1]
    ]
    assert starts == expected


def test_collate_right_pads_and_masks_the_padding():
    sequences_S = turns_to_sequences([([1, 2], [3], [-0.5])]) + turns_to_sequences(
        [([4], [5, 6, 7], [-0.1, -0.2, -0.3])]
    )
    batch = collate_sequences(sequences_S, pad_id=9)
    assert batch.input_ids.tolist() == [[1, 2, 3, 9], [4, 5, 6, 7]]
    assert batch.attention_mask.tolist() == [[1, 1, 1, 0], [1, 1, 1, 1]]
    assert batch.loss_mask.tolist() == [[False, False, True, False], [False, True, True, True]]
    torch.testing.assert_close(
        batch.behaviour_logprobs, torch.tensor([[0, 0, -0.5, 0], [0, -0.1, -0.2, -0.3]])
    )


class _Bigram(torch.nn.Module):
    """Next-token logits depend on the current token only, so log-probs are easy to check."""

    def __init__(self, vocab: int = 6):
        super().__init__()
        self.table = torch.nn.Embedding(vocab, vocab)

    def forward(self, input_ids, attention_mask=None):
        return SimpleNamespace(logits=self.table(input_ids))


def test_sequence_logprobs_are_shifted_to_align_with_the_input():
    torch.manual_seed(0)
    model = _Bigram()
    input_ids = torch.tensor([[0, 3, 3, 5, 1], [2, 4, 0, 1, 1]])
    logp, entropy = sequence_logprobs(model, input_ids, temperature=2.0)

    assert logp.shape == entropy.shape == input_ids.shape
    assert torch.all(logp[:, 0] == 0) and torch.all(entropy[:, 0] == 0)
    table = model.table.weight.detach() / 2.0
    for b in range(2):
        for t in range(1, 5):
            dist = torch.log_softmax(table[input_ids[b, t - 1]], dim=-1)
            assert logp[b, t].item() == pytest.approx(dist[input_ids[b, t]].item(), abs=1e-6)
            expected_entropy = -(dist.exp() * dist).sum().item()
            assert entropy[b, t].item() == pytest.approx(expected_entropy, abs=1e-6)
    assert logp.requires_grad and not entropy.requires_grad
    assert 0 < entropy[0, 1].item() <= math.log(6)
