"""A LlamaIndex retriever over sleuth (extra ``[llamaindex]``: ``llama-index-core``).

Example::

    from sleuth.integrations.llamaindex import SleuthRetriever

    retriever = SleuthRetriever("my-index")                  # one hybrid search
    retriever = SleuthRetriever("my-index", mode="agent")    # the whole subagent
    nodes = retriever.retrieve("who founded the company that makes X?")
    nodes[0].node.metadata["justification"]                  # agent mode

``search`` mode returns chunks with their scores (``metadata``: chunk_id, doc_id, title, rank,
score); ``agent`` mode returns the subagent's ranked documents without a score (``metadata``:
doc_id, title, rank, justification, trajectory), each with the text ``read_document`` gives for
the question (:mod:`sleuth.integrations.passages`). Usable wherever LlamaIndex takes a
retriever, e.g. ``RetrieverQueryEngine.from_args(retriever, llm=...)``.
"""

from __future__ import annotations

import os

from sleuth.extras import missing_extra

try:
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
except ImportError as _exc:  # the `llamaindex` extra is not installed
    raise missing_extra("llamaindex", _exc) from _exc

from sleuth.api.agent import PolicyLike
from sleuth.api.index import Index
from sleuth.integrations.passages import Passage, PassageSource
from sleuth.policies.spec import DEFAULT_POLICY, PolicyOptions

_NOT_FOR_THE_LLM = ["trajectory", "chunk_id", "score"]  # bookkeeping, not context


def _node(passage: Passage) -> NodeWithScore:
    node = TextNode(
        id_=passage.id,
        text=passage.text,
        metadata=passage.metadata,
        excluded_llm_metadata_keys=[k for k in _NOT_FOR_THE_LLM if k in passage.metadata],
        excluded_embed_metadata_keys=list(passage.metadata),
    )
    return NodeWithScore(node=node, score=passage.score)


class SleuthRetriever(BaseRetriever):
    """sleuth as a LlamaIndex ``BaseRetriever``: ``retrieve``/``aretrieve`` a question, get
    ``NodeWithScore``s best first."""

    def __init__(
        self,
        index: Index | str | os.PathLike[str],
        mode: str = "search",
        k: int | None = None,
        policy: PolicyLike = DEFAULT_POLICY,
        options: PolicyOptions | None = None,
        **kwargs: object,
    ):
        """
        Args:
            index: a :class:`sleuth.Index` or an index folder (opened now).
            mode: ``search`` (one search_corpus call) or ``agent`` (the whole subagent).
            k: results at most (default: the tool's 10 chunks, or every document listed).
            policy: ``agent`` mode's policy spec or built policy (built now).
            options: a spec's options (API key, adapter, engine...).
            kwargs: LlamaIndex's own (``callback_manager``, ``verbose``...).

        Raises:
            InputError: an unknown mode, a bad ``k``, index or policy.
        """
        self.source = PassageSource(index, mode, k, policy, options)
        super().__init__(**kwargs)  # type: ignore[arg-type]

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [_node(p) for p in self.source.passages(query_bundle.query_str)]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [_node(p) for p in await self.source.apassages(query_bundle.query_str)]
