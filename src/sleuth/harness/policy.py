"""The policy interface: what the harness asks of any model.

A policy sees the messages (OpenAI chat format) and the tool schemas and returns a
:class:`PolicyOutput`. Policies that sample locally (or from a server returning log-probs)
fill ``token_ids`` and ``logprobs`` so the trajectory can be trained on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from pydantic import BaseModel, Field


class ToolCall(BaseModel):
    """One function call a model asked for (a policy's, or the datagen pipeline's client's)."""

    id: str
    name: str
    arguments: str  # raw JSON text as the model produced it; the harness parses and validates


class PolicyOutput(BaseModel):
    text: str = ""
    reasoning: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    prompt_token_ids: list[int] | None = None  # the exact prompt tokens the policy was fed
    token_ids: list[int] | None = None  # sampled completion tokens
    logprobs: list[float] | None = None  # behaviour log-prob of each sampled token
    finish_reason: str | None = None
    usage: dict[str, int] = Field(default_factory=dict)


class Policy(Protocol):
    name: str

    def count_tokens(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> int:
        """Tokens the policy's own tokenizer sees for exactly this request."""
        ...

    def generate(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], max_tokens: int
    ) -> PolicyOutput:
        """One model turn. May raise; the harness records the failure."""
        ...


def message_text(content: Any) -> str:
    """Chat content as plain text: a string, or the text parts of a list of content parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content if isinstance(p, dict))


def assistant_message(
    text: str, tool_calls: Sequence[ToolCall] = (), reasoning: str | None = None
) -> dict[str, Any]:
    """An assistant turn in OpenAI chat format: ``text``, then ``tool_calls`` (left out when there
    are none) and ``reasoning_content`` (when given). The one place this message is built: the
    harness's history, the SFT renderer and the datagen agent's conversation use it."""
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if tool_calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in tool_calls
        ]
    if reasoning:
        message["reasoning_content"] = reasoning
    return message
