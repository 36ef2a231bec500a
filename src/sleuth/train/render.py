"""From a harness trajectory to training sequences, on the student's own tokens.

Two paths, chosen by :func:`trajectory_to_sequences`:

* **Recorded** (:func:`recorded_turn_tokens`). The policy that ran the trajectory recorded, for
  every turn, the prompt ids it was fed, the ids it sampled and their log-probs
  (``LocalHFPolicy``; a server that returns token ids and log-probs). RL always takes this path:
  the sequences hold the sampled ids themselves, so nothing is re-tokenised and each behaviour
  log-prob sits on the token it was computed for.
* **Re-rendered** (:func:`rerendered_turn_tokens`). The policy recorded no token ids (an OpenAI
  chat endpoint, the scripted heuristic agent). SFT takes this path for teacher trajectories:
  each turn's messages are rendered with the student's chat template exactly as ``LocalHFPolicy``
  renders them, and the teacher's reply is written the way the student writes one (its text, then
  its tool calls as ``<tool_call>`` blocks, then the stop token). Behaviour log-probs are 0 on
  this path; SFT does not read them. The teacher's reasoning is not trained on: the small chat
  templates have no channel for it.

Either way, :func:`~sleuth.train.sequences.turns_to_sequences` cuts the turns into sequences
wherever a prompt does not extend the previous prompt and completion (a prune).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sleuth.harness.policy import PolicyOutput, assistant_message
from sleuth.harness.trajectory import Trajectory
from sleuth.policies.chatml import render_ids as render_prompt_ids
from sleuth.policies.chatml import stop_token_id, to_chat
from sleuth.train.sequences import TrainSequence, TurnTokens, turns_to_sequences


def has_token_ids(trajectory: Trajectory) -> bool:
    """True when every answered turn (vacuously, when none) recorded ids and log-probs."""
    outputs = [t.output for t in trajectory.turns if t.output is not None]
    return all(
        o.prompt_token_ids is not None and o.token_ids is not None and o.logprobs is not None
        for o in outputs
    )


def recorded_turn_tokens(trajectory: Trajectory) -> list[TurnTokens]:
    """The (prompt ids, sampled ids, behaviour log-probs) the policy recorded for each turn.

    Raises:
        ValueError: a turn has no recorded ids (re-render it with :func:`rerendered_turn_tokens`).
    """
    turns: list[TurnTokens] = []
    for turn in trajectory.turns:
        out = turn.output
        if out is None:  # the policy raised; nothing was sampled
            continue
        if out.prompt_token_ids is None or out.token_ids is None or out.logprobs is None:
            raise ValueError(
                f"turn {turn.index} of run {trajectory.run_id} recorded no token ids or log-probs;"
                " re-render it with the student's tokenizer (rerendered_turn_tokens)"
            )
        turns.append((out.prompt_token_ids, out.token_ids, out.logprobs))
    return turns


def reply_text(output: PolicyOutput) -> str:
    """A reply as the student writes it: text, then any tool calls as ``<tool_call>`` blocks."""
    return to_chat([assistant_message(output.text, output.tool_calls)], [])[0]["content"]


def rerendered_turn_tokens(trajectory: Trajectory, tokenizer: Any) -> list[TurnTokens]:
    """Each answered turn rendered with ``tokenizer``'s chat template; log-probs are 0.

    A reply cut off by the length limit gets no stop token, so the student does not learn to
    stop where the teacher was interrupted.
    """
    stop = stop_token_id(tokenizer)
    tools = trajectory.tool_schemas
    turns: list[TurnTokens] = []
    for turn in trajectory.turns:
        out = turn.output
        if out is None:
            continue
        prompt = render_prompt_ids(tokenizer, turn.messages, tools)
        completion = list(tokenizer(reply_text(out), add_special_tokens=False)["input_ids"])
        if out.finish_reason != "length":
            completion.append(stop)
        turns.append((prompt, completion, [0.0] * len(completion)))
    return turns


def trajectory_to_sequences(trajectory: Trajectory, tokenizer: Any = None) -> list[TrainSequence]:
    """Training sequences of one trajectory: recorded ids when present, else re-rendered.

    Args:
        trajectory: a finished (or cut-off) harness trajectory.
        tokenizer: the student's tokenizer; needed only when the policy recorded no ids.

    Raises:
        ValueError: no ids were recorded and no tokenizer was given.
    """
    if has_token_ids(trajectory):
        return turns_to_sequences(recorded_turn_tokens(trajectory))
    if tokenizer is None:
        raise ValueError(
            f"run {trajectory.run_id} ({trajectory.policy}) recorded no token ids; pass the "
            "student's tokenizer to re-render it"
        )
    return turns_to_sequences(rerendered_turn_tokens(trajectory, tokenizer))


def clip_sequence(sequence: TrainSequence, max_seq_len: int) -> TrainSequence:
    """The first ``max_seq_len`` tokens of a sequence (later targets are lost, not shifted)."""
    if len(sequence.input_ids) <= max_seq_len:
        return sequence
    return TrainSequence(
        sequence.input_ids[:max_seq_len],
        sequence.loss_mask[:max_seq_len],
        sequence.behaviour_logprobs[:max_seq_len],
        sequence.turn_indices,
    )


def has_targets(sequence: TrainSequence) -> bool:
    """Whether any position after the first is a target (position 0 has no context)."""
    return any(sequence.loss_mask[1:])


def fit_to_length(
    sequences: Sequence[TrainSequence], max_seq_len: int
) -> tuple[list[TrainSequence], int, int]:
    """Clip sequences to ``max_seq_len`` tokens and drop those left without a target.

    Returns:
        ``(sequences, n_truncated, n_dropped)``.
    """
    clipped = [clip_sequence(s, max_seq_len) for s in sequences]
    fitted = [s for s in clipped if has_targets(s)]
    truncated = sum(len(s.input_ids) > max_seq_len for s in sequences)
    return fitted, truncated, len(sequences) - len(fitted)
