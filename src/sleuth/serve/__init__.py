"""Edges that serve sleuth to other programs: the tools and the whole subagent over MCP."""

from __future__ import annotations

from typing import Any

__all__ = [
    "McpServerConfig",
    "build_server",
    "policy_factory_for",
    "run_server",
    "serve",
    "serving_policy",
]


def __getattr__(name: str) -> Any:
    # Imported on first use: the mcp SDK loads only when a server is built (`sleuth serve mcp`,
    # the one command-line entry, is typer's).
    if name in __all__:
        from sleuth.serve import mcp_server

        return getattr(mcp_server, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
