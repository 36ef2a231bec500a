"""The ChatML tool-calling template shared by the local policy, the completions policy and the
trainer: one rendering and one parser, so a trajectory renders identically at rollout time and at
training time.

Small chat models (SmolLM2, the tiny test model) have templates without a tools section, so the
tools are described in the system message and the model is asked for
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks; tool results return as user
messages wrapped in ``<tool_response>``. A reply ends at ChatML's ``<|im_end|>`` (or the EOS).
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any, cast

from sleuth.harness.policy import PolicyOutput, ToolCall, message_text

STOP_TOKEN = "<|im_end|>"  # ChatML's end of turn
_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)
_NAME = re.compile(r'"name"\s*:\s*"([^"]*)"')

TOOLS_INSTRUCTIONS = """# Tools

You can call the tools below. To call one, write a block exactly like this:
<tool_call>{{"name": "<tool name>", "arguments": {{<arguments as a JSON object>}}}}</tool_call>
Write one block per call; several blocks in one reply run in parallel. Results come back in
<tool_response> blocks. When you need no more tools, reply without any <tool_call> block.

Available tools (JSON schemas):
{schemas}"""


# ---------------------------------------------------------------- rendering


def tools_system_text(tools: list[dict[str, Any]]) -> str:
    """The tools section appended to the system message."""
    schemas = "\n".join(json.dumps(t.get("function", t), ensure_ascii=False) for t in tools)
    return TOOLS_INSTRUCTIONS.format(schemas=schemas)


def _call_block(call: dict[str, Any]) -> str:
    fn = call["function"]
    try:
        arguments = json.loads(fn.get("arguments") or "{}")
    except json.JSONDecodeError:
        arguments = fn.get("arguments")
    body = json.dumps({"name": fn["name"], "arguments": arguments}, ensure_ascii=False)
    return f"<tool_call>{body}</tool_call>"


def _assistant_text(msg: dict[str, Any]) -> str:
    """The assistant's own text; canonical call blocks are added only when the text lacks them
    (this policy keeps the raw blocks in ``text``, so its turns re-render as sampled)."""
    text = message_text(msg.get("content"))
    calls = msg.get("tool_calls") or []
    if not calls or "<tool_call>" in text:
        return text
    blocks = "\n".join(_call_block(c) for c in calls)
    return f"{text}\n{blocks}" if text else blocks


def _tool_response(content: str) -> str:
    return f"<tool_response>\n{content}\n</tool_response>"


def to_chat(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Plain role/content messages any chat template accepts: tools in the system message,
    tool results as ``<tool_response>`` user text, consecutive user messages merged."""
    out: list[dict[str, str]] = []
    for msg in messages:
        role = cast(str, msg.get("role"))  # a message without one passes through as it was
        if role == "tool":
            role, content = "user", _tool_response(message_text(msg.get("content")))
        elif role == "assistant":
            content = _assistant_text(msg)
        else:
            content = message_text(msg.get("content"))
        if role == "user" and out and out[-1]["role"] == "user":
            out[-1]["content"] += "\n" + content
        else:
            out.append({"role": role, "content": content})
    if tools:
        section = tools_system_text(tools)
        if out and out[0]["role"] == "system":
            out[0]["content"] = f"{out[0]['content']}\n\n{section}"
        else:
            out.insert(0, {"role": "system", "content": section})
    return out


def chatml(chat: list[dict[str, str]]) -> str:
    """ChatML with a generation prompt: the fallback for tokenizers without a template."""
    turns = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in chat)
    return turns + "<|im_start|>assistant\n"


# ---------------------------------------------------------------- parsing


def _new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:16]}"


def _parse_block(body: str) -> ToolCall:
    """A well-formed block gives name + JSON arguments; anything else keeps the raw text as the
    arguments (and the name when one can be found) so the harness reports the error."""
    body = body.strip()
    try:
        data = json.loads(body)
    except json.JSONDecodeError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("name"), str):
        args = data.get("arguments", {})
        arguments = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
        return ToolCall(id=_new_call_id(), name=data["name"], arguments=arguments)
    name = _NAME.search(body)
    return ToolCall(id=_new_call_id(), name=name.group(1) if name else "", arguments=body)


def parse_tool_calls(text: str) -> list[ToolCall]:
    """Every ``<tool_call>`` block in order; an unclosed last block runs to the end of text."""
    return [_parse_block(m.group(1)) for m in _BLOCK.finditer(text)]


def render_text(tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
    """A request as prompt text: the tokenizer's chat template, or ChatML when it has none."""
    chat = to_chat(messages, tools)
    if not getattr(tokenizer, "chat_template", None):
        return chatml(chat)
    text: str = tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    return text


def render_ids(
    tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
) -> list[int]:
    """A request as the exact prompt token ids the local policy feeds its model; the trainer
    renders teacher runs with the same function, so the two can never drift apart."""
    return list(
        tokenizer(render_text(tokenizer, messages, tools), add_special_tokens=False)["input_ids"]
    )


# ---------------------------------------------------------------- stopping


def stop_token_id(tokenizer: Any) -> int:
    """The id that ends a reply: ChatML's ``<|im_end|>`` when the vocabulary has it, else EOS."""
    token_id = _im_end(tokenizer)
    if token_id is not None:
        return token_id
    if tokenizer.eos_token_id is None:
        raise ValueError("the tokenizer has neither <|im_end|> nor an EOS token to end a reply")
    return int(tokenizer.eos_token_id)


def stop_ids(tokenizer: Any, model: Any = None) -> set[int]:
    """Every id that ends sampling: EOS (the tokenizer's and the model's) and ``<|im_end|>``."""
    ids: set[int] = set()
    generation = getattr(model, "generation_config", None)
    for value in (tokenizer.eos_token_id, getattr(generation, "eos_token_id", None)):
        if isinstance(value, int):
            ids.add(value)
        elif value:
            ids.update(value)
    im_end = _im_end(tokenizer)
    if im_end is not None:
        ids.add(im_end)
    return ids


def _im_end(tokenizer: Any) -> int | None:
    token_id = tokenizer.convert_tokens_to_ids(STOP_TOKEN)
    if isinstance(token_id, int) and token_id != tokenizer.unk_token_id:
        return token_id
    return None


def sampled_output(
    tokenizer: Any,
    prompt_ids: list[int],
    token_ids: list[int],
    logprobs: list[float],
    stops: set[int] | list[int],
    finish_reason: str | None = "derive",
) -> PolicyOutput:
    """A reply from sampled token ids: a final stop token stays in ``token_ids`` (it is trained
    on) but is not decoded into the text whose tool calls are parsed. ``finish_reason`` is what
    a server said; by default it is derived from whether the reply ended on a stop token."""
    stopped = bool(token_ids) and token_ids[-1] in stops
    body = token_ids[:-1] if stopped else token_ids
    text = tokenizer.decode(body, skip_special_tokens=False)
    return PolicyOutput(
        text=text,
        tool_calls=parse_tool_calls(text),
        prompt_token_ids=prompt_ids,
        token_ids=token_ids,
        logprobs=logprobs,
        finish_reason=("stop" if stopped else "length")
        if finish_reason == "derive"
        else finish_reason,
        usage={"prompt_tokens": len(prompt_ids), "completion_tokens": len(token_ids)},
    )
