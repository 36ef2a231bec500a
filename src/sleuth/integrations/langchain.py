"""A LangChain retriever over sleuth (extra ``[langchain]``: ``langchain-core``).

Example::

    from sleuth.integrations.langchain import SleuthRetriever

    retriever = SleuthRetriever(index="my-index")                 # one hybrid search
    retriever = SleuthRetriever(index="my-index", mode="agent")   # the whole subagent
    docs = retriever.invoke("who founded the company that makes X?")
    docs[0].metadata["justification"]                             # agent mode

``search`` mode returns chunks (``metadata``: chunk_id, doc_id, title, rank, score); ``agent``
mode returns the subagent's ranked documents (``metadata``: doc_id, title, rank, justification,
trajectory), each with the text ``read_document`` gives for the question
(:mod:`sleuth.integrations.passages`).
"""

from __future__ import annotations

from typing import Any

from sleuth.extras import missing_extra

try:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForRetrieverRun,
        CallbackManagerForRetrieverRun,
    )
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
except ImportError as _exc:  # the `langchain` extra is not installed
    raise missing_extra("langchain", _exc) from _exc
from pydantic import ConfigDict, PrivateAttr

from sleuth.integrations.passages import Passage, PassageSource
from sleuth.policies.spec import DEFAULT_POLICY


def _document(passage: Passage) -> Document:
    return Document(page_content=passage.text, metadata=passage.metadata, id=passage.id)


class SleuthRetriever(BaseRetriever):
    """sleuth as a LangChain ``BaseRetriever``: ``invoke``/``ainvoke`` a question, get
    ``Document``s best first. The index opens (and an ``agent`` policy builds) when the
    retriever is made, so a bad setting fails there."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    index: Any
    """A :class:`sleuth.Index` or an index folder."""
    mode: str = "search"
    """``search``: one search_corpus call; ``agent``: the whole subagent (checked with the
    other settings, so a bad one is the same :class:`ConfigError` as in LlamaIndex)."""
    k: int | None = None
    """Results at most (default: the tool's 10 chunks, or every document the agent lists)."""
    policy: Any = DEFAULT_POLICY
    """``agent`` mode's policy: a spec (``heuristic``, ``local``, ``openai:MODEL@URL``...) or a
    built one."""
    options: Any = None
    """A spec's options (:class:`sleuth.PolicyOptions`: API key, adapter, engine...)."""
    _source: PassageSource = PrivateAttr()

    def __init__(self, **fields: Any) -> None:
        super().__init__(**fields)
        # after validation, so sleuth's own errors reach the caller unwrapped
        self._source = PassageSource(self.index, self.mode, self.k, self.policy, self.options)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return [_document(p) for p in self._source.passages(query)]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        return [_document(p) for p in await self._source.apassages(query)]
