"""A flat summary of one finished trajectory: all that metrics and reward need.

The harness produces it (``Trajectory.summary()``); ``sleuth.metrics`` and ``sleuth.reward``
consume it, so scoring never depends on how the trajectory record is laid out.
"""

from __future__ import annotations

from pydantic import BaseModel, Field


class RunSummary(BaseModel):
    final_doc_ids: list[str] = Field(default_factory=list)  # ranked, as the policy answered
    seen_chunks: dict[str, str] = Field(
        default_factory=dict
    )  # every chunk any tool returned: id -> text
    pruned_chunk_ids: list[str] = Field(default_factory=list)  # in prune order; may repeat
    turn_tools: list[list[str]] = Field(default_factory=list)  # tool names called in each turn
    peak_tokens: int = 0  # largest context the policy was sent
    total_tokens: int = 0  # sum over turns of tokens sent + tokens generated
    wall_time_s: float = 0.0
    malformed_answer: bool = False
    error: str | None = None  # set when the run ended in a failure (endpoint down, crash, ...)

    @property
    def turns(self) -> int:
        return len(self.turn_tools)

    @property
    def tool_calls(self) -> int:
        return sum(len(t) for t in self.turn_tools)
