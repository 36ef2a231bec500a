"""The retrieval tools the policy calls."""

from sleuth.tools.types import ChunkHit, ToolResult, render_chunk, render_result

__all__ = ["ChunkHit", "ToolResult", "render_chunk", "render_result"]
