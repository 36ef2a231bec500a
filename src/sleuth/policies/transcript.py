"""Reading and answering a chat transcript the way a scripted policy must: from the messages.

Baseline policies see only what any policy sees, the OpenAI chat messages the harness sends, so
they recover their query, their own earlier calls and the chunks each call showed from that
text. Chunk blocks are rendered by :func:`sleuth.tools.types.render_chunk`; pruned chunks are
already absent from the text, so what is parsed is always the policy's current view.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

from sleuth.corpus.models import doc_id_of
from sleuth.tools.types import ChunkHit

_QUERY = re.compile(r"<query>(.*)</query>", re.DOTALL)
_CHUNK_HEADER = re.compile(r"^# DOCUMENT ID: (\S+) \((\d+) tokens\)\n", re.MULTILINE)
# What the harness appends after the last chunk of an observation: usage line, budget notice.
_USAGE = re.compile(r"\[Token usage: (\d+)/(\d+)\]")
_TRAILER = re.compile(r"\n\n(?:\[Token usage: |Your context is past )")


@dataclass(frozen=True)
class ToolReply:
    """One tool call of the policy and the chunks its result still shows."""

    tool: str
    arguments: dict[str, Any]
    chunks: list[ChunkHit]  # as the policy was shown them (no score)
    turn: int = 0  # the policy turn (0-based) that made the call


def query_of(messages: list[dict[str, Any]]) -> str:
    """The user's query: the first user message, without its ``<query>`` tags."""
    text = next(m.get("content") or "" for m in messages if m.get("role") == "user")
    match = _QUERY.search(text)
    return (match.group(1) if match else text).strip()


def observations(messages: list[dict[str, Any]]) -> list[ToolReply]:
    """Every tool result in the transcript, in call order, paired with the call that made it."""
    calls: dict[str, tuple[str, dict[str, Any], int]] = {}
    found: list[ToolReply] = []
    turn = -1
    for message in messages:
        if message.get("role") == "assistant":
            turn += 1
        for call in message.get("tool_calls") or []:
            function = call["function"]
            calls[call["id"]] = (function["name"], _arguments(function["arguments"]), turn)
        if message.get("role") == "tool" and message.get("tool_call_id") in calls:
            tool, arguments, made_in = calls[message["tool_call_id"]]
            chunks = parse_chunks(message.get("content") or "")
            found.append(ToolReply(tool, arguments, chunks, made_in))
    return found


def token_usage(messages: list[dict[str, Any]]) -> tuple[int, int] | None:
    """The last ``[Token usage: X/T]`` line the harness wrote, as ``(X, T)``."""
    for message in reversed(messages):
        if message.get("role") == "tool":
            match = _USAGE.search(message.get("content") or "")
            if match:
                return int(match.group(1)), int(match.group(2))
    return None


def parse_chunks(text: str) -> list[ChunkHit]:
    """The chunk blocks of one rendered tool result, in order."""
    headers = list(_CHUNK_HEADER.finditer(text))
    chunks = []
    for i, header in enumerate(headers):
        end = headers[i + 1].start() if i + 1 < len(headers) else len(text)
        body = text[header.end() : end]
        trailer = _TRAILER.search(body)
        body = body[: trailer.start()] if trailer else body
        chunk_id, tokens = header.group(1), int(header.group(2))
        chunks.append(
            ChunkHit(id=chunk_id, doc_id=doc_id_of(chunk_id), text=body.strip(), tokens=tokens)
        )
    return chunks


def _arguments(raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def final_answer(entries: Sequence[tuple[str, str]]) -> str:
    """The final reply in the format the harness parses, from ``(doc_id, justification)`` pairs."""
    if not entries:
        return "No relevant documents were found."
    return "\n".join(
        f'<Document id="{doc}"><Justification>{escape(why)}</Justification></Document>'
        for doc, why in entries
    )
