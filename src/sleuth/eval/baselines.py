"""Baselines (SPEC §7), run through the same harness, runner and metrics as any policy.

* ``single-pass``: one ``search_corpus`` call with the query; the final list is the documents
  of the returned chunks in rank order (hybrid BM25 + dense, fused by RRF).
* ``bm25`` / ``dense``: the same policy, but ``search_corpus`` ranks by one retriever only
  (:class:`RetrieverToolbox`); packing, exclusion and budgets are unchanged.
* ``heuristic``: a scripted multi-step agent (:mod:`sleuth.eval.heuristic`).
* ``openai:MODEL@BASE_URL``: any OpenAI-compatible chat endpoint with tool calling.

A policy keeps per-run state (its requests), so the runner asks :func:`make_policy` for a fresh
one per run; :func:`tools_for` gives the tools a baseline needs.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, Literal

from sleuth.corpus.models import doc_id_of
from sleuth.errors import InputError
from sleuth.eval.heuristic import HeuristicAgent
from sleuth.eval.transcript import final_answer, observations, query_of
from sleuth.harness.policy import Policy
from sleuth.harness.schemas import SEARCH_CORPUS
from sleuth.policies.scripted import Reply, ScriptedPolicy, call, turn
from sleuth.tools.base import Tools
from sleuth.tools.toolbox import Toolbox

POLICY_NAMES = ("single-pass", "bm25", "dense", "heuristic")
_RETRIEVER = {"bm25": "lexical", "dense": "dense"}
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
        self, query: str, exclude: Collection[str] = ()
    ) -> list[tuple[str, float]]:
        excluded, k = frozenset(exclude), self.config.candidates
        if self.retriever == "lexical":
            return self.index.lexical_search(query, k, excluded)
        return self.index.dense_search(self.index.embedder.embed_query(query), k, excluded)


def make_policy(name: str, **options: Any) -> Policy:
    """A fresh policy by name; ``options`` go to the heuristic agent or the OpenAI policy.

    Raises:
        InputError: an unknown name, or ``openai:`` without ``MODEL@BASE_URL``.
    """
    if name in ("single-pass", "bm25", "dense"):
        return _named(ScriptedPolicy(single_pass_script), name)
    if name == "heuristic":
        return _named(ScriptedPolicy(HeuristicAgent(**options)), name)
    if name.startswith("openai:"):
        return _openai_policy(name, options)
    known = ", ".join([*POLICY_NAMES, "openai:MODEL@BASE_URL"])
    raise InputError(f"unknown policy {name!r}; choose one of {known}")


def tools_for(name: str, tools: Tools) -> Tools:
    """The tools policy ``name`` runs against: a one-retriever toolbox for ``bm25``/``dense``."""
    if name not in _RETRIEVER:
        return tools
    if not isinstance(tools, Toolbox):
        raise InputError(f"policy {name!r} needs a Toolbox over an index")
    retriever: Retriever = "lexical" if name == "bm25" else "dense"
    return RetrieverToolbox(tools, retriever)


def _named(policy: ScriptedPolicy, name: str) -> ScriptedPolicy:
    policy.name = name  # recorded in the trajectory header
    return policy


def _openai_policy(spec: str, options: dict[str, Any]) -> Policy:
    model, _, base_url = spec.removeprefix("openai:").partition("@")
    if not model or not base_url:
        raise InputError(f"policy {spec!r}: write it as openai:MODEL@BASE_URL")
    from sleuth.policies.openai_chat import OpenAIChatPolicy

    return OpenAIChatPolicy(model, base_url=base_url, **options)
