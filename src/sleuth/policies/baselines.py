"""Baselines (SPEC §7), run through the same harness, runner and metrics as any policy.

* ``single-pass``: one ``search_corpus`` call with the query; the final list is the documents
  of the returned chunks in rank order (hybrid BM25 + dense, fused by RRF).
* ``bm25`` / ``dense``: the same policy, but ``search_corpus`` ranks by one retriever only
  (:class:`RetrieverToolbox`); packing, exclusion and budgets are unchanged.
* ``heuristic``: a scripted multi-step agent (:mod:`sleuth.policies.heuristic`).

The names are policy specs (:mod:`sleuth.policies.spec` builds them, with every other policy).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, Literal

from sleuth.corpus.models import doc_id_of
from sleuth.errors import InputError
from sleuth.index.where import Where
from sleuth.policies.scripted import Reply, call, turn
from sleuth.policies.transcript import final_answer, observations, query_of
from sleuth.tools.base import Tools
from sleuth.tools.spec import SEARCH_CORPUS
from sleuth.tools.toolbox import Toolbox

POLICY_NAMES = ("single-pass", "bm25", "dense", "heuristic")  # the baselines of SPEC §7
Retriever = Literal["lexical", "dense"]


def single_pass_script(messages: list[dict[str, Any]], index: int) -> Reply:
    """Turn 0: search with the query. Turn 1: answer with the hits' documents in rank order."""
    if index == 0:
        return turn(call(SEARCH_CORPUS, query=query_of(messages)))
    chunks = [c for o in observations(messages) if o.tool == SEARCH_CORPUS for c in o.chunks]
    docs = list(dict.fromkeys(doc_id_of(c.id) for c in chunks))
    return final_answer([(d, f"Search hit {r} for the query.") for r, d in enumerate(docs, 1)])


class RetrieverToolbox(Toolbox):
    """A :class:`Toolbox` whose ``search_corpus`` ranks by BM25 alone or by dense vectors alone.

    Only the candidate ranking changes; grep, read, packing and budgets are the toolbox's own,
    so a difference against ``single-pass`` measures the fusion and nothing else.
    """

    def __init__(self, toolbox: Toolbox, retriever: Retriever):
        super().__init__(toolbox.index, toolbox.config, toolbox.reranker, toolbox.counter)
        self.retriever = retriever

    def fused_candidates(
        self, query: str, exclude: Collection[str] = (), where: Where | None = None
    ) -> list[tuple[str, float]]:
        excluded, k = frozenset(exclude), self.config.candidates
        if self.retriever == "lexical":
            return self.index.lexical_search(query, k, excluded, where)
        qvec = self.index.embedder.embed_query(query)
        return self.index.dense_search(qvec, k, excluded, where)


def one_retriever(tools: Tools, retriever: Retriever) -> Tools:
    """``tools`` with ``search_corpus`` ranking by one retriever (the ``bm25``/``dense`` baselines).

    Raises:
        InputError: ``tools`` is not a ``Toolbox`` over an index.
    """
    if not isinstance(tools, Toolbox):
        name = "bm25" if retriever == "lexical" else "dense"
        raise InputError(f"policy {name!r} needs a Toolbox over an index")
    return RetrieverToolbox(tools, retriever)
