"""Trajectories become training sequences on the tokens the policy actually produced.

A tiny random model (built locally) drives the real harness over an in-memory fake of the tools.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from sleuth.harness.budget import BudgetConfig
from sleuth.harness.loop import Harness, HarnessConfig
from sleuth.harness.policy import PolicyOutput
from sleuth.harness.trajectory import Trajectory
from sleuth.policies.chatml import parse_tool_calls
from sleuth.policies.local_hf import LocalHFPolicy
from sleuth.policies.openai_completions import OpenAICompletionsPolicy
from sleuth.policies.scripted import ScriptedPolicy, call, turn
from sleuth.tools.spec import TOOL_SCHEMAS
from sleuth.train.render import (
    fit_to_length,
    recorded_turn_tokens,
    render_prompt_ids,
    reply_text,
    rerendered_turn_tokens,
    trajectory_to_sequences,
)
from sleuth.train.sequences import TrainSequence
from sleuth.train.tiny import build_tiny_model
from tests.fakes import FakeTools

os.environ.setdefault("HF_HUB_OFFLINE", "1")

CONFIG = HarnessConfig(
    budget=BudgetConfig(total=4096, per_call_tokens=512, reply_reserve=256, max_turns=4),
    max_reply_tokens=24,
    system_prompt="Find the documents that answer the query. Do not answer it.",
    parallel_tools=False,
)
SEARCH = '<tool_call>{"name": "search_corpus", "arguments": {"query": "stone bridge"}}</tool_call>'
ANSWER = '<Document id="d1"><Justification>Names the builder.</Justification></Document>'


def six_docs() -> FakeTools:
    """Six one-chunk documents, d0 .. d5."""
    return FakeTools(n_docs=6, chunks_per_doc=1, words=4)


class ForcedPolicy:
    """Scripted replies, but through the model's tokens: the ids are the tokenised reply plus the
    stop token and the log-probs come from a forward pass, exactly what sampling would record."""

    name = "forced"

    def __init__(self, policy: LocalHFPolicy, replies: list[str | Callable[[list], str]]):
        self.policy = policy
        self.replies = replies
        self.calls = 0

    def count_tokens(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> int:
        return self.policy.count_tokens(messages, tools)

    def generate(self, messages: list[dict], tools: list[dict], max_tokens: int) -> PolicyOutput:
        reply = self.replies[self.calls]
        self.calls += 1
        text = reply(messages) if callable(reply) else reply
        tok = self.policy.tokenizer
        prompt = self.policy.render(messages, tools)
        ids = tok(text, add_special_tokens=False)["input_ids"] + [
            tok.convert_tokens_to_ids("<|im_end|>")
        ]
        with torch.no_grad():
            logits = self.policy.model(input_ids=torch.tensor([prompt + ids])).logits[0]
        logp = torch.log_softmax(logits[len(prompt) - 1 : -1].float(), -1)
        logprobs = logp.gather(-1, torch.tensor(ids)[:, None]).squeeze(-1).tolist()
        return PolicyOutput(
            text=text,
            tool_calls=parse_tool_calls(text),
            prompt_token_ids=prompt,
            token_ids=ids,
            logprobs=logprobs,
            finish_reason="stop",
        )


def _prune_first_shown(messages: list[dict]) -> str:
    shown = re.findall(r"# DOCUMENT ID: (\S+)", str(messages[-1]["content"]))
    prune = json.dumps({"name": "prune_chunks", "arguments": {"chunk_ids": [shown[0]]}})
    return f"<tool_call>{prune}</tool_call>{SEARCH}"


@pytest.fixture(scope="module")
def policy(tmp_path_factory: pytest.TempPathFactory) -> LocalHFPolicy:
    return LocalHFPolicy.load(build_tiny_model(tmp_path_factory.mktemp("tiny")), seed=3)


@pytest.fixture(scope="module")
def forced_run(policy: LocalHFPolicy) -> Trajectory:
    """search -> prune one chunk and search again -> answer."""
    forced = ForcedPolicy(policy, [SEARCH, _prune_first_shown, ANSWER])
    return Harness(six_docs(), forced, CONFIG).run("Who built the stone bridge?")


def _targets(sequences: list[TrainSequence]) -> tuple[list[int], list[float]]:
    ids, logprobs = [], []
    for s in sequences:
        for token, m, lp in zip(s.input_ids, s.loss_mask, s.behaviour_logprobs, strict=True):
            if m:
                ids.append(token)
                logprobs.append(lp)
    return ids, logprobs


def _sampled(trajectory: Trajectory) -> tuple[list[int], list[float]]:
    outputs = [t.output for t in trajectory.turns if t.output is not None]
    return [i for o in outputs for i in o.token_ids], [x for o in outputs for x in o.logprobs]


def test_sampled_turns_train_on_exactly_the_sampled_tokens(policy: LocalHFPolicy) -> None:
    trajectory = Harness(six_docs(), policy, CONFIG).run("Who built the stone bridge?")
    sequences = trajectory_to_sequences(trajectory)  # recorded path: no tokenizer needed
    assert _targets(sequences) == _sampled(trajectory)
    for t in trajectory.turns:
        assert t.output.prompt_token_ids == policy.render(t.messages, trajectory.tool_schemas)
    first = trajectory.turns[0].output
    assert sequences[0].input_ids[: len(first.prompt_token_ids)] == tuple(first.prompt_token_ids)


def test_a_prune_splits_the_run_and_every_token_is_a_target_once(forced_run: Trajectory) -> None:
    assert [len(t.tool_events) for t in forced_run.turns] == [1, 2, 0]
    sequences = trajectory_to_sequences(forced_run)
    # turn 1 extends turn 0; the prune in turn 1 rewrites what turn 2 sees
    assert [s.turn_indices for s in sequences] == [(0, 1), (2,)]
    assert _targets(sequences) == _sampled(forced_run)
    for seq in sequences:  # each sequence starts with the prompt its first turn was fed
        prompt = forced_run.turns[seq.turn_indices[0]].output.prompt_token_ids
        assert seq.input_ids[: len(prompt)] == tuple(prompt)
        assert not any(seq.loss_mask[: len(prompt)])


def test_re_rendering_reproduces_the_policys_tokens(
    policy: LocalHFPolicy, forced_run: Trajectory
) -> None:
    recorded = recorded_turn_tokens(forced_run)
    rerendered = rerendered_turn_tokens(forced_run, policy.tokenizer)
    assert [list(p) for p, _, _ in rerendered] == [list(p) for p, _, _ in recorded]
    assert [list(c) for _, c, _ in rerendered] == [list(c) for _, c, _ in recorded]
    assert all(lp == 0.0 for _, _, lps in rerendered for lp in lps)


def test_a_teacher_without_token_ids_is_rendered_as_the_student_would(
    policy: LocalHFPolicy,
) -> None:
    teacher = ScriptedPolicy([turn(call("search_corpus", query="stone bridge")), ANSWER])
    trajectory = Harness(six_docs(), teacher, CONFIG).run("Who built the stone bridge?")
    with pytest.raises(ValueError, match="tokenizer"):
        trajectory_to_sequences(trajectory)
    assert reply_text(trajectory.turns[0].output) == SEARCH
    sequences = trajectory_to_sequences(trajectory, policy.tokenizer)
    assert [s.turn_indices for s in sequences] == [(0, 1)]
    prompt = render_prompt_ids(
        policy.tokenizer, trajectory.turns[0].messages, trajectory.tool_schemas
    )
    assert prompt == policy.render(trajectory.turns[0].messages, trajectory.tool_schemas)
    ids, _ = _targets(sequences)
    assert policy.tokenizer.decode(ids) == f"{SEARCH}<|im_end|>{ANSWER}<|im_end|>"


def test_fit_to_length_clips_and_drops_sequences_without_targets() -> None:
    short = TrainSequence((1, 2, 3), (0, 1, 1), (0.0, -0.1, -0.2), (0,))
    long = TrainSequence((1, 2, 3, 4, 5), (0, 1, 0, 1, 1), (0.0, -0.1, 0.0, -0.3, -0.4), (1,))
    late = TrainSequence((1, 2, 3, 4), (0, 0, 0, 1), (0.0, 0.0, 0.0, -0.5), (2,))
    fitted, truncated, dropped = fit_to_length([short, long, late], max_seq_len=3)
    assert fitted == [short, TrainSequence((1, 2, 3), (0, 1, 0), (0.0, -0.1, 0.0), (1,))]
    assert (truncated, dropped) == (2, 1)


class _FakeCompletions:
    """Answers like vLLM's /v1/completions with ``return_tokens_as_token_ids``."""

    def __init__(self, ids: list[int]):
        self.ids = ids
        self.requests: list[dict] = []

    def create(self, **request: Any) -> SimpleNamespace:
        self.requests.append(request)
        logprobs = SimpleNamespace(
            tokens=[f"token_id:{i}" for i in self.ids], token_logprobs=[-0.5] * len(self.ids)
        )
        choice = SimpleNamespace(logprobs=logprobs, finish_reason="stop")
        return SimpleNamespace(choices=[choice])


def test_the_vllm_seam_records_prompt_ids_sampled_ids_and_log_probs(
    policy: LocalHFPolicy,
) -> None:
    tok = policy.tokenizer
    ids = tok(SEARCH, add_special_tokens=False)["input_ids"] + [
        tok.convert_tokens_to_ids("<|im_end|>")
    ]
    completions = _FakeCompletions(ids)
    client = SimpleNamespace(completions=completions)
    remote = OpenAICompletionsPolicy(client, "student", tok, seed=7)
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}]
    out = remote.generate(messages, TOOL_SCHEMAS, max_tokens=64)
    (request,) = completions.requests
    assert request["prompt"] == policy.render(messages, TOOL_SCHEMAS) == out.prompt_token_ids
    assert request["extra_body"]["return_tokens_as_token_ids"] is True
    assert (out.token_ids, out.logprobs) == (ids, [-0.5] * len(ids))
    assert out.text == SEARCH and [c.name for c in out.tool_calls] == ["search_corpus"]
