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
from collections.abc import Callable
from typing import Any

import openai

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
        return to_policy_output(self.client.chat.completions.create(**request))


def to_policy_output(response: Any) -> PolicyOutput:
    """Convert a chat completion (vLLM / llama.cpp extras included) into a PolicyOutput."""
    if not getattr(response, "choices", None):
        raise EndpointError(f"the endpoint returned no choices: {response!r:.300}")
    choice = response.choices[0]
    message = choice.message
    extra = message.model_extra or {}
    logprobs = _logprobs(choice)
    return PolicyOutput(
        text=message.content or "",
        reasoning=extra.get("reasoning_content") or extra.get("reasoning"),
        tool_calls=[_tool_call(tc) for tc in message.tool_calls or []],
        prompt_token_ids=(response.model_extra or {}).get("prompt_token_ids"),
        token_ids=(choice.model_extra or {}).get("token_ids"),
        logprobs=logprobs,
        finish_reason=choice.finish_reason,
        usage=_usage(response),
    )


def _tool_call(tc: Any) -> ToolCall:
    function = getattr(tc, "function", None)
    name = getattr(function, "name", None) or ""
    arguments = getattr(function, "arguments", None)
    if not isinstance(arguments, str):  # some servers send an object; the harness wants text
        arguments = "" if arguments is None else json.dumps(arguments)
    return ToolCall(id=getattr(tc, "id", None) or "", name=name, arguments=arguments)


def _logprobs(choice: Any) -> list[float] | None:
    content = getattr(choice.logprobs, "content", None) if choice.logprobs else None
    return [float(t.logprob) for t in content] if content else None


def _usage(response: Any) -> dict[str, int]:
    usage = getattr(response, "usage", None)
    if usage is None:
        return {}
    return {k: v for k, v in usage.model_dump().items() if isinstance(v, int)}
