"""No MCP tool reply is larger than a client accepts (the official client refuses a message over
1 MB): a longer one is cut, and says so."""

from __future__ import annotations

import json
from typing import Any

from mcp.types import CallToolResult, ContentBlock, TextContent

MAX_REPLY_BYTES = 900_000
"""Largest tool reply sent, in bytes of JSON (text and structured content together); under the
1 MB a client accepts, with room for the JSON-RPC envelope."""


def bounded(reply: CallToolResult, limit: int = MAX_REPLY_BYTES) -> CallToolResult:
    """``reply`` itself when it fits in ``limit`` bytes; else cut to fit, and saying so.

    Half the room goes to the text and half to the structured content, whose longest lists lose
    items from their end (the SPEC §8 list keeps its best hits first) and which gains a ``note``.
    """
    if _size(reply) <= limit:
        return reply
    half = limit // 2
    note = f"[reply cut to fit the {limit:,}-byte limit of MCP clients; ask for less at a time]"
    texts = [c for c in reply.content if isinstance(c, TextContent)]
    room = max(half - len(note.encode()) - 64, 0) // max(len(texts), 1)
    content: list[ContentBlock] = [
        TextContent(type="text", text=f"{_cut_text(c.text, room)}\n{note}") for c in texts
    ]
    structured = reply.structured_content
    if structured is not None:
        structured = _cut_lists(structured, half - len(note.encode()) - 16)
        if structured is None:  # no list to shorten: only an error can say so within the limit
            return CallToolResult(content=content, is_error=True)
        structured["note"] = note
    return CallToolResult(content=content, structured_content=structured, is_error=reply.is_error)


def _size(value: CallToolResult) -> int:
    return len(value.model_dump_json(by_alias=True, exclude_none=True).encode())


def _json_size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False).encode())


def _cut_text(text: str, room: int) -> str:
    data = text.encode()
    return text if len(data) <= room else data[:room].decode(errors="ignore") + "…"


def _cut_lists(structured: dict[str, Any], room: int) -> dict[str, Any] | None:
    """``structured`` with its top-level lists shortened, the longest first, until it fits
    (None when emptying them is not enough)."""
    out = dict(structured)
    while _json_size(out) > room:
        lists = [k for k, v in out.items() if isinstance(v, list) and v]
        if not lists:
            return None
        key = max(lists, key=lambda k: _json_size(out[k]))
        excess = _json_size(out) - room
        sizes = [_json_size(item) + 1 for item in out[key]]
        keep, dropped = len(sizes), 0
        while keep > 0 and dropped < excess:
            keep -= 1
            dropped += sizes[keep]
        out[key] = out[key][:keep]
    return out
