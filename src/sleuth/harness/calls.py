"""Turn a policy's raw tool call into a validated one, or into the error the policy will see.

Models send broken JSON, unknown tool names and wrong argument types. None of these may stop
a run: each becomes an error observation that tells the policy what to fix.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sleuth.harness.policy import ToolCall
from sleuth.tools.spec import TOOL_BY_NAME, TOOL_NAMES, WHERE

_SHOWN_CHARS = 200  # how much of a broken argument string the error quotes back


@dataclass(frozen=True)
class ParsedCall:
    """A tool call whose name is known and whose arguments have the right types."""

    call_id: str
    name: str
    args: dict[str, Any]


def parse_call(call: ToolCall, offered: Sequence[str] = TOOL_NAMES) -> ParsedCall | str:
    """Validate one call against the ``offered`` tools; returns the parsed call, or an error
    message for the policy."""
    if call.name not in offered:
        return f"Unknown tool {call.name!r}. Available tools: {', '.join(offered)}."
    args = _load_args(call.arguments)
    if isinstance(args, str):
        return f"Invalid arguments for {call.name}: {args}"
    value = _validate(call.name, args)
    if isinstance(value, str):
        return f"Invalid arguments for {call.name}: {value}"
    return ParsedCall(call_id=call.id, name=call.name, args=value)


def arguments_json(raw: str) -> str:
    """The arguments to echo back in the assistant message: ``raw`` if it is a JSON object.

    Servers such as vLLM re-parse earlier tool-call arguments when they render the next prompt,
    so broken JSON is replaced by ``{}`` there (the trajectory keeps the raw text).
    """
    return raw if isinstance(_load_args(raw), dict) else "{}"


def _load_args(raw: str) -> dict[str, Any] | str:
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        return f"not valid JSON ({exc.msg} at char {exc.pos}): {raw[:_SHOWN_CHARS]!r}"
    except RecursionError:
        return f"JSON nested too deeply: {raw[:_SHOWN_CHARS]!r}"
    if not isinstance(value, dict):
        return f"expected a JSON object, got {type(value).__name__}"
    return value


def _validate(name: str, args: dict[str, Any]) -> dict[str, Any] | str:
    spec = TOOL_BY_NAME[name]
    key = spec.argument
    if spec.argument_kind == "none":
        return {}
    if spec.argument_kind == "string_list":
        ids = _chunk_ids(args.get(key), key)
        return {key: ids} if isinstance(ids, list) else ids
    value = args.get(key)
    if not isinstance(value, str) or not value.strip():
        return f"{key!r} must be a non-empty string (got {_describe(value)})"
    where = args.get(WHERE)
    if not spec.filtered or where is None:
        return {key: value}
    if isinstance(where, str):  # models send objects JSON-encoded too
        where = _load_args(where)
    if not isinstance(where, dict):
        return f"{WHERE!r} must be an object (got {_describe(where)})"
    return {key: value, WHERE: where}


def _chunk_ids(value: Any, key: str) -> list[str] | str:
    """Accept a list of strings; also a JSON-encoded list or a single id, which models send."""
    if isinstance(value, str):
        try:
            decoded = json.loads(value)
        except json.JSONDecodeError:
            decoded = [value]
        value = decoded if isinstance(decoded, list) else [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return f"{key!r} must be an array of strings (got {_describe(value)})"
    return value


def _describe(value: Any) -> str:
    return "nothing" if value is None else type(value).__name__
