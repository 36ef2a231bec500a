"""The nouns that flow out of the retrieval tools.

A tool call returns a :class:`ToolResult`: structured chunks (so the harness can prune
them by id without parsing text) plus an optional error and a note (for example what a
truncated read left out). :func:`render_result` is the one place that turns it into the
text the policy sees.
"""

from __future__ import annotations

from pydantic import BaseModel, Field


class ChunkHit(BaseModel):
    """One chunk as a tool returns it; the JSON shape of `sleuth tools ... --json`."""

    id: str
    doc_id: str
    text: str
    tokens: int
    score: float | None = None


class ToolResult(BaseModel):
    """What one tool call produced."""

    tool: str
    chunks: list[ChunkHit] = Field(default_factory=list)
    error: str | None = None
    note: str | None = None  # e.g. "showed 3 of 9 chunks; omitted chunk indices 4-9"

    @property
    def ok(self) -> bool:
        return self.error is None


def render_chunk(chunk: ChunkHit) -> str:
    """The block the policy sees for one chunk; pruning removes whole blocks."""
    return f"# DOCUMENT ID: {chunk.id} ({chunk.tokens} tokens)\n{chunk.text}"


def render_result(result: ToolResult, hidden: frozenset[str] | set[str] = frozenset()) -> str:
    """Render a tool result as policy-visible text, leaving out chunks whose ids are in ``hidden``."""
    if result.error is not None:
        return f"Error: {result.error}"
    blocks = [render_chunk(c) for c in result.chunks if c.id not in hidden]
    if not result.chunks:
        body = "No results."
    elif not blocks:
        body = "All chunks of this result were pruned."
    else:
        body = "\n\n".join(blocks)
    return f"{body}\n\n{result.note}" if result.note else body
