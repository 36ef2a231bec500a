"""The harmony policy: offline rendering and parsing, and a round trip through the real
``openai`` client against a scripted completions server on 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from fastapi.responses import JSONResponse
from openai_harmony import Conversation, Message, Role

from sleuth.policies.harmony import (
    HarmonyPolicy,
    harmony_encoding,
    parse_completion,
    render_prompt,
)
from tests.openai_stub import StubServer, free_port

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "search_corpus",
            "description": "Hybrid search over the corpus.",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string"}},
                "required": ["query"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "prune_chunks",
            "description": "Remove chunks from the context.",
            "parameters": {
                "type": "object",
                "properties": {"chunk_ids": {"type": "array", "items": {"type": "string"}}},
                "required": ["chunk_ids"],
            },
        },
    },
]


def _call(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


TURN1 = {
    "role": "assistant",
    "content": None,
    "reasoning": "Two concepts: the bridge and its engineer.",
    "tool_calls": [
        _call("c1", "search_corpus", {"query": "stone bridge dispute"}),
        _call("c2", "search_corpus", {"query": "bridge engineer"}),
    ],
}
CONVERSATION = [
    {"role": "system", "content": "You are a retrieval subagent. Do not answer."},
    {"role": "user", "content": "<query>Who designed the disputed bridge?</query>"},
    TURN1,
    {"role": "tool", "tool_call_id": "c1", "content": "# DOCUMENT ID: doc_4_1 (18 tokens)\nstone"},
    {"role": "tool", "tool_call_id": "c2", "content": "# DOCUMENT ID: doc_9_0 (12 tokens)\nbuilt"},
]


def _completion(*messages: Message) -> list[int]:
    """What a gpt-oss server samples after the prompt's trailing ``<|start|>assistant``."""
    tokens = harmony_encoding().render_conversation(Conversation.from_messages(list(messages)))
    return tokens[2:]  # drop the leading <|start|> assistant, already in the prompt


def _two_call_completion() -> list[int]:
    assistant = Role.ASSISTANT
    return _completion(
        Message.from_role_and_content(assistant, "Search both, then prune.").with_channel(
            "analysis"
        ),
        Message.from_role_and_content(assistant, '{"query": "bridge engineer 1890"}')
        .with_channel("commentary")
        .with_recipient("functions.search_corpus")
        .with_content_type("<|constrain|>json"),
        Message.from_role_and_content(assistant, '{"chunk_ids": ["doc_4_1"]}')
        .with_channel("commentary")
        .with_recipient("functions.prune_chunks")
        .with_content_type("<|constrain|>json"),
    )


def test_render_conversation_with_tools() -> None:
    ids = render_prompt(CONVERSATION, TOOLS)
    text = harmony_encoding().decode(ids)
    assert text.startswith("<|start|>system<|message|>")
    assert "Reasoning: medium" in text
    assert "# Instructions\n\nYou are a retrieval subagent. Do not answer." in text
    assert "namespace functions {" in text and "type search_corpus = (_: {" in text
    assert "Two concepts: the bridge and its engineer." in text  # kept: no final answer yet
    assert text.count("<|start|>assistant to=functions.search_corpus<|channel|>commentary") == 2
    assert '{"query": "bridge engineer"}<|call|>' in text
    assert "<|start|>functions.search_corpus to=assistant<|channel|>commentary<|message|>" in text
    assert text.endswith("<|start|>assistant")
    policy = HarmonyPolicy(base_url="http://127.0.0.1:9/v1")
    assert policy.count_tokens(CONVERSATION, TOOLS) == len(ids)


def test_parse_completion_with_two_tool_calls() -> None:
    parsed = parse_completion(_two_call_completion())
    assert parsed.reasoning == "Search both, then prune."
    assert parsed.text == ""
    assert [(c.name, json.loads(c.arguments)) for c in parsed.tool_calls] == [
        ("search_corpus", {"query": "bridge engineer 1890"}),
        ("prune_chunks", {"chunk_ids": ["doc_4_1"]}),
    ]
    assert len({c.id for c in parsed.tool_calls}) == 2


def test_parse_final_truncated_parallel_and_junk() -> None:
    final = Message.from_role_and_content(Role.ASSISTANT, "1. doc_9 - names him.")
    tokens = _completion(final.with_channel("final"))
    assert parse_completion(tokens).text == "1. doc_9 - names him."
    assert parse_completion(tokens[:-1]).text == "1. doc_9 - names him."  # no stop token
    uses = {"tool_uses": [{"recipient_name": "functions.search_corpus", "parameters": {"q": 1}}]}
    wrapper = Message.from_role_and_content(Role.ASSISTANT, json.dumps(uses))
    wrapped = _completion(
        wrapper.with_channel("commentary").with_recipient("multi_tool_use.parallel")
    )
    assert [(c.name, c.arguments) for c in parse_completion(wrapped).tool_calls] == [
        ("search_corpus", '{"q": 1}')
    ]
    junk = harmony_encoding().encode("no header <|call|> at all", allowed_special="all")
    assert parse_completion(junk).tool_calls == []


