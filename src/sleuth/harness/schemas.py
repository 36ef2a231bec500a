"""The tool names the harness dispatches on, and the schemas the policy is sent.

The schemas themselves live with the tools (:mod:`sleuth.tools.schemas`), so the harness, the
Toolbox and the MCP server expose exactly the same four tools.
"""

from __future__ import annotations

from sleuth.tools.schemas import TOOL_NAMES as _DECLARED
from sleuth.tools.schemas import TOOL_SCHEMAS

SEARCH_CORPUS = "search_corpus"
GREP_CORPUS = "grep_corpus"
READ_DOCUMENT = "read_document"
PRUNE_CHUNKS = "prune_chunks"
TOOL_NAMES = (SEARCH_CORPUS, GREP_CORPUS, READ_DOCUMENT, PRUNE_CHUNKS)

if set(TOOL_NAMES) != set(_DECLARED):  # the harness must dispatch every tool the policy sees
    raise ImportError(f"tool schemas declare {_DECLARED}, the harness handles {TOOL_NAMES}")

__all__ = [
    "GREP_CORPUS",
    "PRUNE_CHUNKS",
    "READ_DOCUMENT",
    "SEARCH_CORPUS",
    "TOOL_NAMES",
    "TOOL_SCHEMAS",
]
