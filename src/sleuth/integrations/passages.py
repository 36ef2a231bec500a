"""What both framework retrievers return, built once here: sleuth's results as passages.

``search`` mode is one ``search_corpus`` call: its chunks, best first, with their scores.
``agent`` mode is the whole subagent: its ranked documents, each with the justification the
policy wrote, the text the ``read_document`` tool gives for that document and question (within
its token budget, the chunks closest to the question), and the trajectory's path.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sleuth.api.agent import Agent, PolicyLike
from sleuth.api.index import Index
from sleuth.errors import ConfigError, SleuthError, ToolError
from sleuth.policies.spec import DEFAULT_POLICY, PolicyOptions
from sleuth.tools.types import ToolResult

MODES = ("search", "agent")
"""``search``: one search_corpus call; ``agent``: the whole subagent."""


@dataclass(frozen=True)
class Passage:
    """One retrieved item: a chunk (``search``) or a document (``agent``)."""

    id: str
    text: str
    score: float | None
    metadata: dict[str, Any]


class PassageSource:
    """An index and a mode; ``agent`` mode builds its policy once, here (weights load now).

    Raises:
        InputError: an unknown mode, a bad ``k``, index or policy spec.
    """

    def __init__(
        self,
        index: Index | str | os.PathLike[str],
        mode: str = "search",
        k: int | None = None,
        policy: PolicyLike = DEFAULT_POLICY,
        options: PolicyOptions | None = None,
    ):
        if mode not in MODES:
            raise ConfigError(f"unknown mode {mode!r}; use one of {MODES}")
        if k is not None and k < 1:
            raise ConfigError(f"k ({k}) must be at least 1")
        self.index = index if isinstance(index, Index) else Index.open(Path(index))
        self.mode = mode
        self.k = k
        self.agent = Agent(self.index, policy, options=options) if mode == "agent" else None

    def passages(self, query: str) -> list[Passage]:
        """The passages for ``query``, best first.

        Raises:
            ToolError: the search failed (a blank query, the store down).
            SleuthError: the subagent ended without an answer (e.g. its endpoint is down).
        """
        if self.agent is None:
            return self._chunks(self.index.search(query, self.k))
        return self._documents(query, self.agent)

    async def apassages(self, query: str) -> list[Passage]:
        """:meth:`passages` on a worker thread, for ``asyncio`` applications."""
        return await asyncio.to_thread(self.passages, query)

    def _chunks(self, result: ToolResult) -> list[Passage]:
        if result.error is not None:  # a retriever has no other way to say it
            raise ToolError(f"{result.tool}: {result.error}")
        out = []
        for rank, hit in enumerate(result.chunks, start=1):
            row = self.index.chunk(hit.id)
            meta = {"chunk_id": hit.id, "doc_id": hit.doc_id, "rank": rank, "score": hit.score}
            meta["title"] = row.title if row else ""
            out.append(Passage(hit.id, hit.text, hit.score, meta))
        return out

    def _documents(self, query: str, agent: Agent) -> list[Passage]:
        run = agent.search(query)
        if run.error is not None and not run.documents:
            raise SleuthError(f"the subagent found nothing: {run.error}")
        out = []
        for doc in run.documents[: self.k]:
            read = agent.tools.read_document(doc.id, query=query)
            chunks = self.index.document_chunks(doc.id)
            meta = {"doc_id": doc.id, "rank": doc.rank, "justification": doc.justification}
            meta |= {"title": chunks[0].title if chunks else "", "trajectory": run.trajectory}
            text = "\n\n".join(c.text for c in read.chunks)
            out.append(Passage(doc.id, text, None, meta))
        return out