def test_next_prompt_extends_prompt_and_completion() -> None:
    """The harmony rendering keeps a turn's tokens verbatim, so training sequences stay joined."""
    prompt = render_prompt(CONVERSATION, TOOLS)
    completion = _two_call_completion()
    parsed = parse_completion(completion)
    turn = {
        "role": "assistant",
        "content": parsed.text,
        "reasoning": parsed.reasoning,
        "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in parsed.tool_calls
        ],
    }
    results = [{"role": "tool", "tool_call_id": c.id, "content": "ok"} for c in parsed.tool_calls]
    following = render_prompt([*CONVERSATION, turn, *results], TOOLS)
    assert following[: len(prompt) + len(completion)] == prompt + completion


# ---------------------------------------------------------------- scripted server


@pytest.fixture()
def server() -> Iterator[StubServer]:
    """An OpenAI-compatible ``/v1/completions``; tests append its replies to ``script``."""
    with StubServer([], path="/v1/completions") as srv:
        yield srv


def _status(code: int, body: dict[str, Any]) -> JSONResponse:
    return JSONResponse(body, status_code=code)


def _reply(tokens: list[int], style: str) -> dict[str, Any]:
    """A completions body as vLLM gives it: token ids in ``token_ids`` (return_token_ids),
    as ``token_id:N`` strings (return_tokens_as_token_ids), or text only."""
    enc = harmony_encoding()
    logprobs = [-0.25 - i / 100 for i in range(len(tokens))]
    choice: dict[str, Any] = {"index": 0, "text": enc.decode(tokens), "finish_reason": "stop"}
    if style != "text":
        names = [f"token_id:{t}" for t in tokens] if style == "token_id" else ["x"] * len(tokens)
        choice["logprobs"] = {
            "tokens": names,
            "token_logprobs": logprobs,
            "text_offset": [0] * len(tokens),
            "top_logprobs": None,
        }
    if style == "vllm":
        choice["token_ids"] = tokens
    return {
        "id": "cmpl-1",
        "object": "text_completion",
        "created": 0,
        "model": "chromadb/context-1",
        "choices": [choice],
        "usage": {"prompt_tokens": 1, "completion_tokens": len(tokens), "total_tokens": 1},
    }


@pytest.mark.parametrize("style", ["vllm", "token_id", "text"])
def test_generate_through_openai_client(server: StubServer, style: str) -> None:
    tokens = _two_call_completion()
    server.script.append(_status(200, _reply(tokens, style)))
    policy = HarmonyPolicy(base_url=server.base_url, temperature=0.6)
    out = policy.generate(CONVERSATION, TOOLS, max_tokens=512)

    (sent,) = server.requests
    assert sent["prompt"] == render_prompt(CONVERSATION, TOOLS) == out.prompt_token_ids
    assert sent["model"] == "chromadb/context-1"
    assert (sent["max_tokens"], sent["logprobs"], sent["temperature"]) == (512, 1, 0.6)
    assert set(sent["stop_token_ids"]) == set(
        harmony_encoding().stop_tokens_for_assistant_actions()
    )
    assert sent["skip_special_tokens"] is False
    assert [c.name for c in out.tool_calls] == ["search_corpus", "prune_chunks"]
    assert out.reasoning == "Search both, then prune."
    assert out.token_ids == tokens
    if style == "text":
        assert out.logprobs is None
    else:
        assert out.logprobs == pytest.approx([-0.25 - i / 100 for i in range(len(tokens))])
    assert out.finish_reason == "stop" and out.usage["completion_tokens"] == len(tokens)


def test_retries_server_errors_then_succeeds(server: StubServer) -> None:
    final = _completion(Message.from_role_and_content(Role.ASSISTANT, "done").with_channel("final"))
    server.script += [
        _status(503, {"error": "busy"}),
        _status(500, {"error": "oops"}),
        _status(200, _reply(final, "vllm")),
    ]
    policy = HarmonyPolicy(base_url=server.base_url)
    out = policy.generate(CONVERSATION, TOOLS, max_tokens=64)
    assert out.text == "done" and out.tool_calls == []
    assert len(server.requests) == 3


def test_connection_error_is_raised_after_retries() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    policy = HarmonyPolicy(base_url=url, max_retries=1)
    with pytest.raises(openai.APIConnectionError):
        policy.generate(CONVERSATION, TOOLS, max_tokens=8)


def test_text_prompt_format_sends_the_decoded_prompt(server: StubServer) -> None:
    final = _completion(Message.from_role_and_content(Role.ASSISTANT, "done").with_channel("final"))
    server.script.append(_status(200, _reply(final, "token_id")))
    policy = HarmonyPolicy(base_url=server.base_url, prompt_format="text")
    assert policy.generate(CONVERSATION, TOOLS, max_tokens=64).text == "done"
    prompt = render_prompt(CONVERSATION, TOOLS)
    assert server.requests[0]["prompt"] == harmony_encoding().decode(prompt)
