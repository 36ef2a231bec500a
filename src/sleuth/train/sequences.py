"""From a multi-turn trajectory to training sequences, and their log-probs under a model.

Pruning rewrites earlier context, so the prompt of one turn is not always the previous prompt and
completion followed by new observations. Consecutive turns share one sequence while each prompt
extends the tokens so far exactly; otherwise a new sequence starts, carrying the rewritten prompt
as context. Every sampled token is then a target exactly once, always with the context the policy
actually saw, and observation, system and tool tokens carry no loss. Sequences hold the sampled
token ids themselves, so nothing is re-tokenised.

Axes: ``S`` sequences, ``B`` batch rows, ``T`` token positions, ``V`` vocabulary.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

from sleuth.train.cispo import token_entropy

TurnTokens = tuple[Sequence[int], Sequence[int], Sequence[float]]
"""One policy turn: (prompt ids the policy was fed, sampled completion ids, their log-probs)."""


@dataclass(frozen=True)
class TrainSequence:
    """One training row: context and sampled tokens, with which positions are targets."""

    input_ids: tuple[int, ...]
    """Tokens fed to the model, context and completions in order."""
    loss_mask: tuple[int, ...]
    """1 where ``input_ids[t]`` was sampled by the policy (a target), else 0."""
    behaviour_logprobs: tuple[float, ...]
    """The sampler's log-prob of ``input_ids[t]`` where ``loss_mask`` is 1, else 0.0."""
    turn_indices: tuple[int, ...]
    """The trajectory turns whose completions this sequence trains on."""


class SequenceBatch(NamedTuple):
    """Right-padded tensors of a list of sequences, ready for a forward pass and the loss."""

    input_ids: Tensor  # (B, T) long; pad_id past each row's end
    attention_mask: Tensor  # (B, T) long; 1 on real tokens
    loss_mask: Tensor  # (B, T) bool
    behaviour_logprobs: Tensor  # (B, T) float32; 0 off the loss mask


def turns_to_sequences(turns: Sequence[TurnTokens]) -> list[TrainSequence]:
    """Merge turns into sequences, starting a new one where a prompt does not extend the last.

    Args:
        turns: the policy turns of one trajectory, in order.

    Returns:
        The sequences in turn order; their mask-1 tokens, concatenated, are the completions.

    Raises:
        ValueError: if a turn has a different number of completion ids and log-probs.
    """
    sequences_S: list[TrainSequence] = []
    ids: list[int] = []
    mask: list[int] = []
    logprobs: list[float] = []
    turn_indices: list[int] = []
    for k, (prompt, completion, completion_logprobs) in enumerate(turns):
        if len(completion) != len(completion_logprobs):
            raise ValueError(
                f"turn {k}: {len(completion)} completion ids, {len(completion_logprobs)} log-probs"
            )
        if turn_indices and not _extends(prompt, ids):
            sequences_S.append(_freeze(ids, mask, logprobs, turn_indices))
            ids, mask, logprobs, turn_indices = [], [], [], []
        observation = list(prompt[len(ids) :])
        ids += observation + list(completion)
        mask += [0] * len(observation) + [1] * len(completion)
        logprobs += [0.0] * len(observation) + [float(x) for x in completion_logprobs]
        turn_indices.append(k)
    if turn_indices:
        sequences_S.append(_freeze(ids, mask, logprobs, turn_indices))
    return sequences_S


def collate_sequences(sequences_S: Sequence[TrainSequence], pad_id: int = 0) -> SequenceBatch:
    """Right-pad sequences into a batch; padding is masked out of attention and loss."""
    B = len(sequences_S)
    T = max((len(s.input_ids) for s in sequences_S), default=0)
    input_ids = torch.full((B, T), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((B, T), dtype=torch.long)
    loss_mask = torch.zeros((B, T), dtype=torch.bool)
    behaviour_logprobs = torch.zeros((B, T), dtype=torch.float32)
    for b, s in enumerate(sequences_S):
        n = len(s.input_ids)
        input_ids[b, :n] = torch.tensor(s.input_ids, dtype=torch.long)
        attention_mask[b, :n] = 1
        loss_mask[b, :n] = torch.tensor(s.loss_mask, dtype=torch.bool)
        behaviour_logprobs[b, :n] = torch.tensor(s.behaviour_logprobs, dtype=torch.float32)
    return SequenceBatch(input_ids, attention_mask, loss_mask, behaviour_logprobs)


def sequence_logprobs(
    model: torch.nn.Module,
    input_ids: Tensor,
    attention_mask: Tensor | None = None,
    temperature: float = 1.0,
) -> tuple[Tensor, Tensor]:
    """Per-token log-probs and entropies under a Hugging Face causal LM, aligned with the input.

    Position ``t`` holds ``log p(input_ids[t] | input_ids[:t])`` and the entropy of that
    next-token distribution; position 0 has no context and holds 0 in both. Log-probs carry the
    gradient; entropies are detached (they are logged, not optimised).

    Args:
        model: a causal LM whose output has ``.logits`` of shape (B, T, V).
        input_ids: (B, T) token ids.
        attention_mask: (B, T), 1 on real tokens; right padding only (positions count from 0).
        temperature: the sampler's temperature. Behaviour log-probs come from the tempered
            distribution, so the trainer must divide by the same value for the ratio to be 1.

    Returns:
        ``(logprobs_BT, entropy_BT)``, float32.
    """
    logits_BTV = model(input_ids=input_ids, attention_mask=attention_mask).logits
    logp_BTV = torch.log_softmax(logits_BTV[:, :-1].float() / temperature, dim=-1)
    logprobs_BT = logp_BTV.gather(-1, input_ids[:, 1:, None]).squeeze(-1)
    entropy_BT = token_entropy(logp_BTV.detach())  # log-probs are valid logits
    return F.pad(logprobs_BT, (1, 0)), F.pad(entropy_BT, (1, 0))


def _extends(prompt: Sequence[int], prefix: list[int]) -> bool:
    return len(prompt) >= len(prefix) and list(prompt[: len(prefix)]) == prefix


def _freeze(
    ids: list[int], mask: list[int], logprobs: list[float], turn_indices: list[int]
) -> TrainSequence:
    return TrainSequence(tuple(ids), tuple(mask), tuple(logprobs), tuple(turn_indices))
