"""The policy's view of the conversation, and pruning.

Tool results stay structured (:class:`ToolResult`) and are rendered on every request with the
pruned ids passed as ``hidden``, so a prune removes exactly the named chunk blocks and changes
nothing else: other chunks, notes, usage lines and every other message render as before.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sleuth.tools.types import ToolResult, render_result

Message = dict[str, Any]


@dataclass
class Observation:
    """A tool message answering one call (``call_id`` set) or a harness note as a user message."""

    body: ToolResult | str
    call_id: str | None = None
    suffix: str = ""  # the usage line (and budget message) when this ends its turn

    def text(self, hidden: set[str]) -> str:
        """The body as the policy sees it, without the suffix."""
        return render_result(self.body, hidden) if isinstance(self.body, ToolResult) else self.body

    def render(self, hidden: set[str]) -> Message:
        """The OpenAI chat message for this observation with ``hidden`` chunks left out."""
        text = self.text(hidden)
        if self.suffix:
            text = f"{text}\n\n{self.suffix}" if text else self.suffix
        if self.call_id is None:
            return {"role": "user", "content": text}
        return {"role": "tool", "tool_call_id": self.call_id, "content": text}

    def chunk_ids(self) -> list[str]:
        """Ids of the chunk blocks this observation shows when nothing is hidden."""
        body = self.body
        if isinstance(body, ToolResult) and body.error is None:
            return [c.id for c in body.chunks]
        return []


class ContextView:
    """System prompt, user query, then assistant messages and observations, in order."""

    def __init__(self, system_prompt: str, user_message: str):
        self._head: list[Message] = [
            {"role": "system", "content": system_prompt},
            {"role": "user", "content": user_message},
        ]
        self._entries: list[Message | Observation] = []
        self.hidden: set[str] = set()

    def add_message(self, message: Message) -> None:
        """Append a fixed message (an assistant reply); pruning never touches it."""
        self._entries.append(message)

    def add_observation(self, observation: Observation) -> Observation:
        self._entries.append(observation)
        return observation

    def last_observation(self) -> Observation | None:
        last = self._entries[-1] if self._entries else None
        return last if isinstance(last, Observation) else None

    def visible_ids(self) -> list[str]:
        """Chunk ids currently shown to the policy, in order of first appearance."""
        ids = (i for e in self._entries if isinstance(e, Observation) for i in e.chunk_ids())
        return [i for i in dict.fromkeys(ids) if i not in self.hidden]

    def prune(self, ids: Iterable[str]) -> tuple[list[str], list[str]]:
        """Hide chunks from every later request.

        Returns:
            ``(pruned, unknown)``: ids now hidden, and ids never shown or already pruned;
            each in request order, once.
        """
        visible = set(self.visible_ids())
        pruned: list[str] = []
        unknown: list[str] = []
        for chunk_id in dict.fromkeys(ids):
            (pruned if chunk_id in visible else unknown).append(chunk_id)
        self.hidden.update(pruned)
        return pruned, unknown

    def messages(self) -> list[Message]:
        """The exact messages of the next request (fresh copies; safe to keep)."""
        rendered = [
            e.render(self.hidden) if isinstance(e, Observation) else e for e in self._entries
        ]
        return [dict(m) for m in self._head + rendered]
