"""A model drives the search; the learned selector writes the final list.

A small model can learn *where* to search from a teacher, but not the teacher's ordering: the
selector ranks with corpus-wide BM25/dense evidence and link features that are not in the
model's context. So the model's final reply is kept as its decision to stop, and its list is
replaced by the selector's order over every document still in view, as the heuristic agent
answers (:meth:`sleuth.policies.heuristic.HeuristicAgent._answer`).
"""

from __future__ import annotations

from typing import Any

from sleuth.harness.policy import Policy, PolicyOutput
from sleuth.policies.heuristic import trail
from sleuth.policies.transcript import final_answer, observations, query_of
from sleuth.ranking.selector import Selector


class SelectedFinalList:
    """Wraps ``policy``: tool turns pass through, the final list is the selector's top ``final_docs``."""

    def __init__(self, policy: Policy, selector: Selector, final_docs: int):
        self.policy = policy
        self.selector = selector
        self.final_docs = final_docs
        self.name = f"{policy.name}+selector"

    def count_tokens(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> int:
        return self.policy.count_tokens(messages, tools)

    def generate(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], max_tokens: int
    ) -> PolicyOutput:
        output = self.policy.generate(messages, tools, max_tokens)
        if output.tool_calls or not output.text.strip():
            return output
        docs, searches = trail(observations(messages), self.selector.title)
        ranked = self.selector.rank(query_of(messages), docs, searches)[: self.final_docs]
        if not ranked:  # nothing in view: the model's own reply stands
            return output
        why = f"ranked {{}} by learned selection over {len(searches)} searches"
        text = final_answer([(doc, why.format(rank)) for rank, (doc, _) in enumerate(ranked, 1)])
        # The text is no longer what the model sampled, so its tokens are not kept.
        return output.model_copy(update={"text": text, "token_ids": None, "logprobs": None})
