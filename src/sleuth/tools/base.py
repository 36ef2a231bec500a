"""The interface the harness uses to call retrieval tools.

The real implementation is :class:`sleuth.tools.toolbox.Toolbox` over an
:class:`sleuth.index.Index`; tests may pass any object with these methods.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, Protocol

from sleuth.tools.types import ToolResult


class Tools(Protocol):
    def search_corpus(
        self,
        query: str,
        exclude: Collection[str] = (),
        max_tokens: int | None = None,
        where: Any = None,
    ) -> ToolResult:
        """Hybrid search; never returns an id in ``exclude`` or a chunk ``where`` rejects;
        output within ``max_tokens``."""
        ...

    def grep_corpus(
        self,
        pattern: str,
        exclude: Collection[str] = (),
        max_tokens: int | None = None,
        where: Any = None,
    ) -> ToolResult:
        """Regex over chunk texts; an invalid or too-slow pattern gives ``ToolResult.error``."""
        ...

    def describe_corpus(self, max_tokens: int | None = None) -> ToolResult:
        """The metadata fields a ``where`` may name, with their values or ranges."""
        ...

    def read_document(
        self, doc_id: str, query: str | None = None, max_tokens: int | None = None
    ) -> ToolResult:
        """A document's chunks in order; over budget keeps those most relevant to ``query``."""
        ...
