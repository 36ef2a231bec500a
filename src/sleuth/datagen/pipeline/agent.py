"""A small tool-calling agent loop that ends with a validated submission.

The explore, extend and distractor agents all work this way: the model calls tools over the local
corpus and finishes by calling one *submit* tool whose JSON arguments are validated by a pydantic
model and then by deterministic checks. A rejected submission goes back to the model as the tool
result, with every error, so it can fix it. When the turn budget runs out, one last call forces
the submit tool (the tool definitions are kept, which every OpenAI-compatible server accepts).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from sleuth.datagen.pipeline.llm import LLM, ChatResult, Message
from sleuth.harness.policy import ToolCall

MAX_TOOL_CHARS = 12_000
"""Longest tool result shown to the agent; the index tools already pack to a token budget."""


@dataclass
class AgentTool:
    """A function the agent may call: its OpenAI schema and the handler that answers it."""

    name: str
    description: str
    parameters: dict[str, Any]
    """JSON schema of the arguments object."""
    handler: Callable[..., str]
    """Called with the parsed arguments as keywords; returns the text the agent sees."""

    def schema(self) -> dict[str, Any]:
        return function_schema(self.name, self.description, self.parameters)


@dataclass
class Submission:
    """The final tool: a pydantic model for its arguments plus deterministic checks."""

    name: str
    description: str
    model: type[BaseModel]
    check: Callable[[Any], list[str]] = lambda _: []
    """Errors in a parsed submission (empty = accepted)."""

    def schema(self) -> dict[str, Any]:
        return function_schema(self.name, self.description, self.model.model_json_schema())

    def parse(self, arguments: str) -> tuple[BaseModel | None, list[str]]:
        try:
            value = self.model.model_validate_json(arguments)
        except ValidationError as e:
            return None, [_validation_line(err) for err in e.errors()]
        return value, self.check(value)


@dataclass
class AgentOutcome:
    submission: Any | None
    reason: str
    """Why the loop ended: ``submitted`` or what went wrong."""
    turns: int
    tool_calls: int
    messages: list[Message] = field(default_factory=list)


def function_schema(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


def string_params(**descriptions: str) -> dict[str, Any]:
    """Arguments schema of a tool whose parameters are all required strings."""
    return {
        "type": "object",
        "properties": {k: {"type": "string", "description": v} for k, v in descriptions.items()},
        "required": list(descriptions),
    }


def run_agent(
    llm: LLM,
    *,
    stage: str,
    system: str,
    user: str,
    tools: list[AgentTool],
    submission: Submission,
    max_turns: int,
) -> AgentOutcome:
    """Run the loop until an accepted submission or the turn budget (plus one forced turn).

    Tool calls of one turn run in order; an unknown tool or a failing handler is reported to the
    agent as an error result, never raised.
    """
    messages: list[Message] = [
        {"role": "system", "content": system},
        {"role": "user", "content": user},
    ]
    schemas = [t.schema() for t in tools] + [submission.schema()]
    handlers = {t.name: t for t in tools}
    calls = 0
    for turn in range(max_turns + 1):
        forced = turn == max_turns
        if forced:
            messages.append({"role": "user", "content": _FORCE.format(name=submission.name)})
        choice = {"type": "function", "function": {"name": submission.name}} if forced else "auto"
        result = llm.complete(messages, stage=stage, tools=schemas, tool_choice=choice)
        messages.append(result.assistant_message())
        if not result.tool_calls:
            messages.append({"role": "user", "content": _NUDGE.format(name=submission.name)})
            continue
        accepted = _answer_calls(result, messages, handlers, submission)
        calls += len(result.tool_calls)
        if accepted is not None:
            return AgentOutcome(accepted, "submitted", turn + 1, calls, messages)
    return AgentOutcome(None, _last_problem(messages), max_turns + 1, calls, messages)


def _answer_calls(
    result: ChatResult,
    messages: list[Message],
    handlers: dict[str, AgentTool],
    submission: Submission,
) -> BaseModel | None:
    """Append one tool message per call; the accepted submission if there was one."""
    accepted = None
    for call in result.tool_calls:
        if call.name == submission.name and accepted is None:
            value, errors = submission.parse(call.arguments)
            accepted = value if not errors else None
            text = "Accepted." if not errors else _rejection(errors)
        else:
            text = _run_tool(call, handlers)
        messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
    return accepted


def _run_tool(call: ToolCall, handlers: dict[str, AgentTool]) -> str:
    tool = handlers.get(call.name)
    if tool is None:
        return f"Error: unknown tool {call.name!r}; available: {', '.join(sorted(handlers))}"
    try:
        args = json.loads(call.arguments or "{}")
        if not isinstance(args, dict):
            raise ValueError("arguments must be a JSON object")
        text = tool.handler(**args)
    except (ValueError, TypeError, KeyError) as e:
        return f"Error: {call.name}: {e}"
    if len(text) > MAX_TOOL_CHARS:
        text = text[:MAX_TOOL_CHARS] + f"\n[... cut at {MAX_TOOL_CHARS} characters]"
    return text


def _rejection(errors: list[str]) -> str:
    lines = "\n".join(f"- {e}" for e in errors)
    return f"Rejected; fix these and submit again:\n{lines}"


def _last_problem(messages: list[Message]) -> str:
    for message in reversed(messages):
        content = str(message.get("content") or "")
        if message["role"] == "tool" and content.startswith("Rejected"):
            return "submission rejected: " + " ".join(content.splitlines()[1:])[:500]
    return "no submission within the turn budget"


def _validation_line(err: Any) -> str:
    where = ".".join(str(p) for p in err["loc"]) or "arguments"
    return f"{where}: {err['msg']}"


_NUDGE = (
    "Please continue with tool calls. When you have what you need, call {name} with your result."
)
_FORCE = "You have used every turn. Call {name} now with the best result you have."
