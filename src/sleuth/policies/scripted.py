"""A policy that plays back a script: for tests, demos and fixed baselines.

A script is a list of steps, one per turn, or one function of the conversation. A step is a
:class:`PolicyOutput`, a string (a final reply), or a function of the messages that returns
either, so a step can react to what the harness sent (for example prune the ids it was shown).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from sleuth.errors import SleuthError
from sleuth.harness.policy import PolicyOutput, ToolCall
from sleuth.policies.counting import ChatTokenCounter

Messages = list[dict[str, Any]]
Reply = PolicyOutput | str
Step = Reply | Callable[[Messages], Reply]
ScriptFn = Callable[[Messages, int], Reply]


class ScriptExhausted(SleuthError, RuntimeError):
    """The harness asked for more turns than the script holds."""


def call(name: str, call_id: str = "", **arguments: Any) -> ToolCall:
    """A tool call with JSON arguments; an empty id is filled in by the harness."""
    return ToolCall(id=call_id, name=name, arguments=json.dumps(arguments))


def turn(*calls: ToolCall, text: str = "") -> PolicyOutput:
    """One turn of tool calls (in parallel), optionally with some text."""
    return PolicyOutput(text=text, tool_calls=list(calls))


class ScriptedPolicy:
    """Plays ``script`` turn by turn; records every request it was sent.

    Example::

        policy = ScriptedPolicy([
            turn(call("search_corpus", query="river"), call("grep_corpus", pattern="Nile")),
            '<Document id="d1"><Justification>Names the river.</Justification></Document>',
        ])
    """

    name = "scripted"

    def __init__(
        self,
        script: Sequence[Step] | ScriptFn,
        count_tokens: Callable[[Messages, Messages], int] | None = None,
    ):
        self._script = script
        self._count = count_tokens or ChatTokenCounter()
        self.requests: list[Messages] = []
        self.max_tokens: list[int] = []

    @property
    def remaining(self) -> int | None:
        """Steps not played yet (None for a function script)."""
        if callable(self._script):
            return None
        return len(self._script) - len(self.requests)

    def count_tokens(self, messages: Messages, tools: Messages) -> int:
        return self._count(messages, tools)

    def generate(self, messages: Messages, tools: Messages, max_tokens: int) -> PolicyOutput:
        index = len(self.requests)
        self.requests.append(messages)
        self.max_tokens.append(max_tokens)
        if callable(self._script):
            reply = self._script(messages, index)
        elif index < len(self._script):
            step = self._script[index]
            reply = step(messages) if callable(step) else step
        else:
            raise ScriptExhausted(f"the script has {len(self._script)} steps; turn {index} asked")
        return PolicyOutput(text=reply) if isinstance(reply, str) else reply
