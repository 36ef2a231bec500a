"""A policy over any OpenAI-compatible chat endpoint with tool calling (vLLM, llama.cpp
server, hosted APIs), through the official ``openai`` client.

Transient failures are retried by the client itself (see :mod:`sleuth.policies.http`: a reply
that timed out is never resent, a repeated 5xx is final); anything else, or the last failure,
raises and the harness records a policy error. Reasoning (``reasoning_content`` or ``reasoning``), log-probs and token ids are
returned when the server provides them (vLLM: ``logprobs=True``; token ids with
``extra_body={"return_token_ids": True}``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import openai
from pydantic import BaseModel

from sleuth.errors import SleuthError
from sleuth.harness.policy import PolicyOutput, ToolCall
from sleuth.policies.counting import ChatTokenCounter
from sleuth.policies.http import openai_client

Messages = list[dict[str, Any]]


class EndpointError(SleuthError, RuntimeError):
    """The endpoint answered, but not with a usable chat completion."""


class OpenAIChatPolicy:
    """One chat-completions request per turn, with the four tools and parallel calls on.

    Args:
        model: the model name the server expects.
        base_url: e.g. ``http://127.0.0.1:8000/v1``; None uses the client's default.
        api_key: local servers ignore it, hence ``"EMPTY"``.
        temperature: sampling temperature (None: the server's default).
        timeout_s: per-request time limit (a reply that runs past it is not resent).
        max_retries: the client's extra attempts after a transient failure.
        logprobs: ask for the sampled tokens' log-probs (needed for RL).
        parallel_tool_calls: sent as is; None leaves the field out (servers that reject it).
        max_tokens_field: ``max_tokens`` or ``max_completion_tokens`` (newer hosted models).
        extra_body: extra request fields (e.g. ``{"return_token_ids": True}`` for vLLM).
        count_tokens: ``(messages, tools) -> int``; default o200k over the JSON of each message.
        client: a ready client (tests); its settings then win over the ones above.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str = "EMPTY",
        temperature: float | None = None,
        timeout_s: float = 600.0,
        max_retries: int = 4,
        logprobs: bool = False,
        parallel_tool_calls: bool | None = True,
        max_tokens_field: str = "max_tokens",
        extra_body: dict[str, Any] | None = None,
        count_tokens: Callable[[Messages, Messages], int] | None = None,
        client: openai.OpenAI | None = None,
    ):
        self.name = f"openai-chat:{model}"
        self.client = client or openai_client(base_url, api_key, timeout_s, max_retries)
        self.model = model
        self._count = count_tokens or ChatTokenCounter()
        self._fixed: dict[str, Any] = {"tool_choice": "auto"}
        if temperature is not None:
            self._fixed["temperature"] = temperature
        if parallel_tool_calls is not None:
            self._fixed["parallel_tool_calls"] = parallel_tool_calls
        if logprobs:
            self._fixed["logprobs"] = True
        if extra_body:
            self._fixed["extra_body"] = extra_body
        self._max_tokens_field = max_tokens_field
        self.settings = {
            "model": model,
            "base_url": str(self.client.base_url),
            "timeout_s": timeout_s,
            "max_retries": self.client.max_retries,
            "max_tokens_field": max_tokens_field,
            **self._fixed,
        }

    def count_tokens(self, messages: Messages, tools: Messages) -> int:
        return self._count(messages, tools)

    def generate(self, messages: Messages, tools: Messages, max_tokens: int) -> PolicyOutput:
        request = {
            "model": self.model,
            "messages": messages,
            "tools": tools,
            self._max_tokens_field: max_tokens,
            **self._fixed,
        }
        return parse_chat_completion(as_json(self.client.chat.completions.create(**request)))


def parse_chat_completion(raw: Any) -> PolicyOutput:
    """The one chat-completion parser: a chat completion as JSON (what the ``openai`` client
    returns, dumped, or a recorded response) as a :class:`PolicyOutput`, vLLM / llama.cpp extras
    included (reasoning, token ids, log-probs). A tool call keeps the id it came with (``""``
    when none) and its arguments as text.

    Raises:
        EndpointError: no ``choices[0].message``.
    """
    choice = _first(_get(raw, "choices"))
    message = _get(choice, "message")
    if not isinstance(message, Mapping):
        raise EndpointError(f"the endpoint returned no choices: {raw!r:.300}")
    return PolicyOutput(
        text=message.get("content") or "",
        reasoning=message.get("reasoning_content") or message.get("reasoning"),
        tool_calls=[_tool_call(tc) for tc in message.get("tool_calls") or []],
        prompt_token_ids=raw.get("prompt_token_ids"),
        token_ids=_get(choice, "token_ids"),
        logprobs=_logprobs(choice),
        finish_reason=_get(choice, "finish_reason"),
        usage=_usage(raw),
    )


def as_json(response: Any) -> Any:
    """A response of the ``openai`` client as JSON (its extra fields included)."""
    if isinstance(response, BaseModel):
        return response.model_dump(mode="json", warnings=False)
    return response


def _get(value: Any, key: str) -> Any:
    return value.get(key) if isinstance(value, Mapping) else None


def _first(values: Any) -> Any:
    return values[0] if isinstance(values, list) and values else None


def _tool_call(tc: Any) -> ToolCall:
    function = _get(tc, "function")
    name = _get(function, "name") or ""
    arguments = _get(function, "arguments")
    if not isinstance(arguments, str):  # some servers send an object; the harness wants text
        arguments = "" if arguments is None else json.dumps(arguments)
    return ToolCall(id=_get(tc, "id") or "", name=name, arguments=arguments)


def _logprobs(choice: Any) -> list[float] | None:
    content = _get(_get(choice, "logprobs"), "content")
    return [float(t["logprob"]) for t in content] if content else None


def _usage(raw: Mapping[str, Any]) -> dict[str, int]:
    usage = raw.get("usage")
    if not isinstance(usage, Mapping):
        return {}
    return {k: v for k, v in usage.items() if isinstance(v, int)}
